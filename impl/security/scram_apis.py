"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554), v0.

The decisions are :mod:`impl.security.scram_credentials`' (sans-IO); this shell reads and
writes ``/config/users`` through :mod:`impl.security.credential_store`. DESCRIBE (describe) and
ALTER (alter) on the cluster are checked by the dispatcher (:mod:`impl.security.request_acls`).
Passwords never reach the broker: a client sends a salt and the salted password.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from impl.broker._codec import DecodedRequest, encode_response
from impl.broker._kio_build import build
from impl.controller.coordinator import Coordinator, CoordinatorError

from . import scram_credentials as scram
from .credential_store import CredentialStoreError, read_users, update_user
from .sasl import NONE

log = logging.getLogger(__name__)

UNKNOWN_SERVER_ERROR: Final = -1


class ScramApis:
    """The two KIP-554 handlers.

    Args:
        coordinator: the broker's ZooKeeper connection (None until it has one).
    """

    def __init__(self, coordinator: Callable[[], Coordinator | None]) -> None:
        self._coordinator = coordinator

    @staticmethod
    def _answer(request: DecodedRequest, data: dict[str, Any]) -> bytes:
        return encode_response(request, build(request.response_class, data))

    async def describe_user_scram_credentials(self, request: DecodedRequest) -> bytes:
        """Each named user's mechanisms and iteration counts (``users`` null: every user)."""
        body = request.body
        requested = [str(user.name) for user in body.users] if body.users else None
        coordinator = self._coordinator()
        if coordinator is None:
            return self._answer(request, {
                "throttle_time": 0, "error_code": UNKNOWN_SERVER_ERROR,
                "error_message": "the broker has no ZooKeeper connection", "results": []})
        try:
            stored = await read_users(coordinator, requested)
        except CoordinatorError as error:
            log.warning("DescribeUserScramCredentials: %r", error)
            return self._answer(request, {
                "throttle_time": 0, "error_code": UNKNOWN_SERVER_ERROR,
                "error_message": f"reading /config/users: {error}", "results": []})
        results = [{
            "user": item.user, "error_code": item.error_code,
            "error_message": item.error_message,
            "credential_infos": [{"mechanism": mechanism, "iterations": iterations}
                                 for mechanism, iterations in item.credentials],
        } for item in scram.describe(requested, stored)]
        return self._answer(request, {"throttle_time": 0, "error_code": NONE,
                                      "error_message": None, "results": results})

    async def alter_user_scram_credentials(self, request: DecodedRequest) -> bytes:
        """Apply each user's deletions and upsertions (all or nothing per user)."""
        body = request.body
        plan = scram.plan_alteration(
            [scram.Deletion(str(item.name), int(item.mechanism)) for item in body.deletions],
            [scram.Upsertion(str(item.name), int(item.mechanism), int(item.iterations),
                             bytes(item.salt), bytes(item.salted_password))
             for item in body.upsertions])
        outcome: dict[str, tuple[int, str | None]] = dict(plan.errors)
        coordinator = self._coordinator()
        for user, change in plan.changes.items():
            if coordinator is None:
                outcome[user] = (UNKNOWN_SERVER_ERROR, "the broker has no ZooKeeper connection")
                continue
            try:
                refused = await update_user(coordinator, user, change.apply)
            except (CoordinatorError, CredentialStoreError) as error:
                log.warning("AlterUserScramCredentials %s: %r", user, error)
                outcome[user] = (UNKNOWN_SERVER_ERROR, str(error))
                continue
            outcome[user] = refused if refused is not None else (NONE, None)
            if refused is None:
                log.info("SCRAM credentials of %s altered (set %s, deleted %s)", user,
                         sorted(change.set_credentials), list(change.deletions))
        return self._answer(request, {"throttle_time": 0, "results": [
            {"user": user, "error_code": outcome[user][0], "error_message": outcome[user][1]}
            for user in plan.users]})
