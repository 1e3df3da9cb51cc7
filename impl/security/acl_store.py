"""ACL bindings in ZooKeeper, as Kafka stores them, kept in memory by every broker.

Layout and JSON: :mod:`impl.security.authorizer` (``/kafka-acl/<Type>/<name>``,
``/kafka-acl-extended/prefixed/<Type>/<name>``, change notifications under
``/kafka-acl-changes`` and ``/kafka-acl-extended-changes``). A write reads the pattern's node,
changes its entry set and writes it back with the version it read (a compare-and-set, retried on
a conflict, as ``AclAuthorizer.updateResourceAcls`` does), then creates a sequential change
notification; every broker watches both notification roots and reloads the patterns they name,
so a binding created through one broker is enforced by all.

This is a shell: it reads and writes bytes through the coordinator port and feeds the sans-IO
:class:`~impl.security.authorizer.Authorizer`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Sequence
from typing import Final

from impl.controller.coordinator import (
    BadVersionError,
    Coordinator,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)

from .authorizer import (
    CHANGE_PREFIX,
    EXTENDED_ACL_ROOT,
    EXTENDED_CHANGES_ROOT,
    LITERAL_ACL_ROOT,
    LITERAL_CHANGES_ROOT,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Authorizer,
    ResourcePattern,
    acl_path,
    decode_change,
    decode_entries,
    encode_change,
    encode_entries,
    pattern_from_path,
)

log = logging.getLogger(__name__)

#: Compare-and-set attempts before a write gives up (each conflict means another writer won).
CAS_ATTEMPTS_MAX: Final = 20
#: Change notifications kept behind the newest one processed (older ones are purged).
CHANGES_KEPT: Final = 1000
CHANGE_ROOTS: Final = (LITERAL_CHANGES_ROOT, EXTENDED_CHANGES_ROOT)


class AclStoreError(Exception):
    """A write could not be completed (conflicts beyond the bound)."""


async def _ensure_path(coordinator: Coordinator, path: str) -> None:
    current = ""
    for part in (part for part in path.split("/") if part):
        current = f"{current}/{part}"
        with contextlib.suppress(NodeExistsError):
            await coordinator.create(current)


class AclStore:
    """The broker's copy of the ACLs and the writer of CreateAcls/DeleteAcls.

    Args:
        coordinator: the broker's ZooKeeper session (its watch events are routed to
            :meth:`on_watch` by the broker's event loop); None until the broker connects.
        authorizer: the sans-IO binding set this store keeps current.
    """

    def __init__(self, coordinator: Coordinator | None, authorizer: Authorizer) -> None:
        self._coordinator = coordinator
        self.authorizer = authorizer
        self._seen: dict[str, int] = dict.fromkeys(CHANGE_ROOTS, -1)

    @property
    def coordinator(self) -> Coordinator:
        """The ZooKeeper session.

        Raises:
            AclStoreError: the broker is not connected to ZooKeeper yet.
        """
        if self._coordinator is None:
            raise AclStoreError("the broker is not connected to ZooKeeper yet")
        return self._coordinator

    @coordinator.setter
    def coordinator(self, coordinator: Coordinator) -> None:
        self._coordinator = coordinator

    def owns(self, path: str) -> bool:
        """Whether a watch event on ``path`` is for this store."""
        return path in CHANGE_ROOTS

    async def load(self) -> None:
        """Read every stored pattern and arm the change watches (start-up and reconnection)."""
        for root in (LITERAL_ACL_ROOT, f"{EXTENDED_ACL_ROOT}/prefixed", *CHANGE_ROOTS):
            await _ensure_path(self.coordinator, root)
        patterns: list[ResourcePattern] = []
        for root in (LITERAL_ACL_ROOT, f"{EXTENDED_ACL_ROOT}/prefixed"):
            for type_name in await self.coordinator.children(root):
                for name in await self.coordinator.children(f"{root}/{type_name}"):
                    try:
                        patterns.append(pattern_from_path(f"{root}/{type_name}/{name}"))
                    except (KeyError, ValueError):
                        log.warning("ignoring unknown ACL node %s/%s/%s", root, type_name, name)
        for pattern in self.authorizer.patterns():
            if pattern not in patterns:
                self.authorizer.apply(pattern, ())
        for pattern in patterns:
            await self._reload(pattern)
        for root in CHANGE_ROOTS:
            await self._process_changes(root)

    async def on_watch(self, path: str) -> None:
        """A change-notification root changed: reload the patterns its new children name."""
        await self._process_changes(path)

    async def _process_changes(self, root: str) -> None:
        children = sorted(await self.coordinator.children(root, watch=True))
        sequences: list[tuple[int, str]] = []
        for child in children:
            if child.startswith(CHANGE_PREFIX):
                try:
                    sequences.append((int(child[len(CHANGE_PREFIX):]), child))
                except ValueError:
                    continue
        for sequence, child in sorted(sequences):
            if sequence <= self._seen[root]:
                continue
            try:
                data, _ = await self.coordinator.get(f"{root}/{child}")
                pattern = decode_change(root, data)
            except NoNodeError:
                continue
            except (KeyError, ValueError) as error:
                log.warning("ignoring malformed ACL change %s/%s: %s", root, child, error)
                self._seen[root] = sequence
                continue
            await self._reload(pattern)
            self._seen[root] = sequence
        for sequence, child in sorted(sequences):
            if sequence >= self._seen[root] - CHANGES_KEPT:
                break
            with contextlib.suppress(NoNodeError):
                await self.coordinator.delete(f"{root}/{child}")

    async def _reload(self, pattern: ResourcePattern) -> None:
        try:
            data, _ = await self.coordinator.get(acl_path(pattern))
            entries = decode_entries(data)
        except NoNodeError:
            entries = frozenset()
        except (KeyError, ValueError) as error:
            log.warning("ignoring malformed ACL node %s: %s", acl_path(pattern), error)
            return
        self.authorizer.apply(pattern, entries)

    async def _update(self, pattern: ResourcePattern, add: Iterable[AccessControlEntry] = (),
                      remove: Iterable[AccessControlEntry] = ()) -> frozenset[AccessControlEntry]:
        """Add and remove entries of one pattern with a compare-and-set; the entries removed.

        Raises:
            AclStoreError: conflicts beyond :data:`CAS_ATTEMPTS_MAX`.
        """
        path = acl_path(pattern)
        added, removed = frozenset(add), frozenset(remove)
        for _ in range(CAS_ATTEMPTS_MAX):
            try:
                data, stat = await self.coordinator.get(path)
                current: frozenset[AccessControlEntry] | None = decode_entries(data)
                version = stat.version
            except NoNodeError:
                current, version = None, -1
            before = current or frozenset()
            after = (before | added) - removed
            if after == before:
                self.authorizer.apply(pattern, after)
                return frozenset()
            try:
                if current is None:
                    await _ensure_path(self.coordinator, path.rsplit("/", 1)[0])
                    await self.coordinator.create(path, encode_entries(after))
                elif after:
                    await self.coordinator.set(path, encode_entries(after), version=version)
                else:
                    await self.coordinator.delete(path, version=version)
            except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
                continue
            root, change = encode_change(pattern)
            await self.coordinator.create(f"{root}/{CHANGE_PREFIX}", change, sequential=True)
            self.authorizer.apply(pattern, after)
            return before - after
        raise AclStoreError(f"gave up updating {path} after {CAS_ATTEMPTS_MAX} conflicts")

    async def create(self, bindings: Sequence[AclBinding]) -> None:
        """Store bindings (already validated), grouped per pattern.

        Raises:
            AclStoreError: see :meth:`_update`.
        """
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding in bindings:
            by_pattern.setdefault(binding.pattern, set()).add(binding.entry)
        for pattern, entries in sorted(by_pattern.items()):
            await self._update(pattern, add=entries)

    def describe(self, query: AclBindingFilter) -> list[AclBinding]:
        """The cached bindings matching ``query`` (Kafka answers DescribeAcls from its cache)."""
        return [binding for binding in self.authorizer.bindings() if query.matches(binding)]

    async def delete(self, query: AclBindingFilter) -> list[AclBinding]:
        """Remove every binding matching ``query``; the bindings removed.

        Raises:
            AclStoreError: see :meth:`_update`.
        """
        deleted: list[AclBinding] = []
        for pattern in sorted(self.authorizer.patterns()):
            if not query.matches_pattern(pattern):
                continue
            doomed = [entry for entry in self.authorizer.entries(pattern)
                      if query.matches_entry(entry)]
            if doomed:
                gone = await self._update(pattern, remove=doomed)
                deleted.extend(AclBinding(pattern, entry) for entry in sorted(gone))
        return deleted
