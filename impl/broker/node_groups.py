"""The group coordinator hosted by the broker node.

:class:`GroupHost` is the part of :class:`impl.broker.node.BrokerNode` that carries the inputs
and effects of the broker's :class:`~impl.broker.group_coordinator.GroupCoordinator`, so that the
trio broker and the cluster simulator, which both pump the node, pump the coordinator with the
same objects:

* **Leadership.** A ``RoleChanged`` of a ``__consumer_offsets`` partition that the node decided
  (LeaderAndIsr, StopReplica, a failed dir) becomes the coordinator's ``Elected`` (this broker
  leads it: load) or ``Resigned`` (unload) in the same step, so the coordinator never serves a
  partition the node no longer leads, and no shell polls leadership.
* **Loading.** The coordinator's ``ReadPartition`` is read through the node's storage port, as
  the node reads a log to rebuild a producer's state, one chunk per tick (the next tick at once
  in the trio broker, :meth:`GroupHost.reading`); a retry after a failed read waits for its
  back-off. Requests in between are answered COORDINATOR_LOAD_IN_PROGRESS.
* **Writes.** The coordinator's ``Append`` (acks=all) becomes the node's own ``Produce`` from
  the client :data:`GROUP_CLIENT`: the same checks, the same append effect, the same wait for
  the high watermark as a client's produce; its answer becomes ``AppendCompleted``. The append
  is marked ``Append.coordinator``: it may come out of any step, not only a client's request.
* **Requests.** :class:`GroupCall` carries a group API request from ``client``; its answer is
  the node's ``Reply(client, Respond)``.
* **Time.** The node's ``Tick`` (the simulator's) and :class:`GroupTick` (the trio broker's
  timer) tick the coordinator on its wall clock when one of its deadlines has passed.

This module is a sans-IO core.
"""

from __future__ import annotations

from typing import Any, Final

from impl.storage import record_batch as rb
from impl.storage.errors import RecordBatchError, StorageError
from impl.storage.names import TopicPartition

from . import group_coordinator as gc
from . import group_records
from .node import Append, BrokerNode, Effect, GroupCall, Produce, Reply, RoleChanged
from .replication import ReplicaRole

__sans_io__ = True

#: The client id of the coordinator's own produces to ``__consumer_offsets``.
GROUP_CLIENT: Final = -3


class GroupHost:
    """The coordinator's inputs and effects inside the broker node.

    Args:
        node: the node hosting the coordinator.
        coordinator: the coordinator (its trace sink is the shell's).
        commit_timeout_ms: ``offsets.commit.timeout.ms``: the timeout of its produces.
    """

    def __init__(self, node: BrokerNode, coordinator: gc.GroupCoordinator,
                 commit_timeout_ms: int) -> None:
        self.node = node
        self.coordinator = coordinator
        self.commit_timeout_ms = commit_timeout_ms
        #: request id -> the client it came from
        self.clients: dict[int, int] = {}
        #: produce request id -> the coordinator's token (None: acks=0, no completion)
        self.produces: dict[int, int | None] = {}
        #: reads that wait (a retry): (due wall ms, read)
        self.reads: list[tuple[int, gc.ReadPartition]] = []
        #: the coordinator's next deadline (wall ms), None when nothing waits
        self.due_ms: int | None = None
        self._request_ids = 0

    # --- inputs --------------------------------------------------------------------------

    def call(self, call: GroupCall, out: list[Effect]) -> None:
        """A group request."""
        self.clients[call.request.request_id] = call.client
        self.step(call.request, out)

    def tick(self, out: list[Effect]) -> None:
        """Time passed: the reads now due, then the coordinator's own deadlines."""
        now = self.node.wall_ms()
        if self.reads:
            due = [read for at, read in self.reads if at <= now]
            if due:
                self.reads = [(at, read) for at, read in self.reads if at > now]
                for read in due:
                    self.step(self._read(read), out)
        if self.due_ms is not None and now >= self.due_ms:
            self.step(gc.Tick(), out)

    def follow_roles(self, out: list[Effect]) -> None:
        """The node changed roles in this step: load the offsets partitions it now leads,
        unload the ones it stopped leading."""
        changes = [e for e in out if type(e) is RoleChanged and e.tp.topic == gc.OFFSETS_TOPIC]
        for change in changes:
            state = change.state
            partition = change.tp.partition
            if state is not None and state.role is ReplicaRole.LEADER:
                self.step(gc.Elected(partition, state.leader_epoch), out)
            elif self.coordinator.coordinator_state(partition) is not \
                    gc.CoordinatorState.UNLOADED:
                self.step(gc.Resigned(partition, -1 if state is None else state.leader_epoch),
                          out)

    def route(self, out: list[Effect]) -> None:
        """Take the answers to the coordinator's produces out of ``out`` and step them as
        ``AppendCompleted``."""
        answers = [e for e in out if type(e) is Reply and e.client == GROUP_CLIENT]
        if not answers:
            return
        out[:] = [e for e in out if not (type(e) is Reply and e.client == GROUP_CLIENT)]
        for answer in answers:
            reply = answer.message
            token = self.produces.pop(reply.request_id, None)
            if token is not None:
                self.step(gc.AppendCompleted(token, reply.error), out)

    # --- the coordinator's effects -------------------------------------------------------

    def step(self, event: object, out: list[Effect]) -> None:
        """Step the coordinator and carry out its effects (reads and produce answers that
        come at once are stepped in turn)."""
        events = [event]
        while events:
            now = self.node.wall_ms()
            for effect in self.coordinator.step(events.pop(0), now):  # type: ignore[arg-type]
                kind = type(effect)
                if kind is gc.Respond:
                    assert isinstance(effect, gc.Respond)
                    client = self.clients.pop(effect.request_id, None)
                    if client is not None:
                        out.append(Reply(client, effect))
                elif kind is gc.Append:
                    assert isinstance(effect, gc.Append)
                    events.extend(self._produce(effect, out))
                else:
                    # a chunk of a load is read on the next tick (a retry after its back-off):
                    # requests in between are answered COORDINATOR_LOAD_IN_PROGRESS, and a
                    # large partition never holds the node's step for its whole replay
                    assert isinstance(effect, gc.ReadPartition)
                    self.reads.append((now + effect.backoff_ms, effect))
        self.due_ms = self.coordinator.next_deadline_ms()

    def reading(self) -> bool:
        """Whether a load has a chunk to read at the next tick."""
        now = self.node.wall_ms()
        return any(at <= now for at, _ in self.reads)

    def _produce(self, effect: gc.Append, out: list[Effect]) -> list[object]:
        """The coordinator's append as the node's own produce; the completions of answers
        given at once."""
        node = self.node
        now = node.wall_ms()
        self._request_ids += 1
        request_id = self._request_ids
        self.produces[request_id] = effect.token if effect.acks != 0 else None
        produced: list[Effect] = []
        node.step_produce(Produce(
            GROUP_CLIENT, request_id, TopicPartition(gc.OFFSETS_TOPIC, effect.partition),
            group_records.build_records(effect.records, now), effect.acks,
            self.commit_timeout_ms, now), produced)
        completions: list[object] = []
        for item in produced:
            if type(item) is Reply and item.client == GROUP_CLIENT:
                reply: Any = item.message
                token = self.produces.pop(reply.request_id, None)
                if token is not None:
                    completions.append(gc.AppendCompleted(token, reply.error))
            elif type(item) is Append:
                out.append(item._replace(coordinator=True))
            else:
                out.append(item)
        return completions

    def _read(self, effect: gc.ReadPartition) -> gc.PartitionRead:
        """Read the next chunk of a partition being loaded through the node's storage port
        (only while this broker leads it in the load's epoch)."""
        node = self.node
        tp = TopicPartition(gc.OFFSETS_TOPIC, effect.partition)
        error, partition_log = node.leader_log(tp, effect.leader_epoch)
        if partition_log is None:
            return gc.PartitionRead(effect.partition, effect.leader_epoch, (), effect.offset,
                                    False, f"error {error}")
        offset = partition_log.log_start_offset if effect.offset < 0 else effect.offset
        end = partition_log.log_end_offset
        batches: list[bytes] = []
        next_offset = offset
        failure: str | None = None
        if offset < end:
            try:
                data = node.store.read_bytes(tp, offset, effect.max_bytes)
                whole = rb.valid_prefix(data)
                for header in whole.headers:
                    if header.next_offset <= offset:
                        continue
                    batches.append(data[header.position:header.position
                                        + header.size_in_bytes])
                    next_offset = header.next_offset
            except (StorageError, OSError, RecordBatchError) as read_error:
                failure = str(read_error)
        at_end = failure is None and (next_offset >= end or not batches)
        return gc.PartitionRead(effect.partition, effect.leader_epoch, tuple(batches),
                                next_offset, at_end, failure)


__all__ = ["GROUP_CLIENT", "GroupHost"]
