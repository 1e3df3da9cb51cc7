from __future__ import annotations

from impl.broker.metadata_cache import BrokerEndpoint, MetadataCache, PartitionMetadata


def _state(topic: str, partition: int, leader: int) -> PartitionMetadata:
    return PartitionMetadata(topic, partition, leader, 0, (1,), (1,), ())


def test_update_replaces_brokers_and_upserts_partitions() -> None:
    cache = MetadataCache()
    cache.add_brokers([BrokerEndpoint(1, "h", 1, None)])
    cache.update(7, [BrokerEndpoint(2, "g", 2, "r")], [_state("a", 1, 2), _state("a", 0, 2)])
    assert cache.controller_id == 7
    assert [b.broker_id for b in cache.brokers] == [2]
    assert [p.partition for p in cache.partitions("a")] == [0, 1]
    cache.update(7, cache.brokers, [_state("a", 0, -2)])
    assert [p.partition for p in cache.partitions("a")] == [1]
    cache.update(7, cache.brokers, [_state("a", 1, -2)])
    assert not cache.has_topic("a")
    assert cache.topics == []
