"""The broker's view of the cluster, fed by UpdateMetadata from the controller.

Metadata requests are answered from here. A partition state whose leader is -2
(``LeaderDuringDelete``) removes the partition, as Kafka's ``ZkMetadataCache`` does; a topic with
no partitions left disappears.

This module is a sans-IO core.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from impl.controller.znodes import ListenerEndpoint

__sans_io__ = True

LEADER_DURING_DELETE: Final = -2


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """A live broker as clients should reach it."""

    broker_id: int
    host: str
    port: int
    rack: str | None
    #: every advertised listener (empty: only ``host:port``)
    listeners: tuple[ListenerEndpoint, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """One partition as the controller last described it."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]


class MetadataCache:
    """Live brokers, controller id and partition states."""

    def __init__(self) -> None:
        self.controller_id = -1
        self._brokers: dict[int, BrokerEndpoint] = {}
        self._topics: dict[str, dict[int, PartitionMetadata]] = {}

    def update(
        self,
        controller_id: int,
        brokers: Iterable[BrokerEndpoint],
        partitions: Iterable[PartitionMetadata],
    ) -> None:
        """Apply one UpdateMetadata request: replace the broker list, upsert partition states.

        Args:
            controller_id: the sending controller.
            brokers: every live broker (the full list).
            partitions: changed partition states (leader -2 deletes the partition).
        """
        self.controller_id = controller_id
        self._brokers = {broker.broker_id: broker for broker in brokers}
        for state in partitions:
            if state.leader == LEADER_DURING_DELETE:
                topic = self._topics.get(state.topic)
                if topic is not None:
                    topic.pop(state.partition, None)
                    if not topic:
                        del self._topics[state.topic]
                continue
            self._topics.setdefault(state.topic, {})[state.partition] = state

    def add_brokers(self, brokers: Iterable[BrokerEndpoint]) -> None:
        """Add or replace brokers without dropping the others (this broker at start-up)."""
        for broker in brokers:
            self._brokers[broker.broker_id] = broker

    @property
    def brokers(self) -> list[BrokerEndpoint]:
        """Live brokers, by id."""
        return [self._brokers[broker_id] for broker_id in sorted(self._brokers)]

    def broker(self, broker_id: int) -> BrokerEndpoint | None:
        """One live broker, or None."""
        return self._brokers.get(broker_id)

    @property
    def topics(self) -> list[str]:
        """Known topic names, sorted."""
        return sorted(self._topics)

    def has_topic(self, topic: str) -> bool:
        """Whether the topic exists in the cache."""
        return topic in self._topics

    def partitions(self, topic: str) -> list[PartitionMetadata]:
        """The topic's partitions, by index (empty if unknown)."""
        states = self._topics.get(topic, {})
        return [states[index] for index in sorted(states)]

    def partition(self, topic: str, partition: int) -> PartitionMetadata | None:
        """One partition's state, or None."""
        return self._topics.get(topic, {}).get(partition)
