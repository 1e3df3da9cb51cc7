"""``logproof topics create|list|describe|alter|delete``: topic administration over the wire
protocol (the shape of ``kafka-topics.sh``)."""

from __future__ import annotations

import argparse
from typing import Any

from impl.broker.admin import AdminClientError, error_name
from impl.controller.placement import PARTITION_COUNT_MAX, REPLICATION_FACTOR_MAX

from ._errors import CliError
from ._security import add_security_arguments, admin_client


def register(subparsers: Any) -> None:
    """Add the ``topics`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "topics", help="create, list, describe, alter or delete topics",
        description="Create, list, describe, alter or delete topics through any broker of the "
                    "cluster.",
    )
    actions = parser.add_subparsers(title="actions", metavar="ACTION", required=True)
    create = actions.add_parser("create", help="create a topic")
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int, default=1)
    create.add_argument("--replication-factor", type=int, default=1)
    create.add_argument(
        "--replica-assignment", default=None,
        help="explicit replicas: '1:2,2:3' is partition 0 on brokers 1,2 and partition 1 on 2,3",
    )
    create.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE",
        help="a topic config (repeatable): --config cleanup.policy=compact",
    )
    listing = actions.add_parser("list", help="the topics' names, one per line")
    describe = actions.add_parser("describe", help="describe topics")
    describe.add_argument("--topic", default=None, help="one topic (default: all)")
    alter = actions.add_parser("alter", help="add partitions to a topic")
    alter.add_argument("--topic", required=True)
    alter.add_argument("--partitions", type=int, required=True,
                       help="the new partition count (larger than the current one)")
    delete = actions.add_parser("delete", help="delete a topic")
    delete.add_argument("--topic", required=True)
    for sub, handler in ((create, _create), (listing, _list), (describe, _describe),
                         (alter, _alter), (delete, _delete)):
        sub.add_argument("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT]")
        sub.add_argument("--timeout", type=float, default=30.0, help="seconds (default 30)")
        add_security_arguments(sub)
        sub.set_defaults(handler=handler)


def _assignment(text: str) -> dict[int, list[int]]:
    assignment: dict[int, list[int]] = {}
    for index, group in enumerate(text.split(",")):
        try:
            assignment[index] = [int(broker) for broker in group.split(":")]
        except ValueError:
            raise CliError(f"--replica-assignment: bad broker list {group!r}") from None
    return assignment


def _configs(pairs: list[str]) -> dict[str, str]:
    configs: dict[str, str] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise CliError(f"--config: expected KEY=VALUE, got {pair!r}")
        if key.strip() in configs:
            raise CliError(f"--config: {key.strip()} given twice")
        configs[key.strip()] = value
    return configs


def _refused(result: dict[str, tuple[int, str | None]], topic: str, verb: str) -> None:
    """One line for a topic the broker refused (or did not answer)."""
    code, message = result.get(topic, (-1, "no answer for the topic"))
    if code != 0:
        raise CliError(f"cannot {verb} {topic!r}: {error_name(code)}"
                       + (f" ({message})" if message else ""))


def _create(arguments: argparse.Namespace) -> int:
    configs = _configs(arguments.config)
    if arguments.replica_assignment is None and (
        arguments.partitions <= 0 or arguments.replication_factor <= 0
    ):
        raise CliError("--partitions and --replication-factor must be positive")
    if arguments.partitions > PARTITION_COUNT_MAX:
        raise CliError(f"--partitions must be at most {PARTITION_COUNT_MAX}")
    if arguments.replication_factor > REPLICATION_FACTOR_MAX:
        raise CliError(f"--replication-factor must be at most {REPLICATION_FACTOR_MAX} (int16)")
    try:
        with admin_client(arguments) as admin:
            spec: Any
            if arguments.replica_assignment is not None:
                spec = (arguments.topic, _assignment(arguments.replica_assignment))
            else:
                spec = (arguments.topic, arguments.partitions, arguments.replication_factor)
            result = admin.create_topics([spec], timeout_ms=int(arguments.timeout * 1000),
                                         configs={arguments.topic: configs})
    except AdminClientError as error:
        raise CliError(str(error)) from None
    _refused(result, arguments.topic, "create")
    print(f"Created topic {arguments.topic}.")
    return 0


def _list(arguments: argparse.Namespace) -> int:
    try:
        with admin_client(arguments) as admin:
            metadata = admin.metadata(None)
    except AdminClientError as error:
        raise CliError(str(error)) from None
    for name in sorted(metadata.topics):
        print(name)
    return 0


def _describe(arguments: argparse.Namespace) -> int:
    """Kafka's layout: a line per topic (the configs set on the topic itself), one per
    partition. A topic whose configs the broker refuses (no DescribeConfigs ACL) is still
    described, its configs shown as the error."""
    try:
        with admin_client(arguments) as admin:
            metadata = admin.metadata(None if arguments.topic is None else [arguments.topic])
            configs = admin.describe_topic_configs(
                [name for name, (code, _) in sorted(metadata.topics.items()) if code == 0],
                synonyms=False)
    except AdminClientError as error:
        raise CliError(str(error)) from None
    overrides: dict[str, str] = {}
    for name, (code, _, entries) in configs.items():
        overrides[name] = f"({error_name(code)})" if code != 0 else ",".join(sorted(
            f"{entry.name}={entry.value}" for entry in entries
            if entry.source == "DYNAMIC_TOPIC_CONFIG"))
    for name in sorted(metadata.topics):
        code, partitions = metadata.topics[name]
        if code != 0:
            raise CliError(f"topic {name!r}: {error_name(code)}")
        factor = len(partitions[0].replicas) if partitions else 0
        print(f"Topic: {name}\tPartitionCount: {len(partitions)}\tReplicationFactor: {factor}"
              f"\tConfigs: {overrides[name]}")
        for info in partitions:
            print(
                f"\tTopic: {name}\tPartition: {info.partition}\tLeader: {info.leader}\t"
                f"LeaderEpoch: {info.leader_epoch}\t"
                f"Replicas: {','.join(map(str, info.replicas))}\t"
                f"Isr: {','.join(map(str, info.isr))}\t"
                f"Offline: {','.join(map(str, info.offline_replicas))}"
            )
    return 0


def _alter(arguments: argparse.Namespace) -> int:
    if not 0 < arguments.partitions <= PARTITION_COUNT_MAX:
        raise CliError(f"--partitions must be between 1 and {PARTITION_COUNT_MAX}")
    try:
        with admin_client(arguments) as admin:
            result = admin.create_partitions({arguments.topic: arguments.partitions},
                                             timeout_ms=int(arguments.timeout * 1000))
    except AdminClientError as error:
        raise CliError(str(error)) from None
    _refused(result, arguments.topic, "add partitions to")
    print(f"Topic {arguments.topic} now has {arguments.partitions} partitions.")
    return 0


def _delete(arguments: argparse.Namespace) -> int:
    try:
        with admin_client(arguments) as admin:
            result = admin.delete_topics([arguments.topic],
                                         timeout_ms=int(arguments.timeout * 1000))
    except AdminClientError as error:
        raise CliError(str(error)) from None
    code = result.get(arguments.topic, -1)
    if code != 0:
        raise CliError(f"cannot delete {arguments.topic!r}: {error_name(code)}")
    print(f"Deleted topic {arguments.topic}.")
    return 0
