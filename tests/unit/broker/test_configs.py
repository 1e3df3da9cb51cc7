"""The config core: validation names the key, resolution follows Kafka's order, znode formats."""

from __future__ import annotations

import json

import pytest

from impl.broker import configs
from impl.broker.config import ConfigError, load_config
from impl.broker.configs import (
    AlterOp,
    BrokerLayers,
    ConfigSource,
    InvalidConfigError,
    InvalidRequestError,
    ResourceType,
)
from impl.storage.log_config import LogConfig, TopicLogConfigs

TOPIC = ResourceType.TOPIC
BROKER = ResourceType.BROKER


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("retention.ms", "soon"),
        ("retention.ms", "-2"),
        ("segment.bytes", "13"),
        ("cleanup.policy", "compact,shred"),
        ("min.insync.replicas", "0"),
        ("unclean.leader.election.enable", "yes"),
        ("message.timestamp.type", "WallTime"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("min.cleanable.dirty.ratio", "nan"),
        ("delete.retention.ms", "-1"),
        ("leader.replication.throttled.replicas", "0-1"),
        ("no.such.key", "1"),
    ],
)
def test_invalid_topic_values_name_the_key(key: str, value: str) -> None:
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")):
        configs.validate(TOPIC, {key: value})


def test_valid_topic_values_parse() -> None:
    parsed = configs.validate(TOPIC, {
        "cleanup.policy": "compact, delete", "retention.ms": "-1",
        "min.cleanable.dirty.ratio": "0.01", "follower.replication.throttled.replicas": "0:1,1:2",
        "leader.replication.throttled.replicas": "*",
    })
    assert parsed["cleanup.policy"] == frozenset({"compact", "delete"})
    assert parsed["retention.ms"] == -1
    assert parsed["leader.replication.throttled.replicas"] == ("*",)


def test_broker_static_keys_cannot_be_altered() -> None:
    with pytest.raises(InvalidConfigError, match=r"broker\.id"):
        configs.validate(BROKER, {"broker.id": "3"})
    configs.validate(BROKER, {"follower.replication.throttled.rate": "1000",
                              "log.retention.ms": "1000"})


def test_incremental_operations() -> None:
    current = {"cleanup.policy": "delete", "retention.ms": "1000"}
    result = configs.incremental_alter(TOPIC, current, [
        ("cleanup.policy", AlterOp.APPEND, "compact"),
        ("retention.ms", AlterOp.DELETE, None),
        ("segment.ms", AlterOp.SET, "60000"),
    ])
    assert result == {"cleanup.policy": "delete,compact", "segment.ms": "60000"}
    result = configs.incremental_alter(TOPIC, result, [
        ("cleanup.policy", AlterOp.SUBTRACT, "delete"),
    ])
    assert result["cleanup.policy"] == "compact"
    # APPEND to an unset list starts from the effective value.
    appended = configs.incremental_alter(
        TOPIC, {}, [("cleanup.policy", AlterOp.APPEND, "compact")],
        effective=lambda key: "delete",
    )
    assert appended == {"cleanup.policy": "delete,compact"}
    with pytest.raises(InvalidConfigError, match=r"retention\.ms"):
        configs.incremental_alter(TOPIC, {}, [("retention.ms", AlterOp.APPEND, "5")])
    with pytest.raises(InvalidRequestError, match=r"retention\.ms"):
        configs.incremental_alter(TOPIC, {}, [("retention.ms", AlterOp.SET, "5"),
                                              ("retention.ms", AlterOp.DELETE, None)])
    with pytest.raises(InvalidRequestError):
        configs.incremental_alter(TOPIC, {}, [("retention.ms", AlterOp.SET, None)])
    with pytest.raises(InvalidConfigError, match=r"segment\.bytes"):
        configs.incremental_alter(TOPIC, {}, [("segment.bytes", AlterOp.SET, "1")])


def test_alter_replaces_and_rejects_null() -> None:
    assert configs.alter(TOPIC, {"retention.ms": "5"}) == {"retention.ms": "5"}
    with pytest.raises(InvalidConfigError, match=r"retention\.ms"):
        configs.alter(TOPIC, {"retention.ms": None})


def test_resolution_order_and_sources() -> None:
    layers = BrokerLayers(
        dynamic={"log.retention.ms": "3000"},
        default={"log.retention.ms": "2000", "log.segment.bytes": "4096"},
        static={"log.retention.hours": "1", "min.insync.replicas": "2"},
    )
    entries = {e.name: e for e in configs.describe_topic({"segment.ms": "99"}, layers,
                                                        with_synonyms=True)}
    assert (entries["segment.ms"].value, entries["segment.ms"].source) == (
        "99", ConfigSource.TOPIC_CONFIG)
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == (
        "3000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert [(s.name, s.source) for s in entries["retention.ms"].synonyms] == [
        ("log.retention.ms", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.ms", ConfigSource.DEFAULT_CONFIG),
    ]
    assert (entries["segment.bytes"].value, entries["segment.bytes"].source) == (
        "4096", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert (entries["min.insync.replicas"].value, entries["min.insync.replicas"].source) == (
        "2", ConfigSource.STATIC_BROKER_CONFIG)
    assert entries["cleanup.policy"].source is ConfigSource.DEFAULT_CONFIG
    assert entries["cleanup.policy"].is_default
    # hours are converted to the topic key's milliseconds
    only_static = BrokerLayers(static={"log.retention.hours": "2"})
    assert configs.topic_entry("retention.ms", {}, only_static).value == "7200000"


def test_log_config_of_skips_a_bad_stored_value() -> None:
    layers = BrokerLayers(default={"log.cleanup.policy": "compact"})
    config = configs.log_config_of({"retention.ms": "garbage", "segment.bytes": "2048"}, layers)
    assert config.retention_ms == LogConfig().retention_ms
    assert config.segment_bytes == 2048
    assert config.compact
    assert not config.delete


def test_broker_describe_flags() -> None:
    layers = BrokerLayers(dynamic={"leader.replication.throttled.rate": "100"},
                          static={"broker.id": "1"})
    entries = {e.name: e for e in configs.describe_broker(layers)}
    assert entries["broker.id"].read_only
    assert entries["broker.id"].source is ConfigSource.STATIC_BROKER_CONFIG
    assert not entries["leader.replication.throttled.rate"].read_only
    assert entries["leader.replication.throttled.rate"].value == "100"
    default_only = configs.describe_broker(
        BrokerLayers(default={"follower.replication.throttled.rate": "7"}),
        describing_default=True)
    assert [(e.name, e.source) for e in default_only] == [
        ("follower.replication.throttled.rate", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
    assert configs.broker_long(layers, "leader.replication.throttled.rate") == 100
    assert configs.broker_long(layers, "follower.replication.throttled.rate") == configs.LONG_MAX


def test_znode_formats() -> None:
    assert json.loads(configs.encode_entity({"b": "2", "a": "1"})) == {
        "version": 1, "config": {"a": "1", "b": "2"}}
    assert configs.decode_entity(configs.encode_entity({"a": "1"})) == {"a": "1"}
    assert configs.decode_entity(b"") == {}
    change = configs.encode_change(TOPIC, "t")
    assert json.loads(change) == {"version": 2, "entity_path": "topics/t"}
    assert configs.decode_change(change) == ("topics", "t")
    assert configs.decode_change(
        configs.encode_change(BROKER, configs.DEFAULT_BROKER)) == ("brokers", "<default>")
    assert configs.decode_change(
        b'{"version":1,"entity_type":"topics","entity_name":"x"}') == ("topics", "x")
    assert configs.config_znode(BROKER, "3") == "/config/brokers/3"
    with pytest.raises(InvalidConfigError):
        configs.decode_change(b'{"version":7}')
    with pytest.raises(InvalidConfigError):
        configs.decode_entity(b"[")


def test_throttled_replicas() -> None:
    assert configs.is_throttled("*", 3, 9)
    assert configs.is_throttled("0:1,2:3", 2, 3)
    assert not configs.is_throttled("0:1,2:3", 2, 1)
    assert not configs.is_throttled("", 0, 0)


def test_topic_log_configs_fall_back_to_default() -> None:
    holder = TopicLogConfigs(LogConfig(retention_ms=5))
    holder.set("t", LogConfig(retention_ms=7))
    assert holder.of("t").retention_ms == 7
    assert holder.of("u").retention_ms == 5
    holder.set("t", None)
    holder.set_default(LogConfig(retention_ms=9))
    assert holder.of("t").retention_ms == 9


def test_static_properties_accept_dynamic_keys_and_validate_them() -> None:
    base = ("broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs=/tmp/a\n"
            "zookeeper.connect=127.0.0.1:2181\n")
    config = load_config(base + "log.cleanup.policy=compact\n")
    assert config.properties["log.cleanup.policy"] == "compact"
    with pytest.raises(ConfigError, match=r"log\.cleanup\.policy"):
        load_config(base + "log.cleanup.policy=shred\n")
