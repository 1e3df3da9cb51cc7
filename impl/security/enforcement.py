"""The broker's side of authorization: asks the authorizer for the current session, logs denials.

Kafka's ``kafka.authorizer.logger`` logs every denial; logproof logs each denial once per
principal, operation and resource (then counts them), so a client retrying in a loop does not
flood the log. The set of logged denials is bounded.
"""

from __future__ import annotations

import logging
from typing import Final

from .authorizer import AclOperation, Authorizer, Resource
from .session import Session, current_session

log = logging.getLogger("logproof.authorizer")

#: Distinct denials remembered for the once-only log (beyond it, denials are counted only).
LOGGED_DENIALS_MAX: Final = 10_000


class RequestAuthorizer:
    """Decides the actions of the request being handled.

    Args:
        authorizer: the binding set (kept current by the ACL store).
    """

    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer
        self.denials = 0
        self._logged: set[tuple[str, str, AclOperation, Resource]] = set()

    def allowed(self, operation: AclOperation, resource: Resource,
                session: Session | None = None) -> bool:
        """Whether the session (default: the current one) may do ``operation`` on ``resource``."""
        who = session if session is not None else current_session()
        decision = self.authorizer.authorize(who.principal, who.host, operation, resource)
        if not decision.allowed:
            self.denials += 1
            key = (who.principal, who.host, operation, resource)
            if key not in self._logged and len(self._logged) < LOGGED_DENIALS_MAX:
                self._logged.add(key)
                log.warning("principal %s from %s denied %s on %s %s (%s)", who.principal,
                            who.host, operation.name, resource.resource_type.name,
                            resource.name, decision.reason)
        return decision.allowed
