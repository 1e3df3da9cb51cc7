"""``logproof reassign --generate``: a reassignment proposed by the cluster's own placer (KIP-879).

Like ``kafka-reassign-partitions --generate``: read the topics to move
(``{"version":1,"topics":[{"topic":"t"}]}``), read their current assignment from Metadata, ask the
brokers for a new one (CreateReplicaPlacement, served with the cluster's configured
``broker.replica.placer`` and racks) restricted to ``--broker-list``, and print both as
reassignment JSON: the current one to keep for a rollback, the proposed one (``log_dirs`` all
``"any"``) to edit and pass to ``--execute``. Nothing is changed in the cluster.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from impl.broker.admin import AdminClientError, error_name
from impl.controller.placement import TopicPartition
from impl.controller.placement.client import PlacementClientError, request_reassignment_proposal

from ._errors import CliError
from ._security import admin_client, placement_connector

__all__ = ["generate", "parse_broker_list", "read_topics_to_move"]


def read_topics_to_move(path: Path) -> list[str]:
    """The topic names of a topics-to-move JSON file, in file order, without repeats.

    Raises:
        CliError: the file cannot be read or is not ``{"version":1,"topics":[{"topic":…}]}``.
    """
    try:
        document: Any = json.loads(path.read_bytes())
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror}") from None
    except ValueError as error:
        raise CliError(f"{path}: not JSON ({error})") from None
    except RecursionError:
        raise CliError(f"{path}: JSON nested too deeply") from None
    if not isinstance(document, dict) or not isinstance(document.get("topics"), list):
        raise CliError(f'{path}: expected {{"version":1,"topics":[{{"topic":"name"}}, …]}}')
    if document.get("version", 1) != 1:
        raise CliError(f"{path}: unsupported version {document.get('version')!r}")
    names: list[str] = []
    for entry in document["topics"]:
        name = entry.get("topic") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            raise CliError(f'{path}: every entry of "topics" needs a "topic" name')
        if name not in names:
            names.append(name)
    if not names:
        raise CliError(f"{path}: no topics to move")
    return names


def parse_broker_list(value: str) -> list[int]:
    """``1,2,3`` → ``[1, 2, 3]``.

    Raises:
        CliError: an entry that is not a non-negative integer, or a repeated id.
    """
    ids: list[int] = []
    for item in (part.strip() for part in value.split(",")):
        if not item.isdigit():
            raise CliError(f"--broker-list: {item!r} is not a broker id")
        if int(item) in ids:
            raise CliError(f"--broker-list: broker {item} is listed twice")
        ids.append(int(item))
    return ids


def _document(assignment: dict[TopicPartition, list[int]], *, log_dirs: bool) -> str:
    partitions: list[dict[str, Any]] = []
    for tp in sorted(assignment):
        entry: dict[str, Any] = {
            "topic": tp.topic,
            "partition": tp.partition,
            "replicas": assignment[tp],
        }
        if log_dirs:
            entry["log_dirs"] = ["any"] * len(assignment[tp])
        partitions.append(entry)
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def generate(arguments: argparse.Namespace) -> int:
    """Print the current and the proposed assignment of the topics to move."""
    if arguments.topics_to_move_json_file is None:
        raise CliError("--generate needs --topics-to-move-json-file")
    if arguments.broker_list is None:
        raise CliError("--generate needs --broker-list")
    topics = read_topics_to_move(arguments.topics_to_move_json_file)
    broker_ids = parse_broker_list(arguments.broker_list)
    try:
        with admin_client(arguments, timeout_seconds=30.0) as admin:
            metadata = admin.metadata(topics)
    except AdminClientError as error:
        raise CliError(str(error)) from None
    unknown = sorted(set(broker_ids) - set(metadata.brokers))
    if unknown:
        raise CliError(f"--broker-list: no live broker {', '.join(map(str, unknown))}")
    current: dict[TopicPartition, list[int]] = {}
    for topic in topics:
        error_code, partitions = metadata.topics.get(topic, (3, ()))
        if error_code != 0:
            raise CliError(f"topic {topic}: {error_name(error_code)}")
        for partition in partitions:
            current[TopicPartition(topic, partition.partition)] = list(partition.replicas)
    try:
        proposed = request_reassignment_proposal(
            arguments.bootstrap_server,
            current,
            broker_ids=broker_ids,
            force_simple_placement=arguments.disable_rack_aware,
            connect=placement_connector(arguments),
        )
    except PlacementClientError as error:
        raise CliError(str(error)) from None
    print("Current partition replica assignment")
    print(_document(current, log_dirs=False))
    print()
    print("Proposed partition reassignment configuration")
    print(_document(proposed, log_dirs=True))
    return 0
