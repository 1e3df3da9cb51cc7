"""``/brokers/ids/<id>``: every advertised listener is registered with its name and protocol,
read back, and the older single-endpoint forms are still understood."""

from __future__ import annotations

import json

import pytest

from impl.controller.znodes import (
    ListenerEndpoint,
    ZnodeFormatError,
    decode_broker,
    encode_broker,
)

#: The version-4 example of Kafka's ``BrokerIdZNode`` documentation.
KAFKA_V4_EXAMPLE = (
    b'{"version":4,"host":"localhost","port":9092,"jmx_port":9999,'
    b'"timestamp":"2233345666","endpoints":["CLIENT://host1:9092", "REPLICATION://host1:9093"],'
    b'"listener_security_protocol_map":{"CLIENT":"SSL", "REPLICATION":"PLAINTEXT"},'
    b'"rack":"dc1"}'
)


def test_kafka_example_is_read_with_every_listener() -> None:
    broker = decode_broker(1, KAFKA_V4_EXAMPLE, epoch=7)
    assert broker.endpoints == (
        ListenerEndpoint("CLIENT", "SSL", "host1", 9092),
        ListenerEndpoint("REPLICATION", "PLAINTEXT", "host1", 9093),
    )
    assert (broker.host, broker.port, broker.rack, broker.epoch) == ("host1", 9092, "dc1", 7)
    assert broker.endpoint("REPLICATION") == ListenerEndpoint("REPLICATION", "PLAINTEXT",
                                                              "host1", 9093)
    assert broker.endpoint("OTHER") is None


def test_every_listener_round_trips_in_kafka_json() -> None:
    endpoints = (ListenerEndpoint("INTERNAL", "SASL_SSL", "b1", 9094),
                 ListenerEndpoint("CLIENTS", "PLAINTEXT", "b1.example", 9092))
    data = encode_broker("b1", 9094, "r1", 1234, endpoints)
    value = json.loads(data)
    assert value["version"] == 5
    assert value["endpoints"] == ["INTERNAL://b1:9094", "CLIENTS://b1.example:9092"]
    assert value["listener_security_protocol_map"] == {"INTERNAL": "SASL_SSL",
                                                       "CLIENTS": "PLAINTEXT"}
    # the legacy fields name the PLAINTEXT listener
    assert (value["host"], value["port"]) == ("b1.example", 9092)
    assert (value["jmx_port"], value["timestamp"], value["rack"]) == (-1, "1234", "r1")
    broker = decode_broker(1, data, epoch=3)
    assert broker.endpoints == endpoints
    assert (broker.host, broker.port) == ("b1", 9094)


def test_no_plaintext_listener_leaves_the_legacy_fields_empty() -> None:
    endpoints = (ListenerEndpoint("SASL_SSL", "SASL_SSL", "b2", 9093),)
    value = json.loads(encode_broker("b2", 9093, None, 0, endpoints))
    assert (value["host"], value["port"], value["rack"]) == (None, -1, None)
    assert decode_broker(2, encode_broker("b2", 9093, None, 0, endpoints), 1).endpoints == endpoints


def test_older_single_endpoint_forms() -> None:
    legacy = decode_broker(4, b'{"version":1,"host":"old","port":9092,"jmx_port":-1}', 1)
    assert legacy.endpoints == (ListenerEndpoint("PLAINTEXT", "PLAINTEXT", "old", 9092),)
    # version 2: endpoints named by protocol, no map
    v2 = decode_broker(4, b'{"version":2,"host":"h","port":9092,'
                          b'"endpoints":["PLAINTEXT://h:9092","SSL://h:9093"]}', 1)
    assert v2.endpoint("SSL") == ListenerEndpoint("SSL", "SSL", "h", 9093)
    assert decode_broker(5, encode_broker("h", 9092, None, 0), 1).endpoints == (
        ListenerEndpoint("PLAINTEXT", "PLAINTEXT", "h", 9092),)


@pytest.mark.parametrize("data", [
    b'{"version":5,"endpoints":["nohostport"]}',
    b'{"version":5,"endpoints":["A://h:notaport"]}',
    b'{"version":5,"endpoints":"A://h:1"}',
    b'{"version":5,"endpoints":["A://h:1"],"listener_security_protocol_map":[1]}',
    b'{"version":5,"endpoints":[]}',
    b'{"version":5,"host":"h","port":1,"clean_since_broker_epoch":"3"}',
    b'{"version":5,"host":"h","port":1,"clean_since_broker_epoch":true}',
    b'{"version":5,"host":"h","port":1,"clean_since_broker_epoch":-2}',
])
def test_malformed_registrations_are_refused(data: bytes) -> None:
    with pytest.raises(ZnodeFormatError):
        decode_broker(1, data, 1)


def test_the_clean_since_broker_epoch_round_trips_and_is_absent_from_kafka_registrations() -> None:
    """After KIP-966's PreviousBrokerEpoch (spec/controller.md "Unclean shutdowns"): the epoch
    of the incarnation since which every shutdown was clean, -1 after an unclean one; a
    registration written without it (Kafka's) reads as not reported."""
    assert decode_broker(1, encode_broker("h", 9092, None, 0, clean_since_broker_epoch=17),
                         20).clean_since_epoch == 17
    assert decode_broker(1, encode_broker("h", 9092, None, 0, clean_since_broker_epoch=-1),
                         20).clean_since_epoch == -1
    assert "clean_since_broker_epoch" not in json.loads(encode_broker("h", 9092, None, 0))
    assert decode_broker(1, KAFKA_V4_EXAMPLE, epoch=7).clean_since_epoch is None
