"""What DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554) decide, sans-IO.

Kafka's rules (``ZkAdminManager.alterUserScramCredentials`` / ``describeUserScramCredentials``):

- results are per user; one user's alteration is all or nothing, other users are unaffected;
- a (user, mechanism) named twice in one request (two upsertions, or an upsertion and a
  deletion) fails that user with DUPLICATE_RESOURCE;
- a mechanism other than SCRAM-SHA-256 (1) and SCRAM-SHA-512 (2) fails the user with
  UNSUPPORTED_SASL_MECHANISM; an empty user name (or one that cannot name a ZooKeeper node:
  ``/``, ``.``, ``..``), an empty salt or salted password, or an iteration count outside
  [4096, 16384] with UNACCEPTABLE_CREDENTIAL;
- deleting a credential the user does not have fails the user with RESOURCE_NOT_FOUND;
- the credential stored is computed from the client's salt and salted password (the password
  never travels), in Kafka's ``/config/users/<user>`` text;
- describing a named user without credentials answers RESOURCE_NOT_FOUND, a user named twice
  DUPLICATE_RESOURCE; describing all users (a null or empty list) answers every user with a
  credential.

The shell reads and writes ``/config/users`` (:mod:`impl.security.credential_store`).

This module is a sans-IO core.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from .sasl import (
    ITERATIONS_MAX,
    ITERATIONS_MIN,
    NONE,
    UNSUPPORTED_SASL_MECHANISM,
    CredentialError,
    ScramCredential,
    credential_from_salted_password,
)

__sans_io__ = True

RESOURCE_NOT_FOUND: Final = 91
DUPLICATE_RESOURCE: Final = 92
UNACCEPTABLE_CREDENTIAL: Final = 93

#: KIP-554's mechanism ids (``ScramMechanism.type``).
MECHANISM_IDS: Final[Mapping[str, int]] = MappingProxyType({"SCRAM-SHA-256": 1,
                                                             "SCRAM-SHA-512": 2})
MECHANISM_NAMES: Final[Mapping[int, str]] = MappingProxyType(
    {number: name for name, number in MECHANISM_IDS.items()})


@dataclass(frozen=True)
class Upsertion:
    """One credential to set: the client's salt and salted password (RFC 5802 ``Hi``)."""

    user: str
    mechanism_id: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True)
class Deletion:
    """One credential to remove."""

    user: str
    mechanism_id: int


@dataclass(frozen=True)
class UserChange:
    """A valid alteration of one user: credentials to set (mechanism → Kafka's text) and
    mechanisms to remove."""

    user: str
    set_credentials: Mapping[str, str] = field(default_factory=dict)
    deletions: tuple[str, ...] = ()

    def apply(self, config: Mapping[str, str]) -> dict[str, str] | tuple[int, str]:
        """The user's new ``/config/users/<user>`` config, or (error code, message) when a
        deleted credential does not exist (nothing changes then)."""
        missing = [mechanism for mechanism in self.deletions if mechanism not in config]
        if missing:
            return (RESOURCE_NOT_FOUND,
                    f"attempt to delete a user credential that does not exist: {missing[0]}")
        updated = {key: value for key, value in config.items() if key not in self.deletions}
        updated.update(self.set_credentials)
        return updated


@dataclass(frozen=True)
class AlterationPlan:
    """Per user, in the order users first appear: an error, or the change to apply."""

    errors: Mapping[str, tuple[int, str]]
    changes: Mapping[str, UserChange]
    users: tuple[str, ...]


def plan_alteration(deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
                    ) -> AlterationPlan:
    """Validate an AlterUserScramCredentials request (see the module docstring)."""
    users = tuple(dict.fromkeys([*(item.user for item in deletions),
                                 *(item.user for item in upsertions)]))
    errors: dict[str, tuple[int, str]] = {}
    seen: set[tuple[str, int]] = set()

    def fail(user: str, code: int, message: str) -> None:
        errors.setdefault(user, (code, message))

    named: list[Deletion | Upsertion] = [*deletions, *upsertions]
    for item in named:
        key = (item.user, item.mechanism_id)
        if key in seen:
            fail(item.user, DUPLICATE_RESOURCE,
                 "a user credential cannot be altered twice in the same request")
        seen.add(key)
        if not item.user:
            fail(item.user, UNACCEPTABLE_CREDENTIAL, "the user name must not be empty")
        elif "/" in item.user or item.user in (".", ".."):
            fail(item.user, UNACCEPTABLE_CREDENTIAL,
                 f"the user name {item.user!r} cannot name a /config/users node")
        if item.mechanism_id not in MECHANISM_NAMES:
            fail(item.user, UNSUPPORTED_SASL_MECHANISM,
                 f"unknown SCRAM mechanism {item.mechanism_id}")
    credentials: dict[str, dict[str, str]] = {}
    for upsertion in upsertions:
        if upsertion.user in errors:
            continue
        if not ITERATIONS_MIN <= upsertion.iterations <= ITERATIONS_MAX:
            fail(upsertion.user, UNACCEPTABLE_CREDENTIAL,
                 f"iterations {upsertion.iterations} outside [{ITERATIONS_MIN}, "
                 f"{ITERATIONS_MAX}]")
            continue
        if not upsertion.salt or not upsertion.salted_password:
            fail(upsertion.user, UNACCEPTABLE_CREDENTIAL,
                 "the salt and the salted password must not be empty")
            continue
        mechanism = MECHANISM_NAMES[upsertion.mechanism_id]
        try:
            credential = credential_from_salted_password(
                mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations)
        except CredentialError as error:
            fail(upsertion.user, UNACCEPTABLE_CREDENTIAL, str(error))
            continue
        credentials.setdefault(upsertion.user, {})[mechanism] = credential.to_text()
    changes = {
        user: UserChange(user, credentials.get(user, {}), tuple(
            MECHANISM_NAMES[item.mechanism_id] for item in deletions if item.user == user))
        for user in users if user not in errors
    }
    return AlterationPlan(errors, changes, users)


@dataclass(frozen=True)
class DescribedUser:
    """One user's result: an error, or its mechanisms and iteration counts."""

    user: str
    error_code: int = NONE
    error_message: str | None = None
    credentials: tuple[tuple[int, int], ...] = ()  #: (mechanism id, iterations)


def describe(requested: Sequence[str] | None,
             stored: Mapping[str, Mapping[str, str]]) -> list[DescribedUser]:
    """DescribeUserScramCredentials' results for ``requested`` (None or empty: every user
    with a credential) given ``stored`` (user → its ``/config/users`` config)."""
    def credentials_of(user: str) -> tuple[tuple[int, int], ...]:
        found = []
        for mechanism, number in MECHANISM_IDS.items():
            text = stored.get(user, {}).get(mechanism)
            if text is None:
                continue
            try:
                found.append((number, ScramCredential.from_text(text).iterations))
            except CredentialError:
                continue  # a damaged credential cannot be used to log in: not described
        return tuple(found)

    if not requested:  # Kafka: a null or empty list describes every user
        return [DescribedUser(user, credentials=credentials_of(user))
                for user in sorted(stored) if credentials_of(user)]
    results: list[DescribedUser] = []
    counts = {user: list(requested).count(user) for user in requested}
    for user in dict.fromkeys(requested):
        if counts[user] > 1:
            results.append(DescribedUser(
                user, DUPLICATE_RESOURCE,
                "cannot describe SCRAM credentials for the same user twice in a single "
                "request"))
            continue
        credentials = credentials_of(user)
        if not credentials:
            results.append(DescribedUser(user, RESOURCE_NOT_FOUND,
                                         "attempt to describe nonexistent user credentials"))
            continue
        results.append(DescribedUser(user, credentials=credentials))
    return results
