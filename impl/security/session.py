"""Who sent the request being handled: the connection's session, carried by a context variable.

The server sets it for each connection task (and again once SASL authentication succeeds);
handlers read it through :func:`current_session` without every handler signature carrying it.
A trio task inherits the context of the task that started it, and each connection's requests
are handled in that connection's own task, so the value is per connection.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Final

#: Kafka's principal of an unauthenticated connection (PLAINTEXT, or SSL without a client
#: certificate).
ANONYMOUS: Final = "User:ANONYMOUS"


@dataclass(frozen=True, slots=True)
class Session:
    """An authenticated (or anonymous) peer.

    Attributes:
        principal: ``User:<name>`` (``User:ANONYMOUS`` before or without authentication).
        host: the peer's address (ACL host matching).
        listener: the listener's name (``PLAINTEXT``, ``SASL_SSL``, ``INTERNAL`` …).
    """

    principal: str
    host: str
    listener: str = "PLAINTEXT"


#: The session of the request being handled (unset: an in-process call, treated as anonymous).
_CURRENT: contextvars.ContextVar[Session] = contextvars.ContextVar("logproof_session")


def current_session() -> Session:
    """The session of the connection whose request is being handled."""
    return _CURRENT.get(Session(ANONYMOUS, "127.0.0.1"))


def set_session(session: Session) -> None:
    """Make ``session`` the current one for this task (and the tasks it starts later)."""
    _CURRENT.set(session)
