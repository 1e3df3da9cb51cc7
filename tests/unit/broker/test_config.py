from __future__ import annotations

import pytest

from impl.broker.config import ConfigError, Listener, load_config

BASE = """
# a comment
broker.id=3
listeners=PLAINTEXT://127.0.0.1:9092
log.dirs=/data/a,/data/b/
zookeeper.connect=127.0.0.1:2181/kafka
"""


def test_parses_kafka_properties_and_overrides() -> None:
    config = load_config(BASE + "broker.rack: r1\n", ["min.insync.replicas=2", "log.roll.hours=2"])
    assert config.broker_id == 3
    assert config.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9092),)
    assert config.log_dirs == ("/data/a", "/data/b")
    assert config.rack == "r1"
    assert config.min_insync_replicas == 2
    assert config.segment_ms == 2 * 3_600_000
    assert config.mover_threads == 2


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ("broker.id=x", "broker.id: expected an integer"),
        ("log.dirs=relative/dir", "not an absolute path"),
        ("log.dirs=/a/../b", "'..'"),
        ("listeners=SSL://h:1", "needs a keystore"),
        ("listeners=INTERNAL://h:1", "no entry in listener.security.protocol.map"),
        ("ssl.client.auth=maybe", "ssl.client.auth"),
        ("authorizer.class.name=x.Y", "unsupported authorizer"),
        ("listeners=PLAINTEXT://h:99999", "at most 65535"),
        ("no.such.key=1", "unknown config key"),
        ("intra.broker.throttled.rate=0", "at least 1"),
        ("auto.create.topics.enable=maybe", "true or false"),
        ("metrics.port=65536", "metrics.port"),
        ("metrics.port=-1", "metrics.port"),
    ],
)
def test_bad_values_are_one_line_errors(extra: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(BASE + extra + "\n")
    assert fragment in str(caught.value)
    assert "\n" not in str(caught.value)


def test_missing_required_key() -> None:
    with pytest.raises(ConfigError, match=r"zookeeper\.connect"):
        load_config("broker.id=1\nlisteners=PLAINTEXT://:9092\nlog.dirs=/a\n")


def test_override_needs_equals() -> None:
    with pytest.raises(ConfigError, match="key=value"):
        load_config(BASE, ["broker.id"])


def test_metrics_port_is_off_unless_set() -> None:
    assert load_config(BASE).metrics_port == 0
    assert load_config(BASE, ["metrics.port=9404"]).metrics_port == 9404


def test_advertised_listeners_default_to_listeners_with_bound_ports_and_host_name() -> None:
    from impl.broker.config import advertise

    config = load_config(BASE, ["listeners=PLAINTEXT://:0,SSL_IN://10.0.0.5:9093",
                                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,"
                                "SSL_IN:PLAINTEXT"])
    assert config.listeners[0] == Listener("PLAINTEXT", "0.0.0.0", 0)
    assert advertise(config, {"PLAINTEXT": 40000, "SSL_IN": 9093}, "node7.example") == (
        Listener("PLAINTEXT", "node7.example", 40000), Listener("SSL_IN", "10.0.0.5", 9093))
    legacy = load_config(BASE, ["advertised.host.name=public.example"])
    assert advertise(legacy, {"PLAINTEXT": 9092}, "h") == (
        Listener("PLAINTEXT", "public.example", 9092),)


def test_advertised_listeners_replace_listeners_in_their_order() -> None:
    from impl.broker.config import advertise

    config = load_config(BASE, [
        "listeners=PLAINTEXT://0.0.0.0:9092,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name=INTERNAL",
        "advertised.listeners=INTERNAL://:0,PLAINTEXT://kafka.example:19092"])
    assert advertise(config, {"PLAINTEXT": 9092, "INTERNAL": 41000}, "node7") == (
        Listener("INTERNAL", "node7", 41000), Listener("PLAINTEXT", "kafka.example", 19092))


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        (["advertised.listeners=PLAINTEXT://0.0.0.0:9092"], "non-routable meta-address 0.0.0.0"),
        (["advertised.listeners=PLAINTEXT://[::]:9092"], "non-routable meta-address ::"),
        (["advertised.listeners=OTHER://h:9092"], "OTHER is not one of listeners"),
        (["advertised.listeners=PLAINTEXT://h"], "expected NAME://host:port"),
        (["advertised.listeners=PLAINTEXT://h:1,PLAINTEXT://g:2"], "listed twice"),
        (["listeners=PLAINTEXT://:9092,B://:9093",
          "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,B:PLAINTEXT",
          "inter.broker.listener.name=B", "advertised.listeners=PLAINTEXT://h:9092"],
         "inter.broker.listener.name: B must be one of advertised.listeners"),
    ],
)
def test_bad_advertised_listeners(overrides: list[str], fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(BASE, overrides)
    assert fragment in str(caught.value)
