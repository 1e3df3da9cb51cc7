"""Controller-to-broker requests between the controller's dataclasses and kio's wire entities.

The controller core (:mod:`impl.controller.requests`) speaks frozen dataclasses; on the wire they
are Kafka's LeaderAndIsr v4, StopReplica v3 and UpdateMetadata v6 (kio 0.6.2 still carries them).
Both directions live here so the conversion is one rename table read both ways: the inter-broker
client encodes with :func:`request_to_wire` and decodes with :func:`response_from_wire`; the broker
decodes with :func:`request_from_wire` and answers with :func:`response_to_wire`.

``preferred_log_dir`` has no field in the Kafka schema; KIP-113 carries the preferred dir by
AlterReplicaLogDirs instead, so it does not cross the wire.

This module is a sans-IO core.
"""

from __future__ import annotations

from typing import Any, Final

from impl.controller.requests import (
    BrokerEndpoint,
    ControllerRequest,
    ControllerResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from impl.controller.znodes import ListenerEndpoint

from . import api_versions
from ._codec import load_request_schema, load_response_schema
from ._kio_build import build

__sans_io__ = True

#: UpdateMetadata endpoint security protocol ids (Kafka's ``SecurityProtocol.id``).
_PROTOCOL_IDS: Final = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
_PROTOCOL_NAMES: Final = {number: name for name, number in _PROTOCOL_IDS.items()}


def _listeners(broker: BrokerEndpoint) -> tuple[ListenerEndpoint, ...]:
    """Every listener of ``broker`` (one PLAINTEXT at ``host:port`` when it names none)."""
    return broker.listeners or (
        ListenerEndpoint("PLAINTEXT", "PLAINTEXT", broker.host, broker.port),)


def api_of(request: ControllerRequest) -> tuple[int, int]:
    """(api key, version) used on the wire for ``request``."""
    if isinstance(request, LeaderAndIsrRequest):
        return api_versions.LEADER_AND_ISR, api_versions.LEADER_AND_ISR_VERSION
    if isinstance(request, StopReplicaRequest):
        return api_versions.STOP_REPLICA, api_versions.STOP_REPLICA_VERSION
    return api_versions.UPDATE_METADATA, api_versions.UPDATE_METADATA_VERSION


def _topic_states(items: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per-partition entries grouped by topic, as the three requests' ``topic_states``."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for topic, item in items:
        grouped.setdefault(topic, []).append(item)
    return [
        {"topic_name": topic, "partition_states": partitions}
        for topic, partitions in grouped.items()
    ]


def _header(request: ControllerRequest) -> dict[str, Any]:
    """The fields every controller request starts with."""
    return {
        "controller_id": request.controller_id,
        "controller_epoch": request.controller_epoch,
        "broker_epoch": request.broker_epoch,
    }


def request_to_wire(request: ControllerRequest) -> Any:
    """The kio request entity for a controller request dataclass."""
    api_key, version = api_of(request)
    request_class: type[Any] = load_request_schema(api_key, version)
    if isinstance(request, LeaderAndIsrRequest):
        states = _topic_states(
            [
                (
                    state.topic,
                    {
                        "partition_index": state.partition,
                        "controller_epoch": state.controller_epoch,
                        "leader": state.leader,
                        "leader_epoch": state.leader_epoch,
                        "isr": state.isr,
                        "partition_epoch": state.zk_version,
                        "replicas": state.replicas,
                        "adding_replicas": state.adding_replicas,
                        "removing_replicas": state.removing_replicas,
                        "is_new": state.is_new,
                    },
                )
                for state in request.partition_states
            ]
        )
        return build(
            request_class,
            {
                **_header(request),
                "topic_states": states,
                "live_leaders": [
                    {"broker_id": leader.broker_id, "host_name": leader.host, "port": leader.port}
                    for leader in request.live_leaders
                ],
            },
        )
    if isinstance(request, StopReplicaRequest):
        stops = _topic_states(
            [
                (
                    item.topic,
                    {
                        "partition_index": item.partition,
                        "leader_epoch": item.leader_epoch,
                        "delete_partition": item.delete_partition,
                    },
                )
                for item in request.partitions
            ]
        )
        return build(
            request_class,
            {
                **_header(request),
                "topic_states": stops,
            },
        )
    updates = _topic_states(
        [
            (
                state.topic,
                {
                    "partition_index": state.partition,
                    "controller_epoch": state.controller_epoch,
                    "leader": state.leader,
                    "leader_epoch": state.leader_epoch,
                    "isr": state.isr,
                    "zk_version": state.zk_version,
                    "replicas": state.replicas,
                    "offline_replicas": state.offline_replicas,
                },
            )
            for state in request.partition_states
        ]
    )
    return build(
        request_class,
        {
            **_header(request),
            "topic_states": updates,
            "live_brokers": [
                {
                    "id_": broker.broker_id,
                    "endpoints": [
                        {
                            "port": endpoint.port,
                            "host": endpoint.host,
                            "listener": endpoint.listener,
                            "security_protocol": _PROTOCOL_IDS.get(
                                endpoint.security_protocol, _PROTOCOL_IDS["PLAINTEXT"]),
                        }
                        for endpoint in _listeners(broker)
                    ],
                    "rack": broker.rack,
                }
                for broker in request.live_brokers
            ],
        },
    )


def partitions_in(body: Any) -> int:
    """How many partitions a decoded LeaderAndIsr, StopReplica or UpdateMetadata names (each
    groups them by topic in ``topic_states``)."""
    return sum(len(topic.partition_states) for topic in body.topic_states)


def request_from_wire(api_key: int, body: Any) -> ControllerRequest:
    """The controller request dataclass for a decoded kio request (the broker side)."""
    if api_key == api_versions.LEADER_AND_ISR:
        return LeaderAndIsrRequest(
            controller_id=int(body.controller_id),
            controller_epoch=int(body.controller_epoch),
            broker_epoch=int(body.broker_epoch),
            partition_states=tuple(
                LeaderAndIsrPartitionState(
                    topic=topic.topic_name,
                    partition=int(state.partition_index),
                    controller_epoch=int(state.controller_epoch),
                    leader=int(state.leader),
                    leader_epoch=int(state.leader_epoch),
                    isr=tuple(int(broker) for broker in state.isr),
                    zk_version=int(state.partition_epoch),
                    replicas=tuple(int(broker) for broker in state.replicas),
                    adding_replicas=tuple(int(broker) for broker in state.adding_replicas),
                    removing_replicas=tuple(int(broker) for broker in state.removing_replicas),
                    is_new=bool(state.is_new),
                )
                for topic in body.topic_states
                for state in topic.partition_states
            ),
            live_leaders=tuple(
                BrokerEndpoint(int(leader.broker_id), leader.host_name, int(leader.port))
                for leader in body.live_leaders
            ),
        )
    if api_key == api_versions.STOP_REPLICA:
        return StopReplicaRequest(
            controller_id=int(body.controller_id),
            controller_epoch=int(body.controller_epoch),
            broker_epoch=int(body.broker_epoch),
            partitions=tuple(
                StopReplicaPartition(
                    topic=topic.topic_name,
                    partition=int(state.partition_index),
                    leader_epoch=int(state.leader_epoch),
                    delete_partition=bool(state.delete_partition),
                )
                for topic in body.topic_states
                for state in topic.partition_states
            ),
        )
    assert api_key == api_versions.UPDATE_METADATA, api_key
    brokers: list[BrokerEndpoint] = []
    for broker in body.live_brokers:
        if not broker.endpoints:
            continue
        listeners = tuple(
            ListenerEndpoint(str(endpoint.listener),
                             _PROTOCOL_NAMES.get(int(endpoint.security_protocol), "PLAINTEXT"),
                             endpoint.host, int(endpoint.port))
            for endpoint in broker.endpoints
        )
        first = listeners[0]
        brokers.append(
            BrokerEndpoint(int(broker.id_), first.host, first.port, broker.rack, listeners)
        )
    return UpdateMetadataRequest(
        controller_id=int(body.controller_id),
        controller_epoch=int(body.controller_epoch),
        broker_epoch=int(body.broker_epoch),
        live_brokers=tuple(brokers),
        partition_states=tuple(
            UpdateMetadataPartitionState(
                topic=topic.topic_name,
                partition=int(state.partition_index),
                controller_epoch=int(state.controller_epoch),
                leader=int(state.leader),
                leader_epoch=int(state.leader_epoch),
                isr=tuple(int(broker) for broker in state.isr),
                zk_version=int(state.zk_version),
                replicas=tuple(int(broker) for broker in state.replicas),
                offline_replicas=tuple(int(broker) for broker in state.offline_replicas),
            )
            for topic in body.topic_states
            for state in topic.partition_states
        ),
    )


def response_to_wire(api_key: int, version: int, response: ControllerResponse) -> Any:
    """The kio response entity for a broker's answer to a controller request."""
    response_class: type[Any] = load_response_schema(api_key, version)
    if api_key == api_versions.UPDATE_METADATA:
        return build(response_class, {"error_code": response.error_code})
    return build(
        response_class,
        {
            "error_code": response.error_code,
            "partition_errors": [
                {"topic_name": topic, "partition_index": partition, "error_code": code}
                for (topic, partition), code in sorted(response.partition_errors.items())
            ],
        },
    )


def response_from_wire(api_key: int, body: Any) -> ControllerResponse:
    """The controller's view of a decoded kio response (errors other than NONE only)."""
    errors: dict[tuple[str, int], int] = {}
    for item in getattr(body, "partition_errors", ()):
        code = int(item.error_code)
        if code != 0:
            errors[(item.topic_name, int(item.partition_index))] = code
    return ControllerResponse(error_code=int(body.error_code), partition_errors=errors)
