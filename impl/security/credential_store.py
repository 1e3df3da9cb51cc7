"""SCRAM credentials in ZooKeeper, as Kafka stores them (KIP-84): the shell both the broker's
AlterUserScramCredentials/DescribeUserScramCredentials and ``logproof users --zookeeper`` use.

``/config/users/<user>`` holds ``{"version":1,"config":{"SCRAM-SHA-512":"salt=…,…"}}`` (other
keys of the user's config, such as quotas, are kept as they are); every change is written with
a compare-and-set on the node's version and announced by a
``/config/changes/config_change_<seq>`` notification. Brokers read a credential at each login,
so a change takes effect at the next one.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Final

from impl.controller.coordinator import (
    BadVersionError,
    Coordinator,
    NodeExistsError,
    NoNodeError,
)

from .sasl import (
    CONFIG_CHANGE_PREFIX,
    CONFIG_CHANGES_ROOT,
    USERS_CONFIG_ROOT,
    decode_user_config,
    encode_user_change,
    encode_user_config,
    user_config_path,
)

log = logging.getLogger(__name__)

#: Compare-and-set attempts against concurrent writers of one user's node.
ATTEMPTS_MAX: Final = 20

#: A user's config → its new config, or (error code, message) to change nothing.
UserUpdate = Callable[[dict[str, str]], "dict[str, str] | tuple[int, str]"]


class CredentialStoreError(Exception):
    """The node could not be updated (too many concurrent writers, or a malformed node)."""


async def _ensure(coordinator: Coordinator, path: str) -> None:
    current = ""
    for part in (part for part in path.split("/") if part):
        current = f"{current}/{part}"
        with contextlib.suppress(NodeExistsError):
            await coordinator.create(current)


async def update_user(coordinator: Coordinator, user: str, update: UserUpdate
                      ) -> tuple[int, str] | None:
    """Apply ``update`` to ``/config/users/<user>`` with a compare-and-set and notify
    ``/config/changes``.

    Returns:
        None when written, else the (error code, message) ``update`` refused with.

    Raises:
        CredentialStoreError: too many concurrent writers, or a node that is not Kafka's JSON.
        CoordinatorError: ZooKeeper failed.
    """
    path = user_config_path(user)
    await _ensure(coordinator, USERS_CONFIG_ROOT)
    await _ensure(coordinator, CONFIG_CHANGES_ROOT)
    for _ in range(ATTEMPTS_MAX):
        try:
            data, stat = await coordinator.get(path)
            version = stat.version
        except NoNodeError:
            data, version = b"", -1
        try:
            config = decode_user_config(data)
        except ValueError as error:
            raise CredentialStoreError(f"{path}: {error}") from None
        updated = update(config)
        if isinstance(updated, tuple):
            return updated
        try:
            if version < 0:
                await coordinator.create(path, encode_user_config(updated))
            else:
                await coordinator.set(path, encode_user_config(updated), version=version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue
        await coordinator.create(f"{CONFIG_CHANGES_ROOT}/{CONFIG_CHANGE_PREFIX}",
                                 encode_user_change(user), sequential=True)
        return None
    raise CredentialStoreError(f"could not update {path}: too many concurrent writers")


async def read_users(coordinator: Coordinator, users: Sequence[str] | None
                     ) -> dict[str, dict[str, str]]:
    """The configs of ``users`` (None: every user under ``/config/users``); a user without a
    node, or whose node is not Kafka's JSON, is left out (and logged)."""
    if users is None:
        try:
            names = sorted(await coordinator.children(USERS_CONFIG_ROOT))
        except NoNodeError:
            return {}
    else:
        names = [user for user in dict.fromkeys(users) if user and "/" not in user]
    found: dict[str, dict[str, str]] = {}
    for user in names:
        try:
            data, _ = await coordinator.get(user_config_path(user))
        except NoNodeError:
            continue
        try:
            found[user] = decode_user_config(data)
        except ValueError as error:
            log.warning("%s: %s", user_config_path(user), error)
    return found
