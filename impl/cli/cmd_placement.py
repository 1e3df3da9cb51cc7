"""``logproof placement``: ask for a replica placement (KIP-879), from a cluster or offline.

With ``--bootstrap-server`` the broker answers a CreateReplicaPlacement request with its
configured ``broker.replica.placer`` and its brokers' racks. Without it, a dry run places the
replicas locally over the brokers given with ``--broker-racks`` (or ``--racks``), with the
placer given by ``--placer`` and the randomness fixed by ``--seed`` (printed when drawn, so
every run can be replayed). The assignment is printed as a table, or as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import secrets
from collections.abc import Sequence
from typing import Any

from impl.controller.placement import (
    DEFAULT_REPLICA_PLACER,
    MULTI_LEVEL,
    PLACEMENT_SPREAD,
    BrokerInfo,
    ClusterView,
    CreateReplicaPlacementRequest,
    PlacementError,
    PlacementSpec,
    load_replica_placer,
    place_replicas,
    placement_spread_violations,
)
from impl.controller.placement.client import PlacementClientError, request_replica_placement
from impl.ports import SeededRng

from ._errors import CliError
from ._security import add_security_arguments, placement_connector

#: The seed range drawn when ``--seed`` is not given (printed so the run can be replayed).
SEED_MAX = 2**31


def register(subparsers: Any) -> None:
    """Add the ``placement`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "placement",
        help="compute a replica placement (KIP-879), from a running cluster or as a dry run",
        description=(
            "Compute where the replicas of N partitions would go. With --bootstrap-server the "
            "cluster's configured placer answers (CreateReplicaPlacement); otherwise the "
            "placement is computed locally over --broker-racks. Example dry run: logproof "
            "placement --partitions 6 --replication-factor 3 --broker-racks "
            "1:/DC1/R1,2:/DC1/R2,3:/DC2/R1,4:/DC2/R2,5:/DC3/R1,6:/DC3/R2 --seed 7"
        ),
    )
    parser.add_argument("--partitions", metavar="N", help="number of partitions (required)")
    parser.add_argument(
        "--replication-factor", metavar="R", help="replicas per partition (required)"
    )
    parser.add_argument(
        "--brokers", metavar="ID,ID,...", help="place only on these brokers (default: all)"
    )
    parser.add_argument(
        "--force-simple",
        action="store_true",
        help="use Kafka's rack-unaware assignment whatever placer is configured",
    )
    parser.add_argument(
        "--start-partition", metavar="ID", default="0", help="id of the first partition (0)"
    )
    parser.add_argument(
        "--bootstrap-server", metavar="HOST:PORT", help="ask this running broker"
    )
    add_security_arguments(parser)
    parser.add_argument(
        "--broker-racks",
        metavar="ID[:RACK],...",
        help="dry run: the brokers and their racks, e.g. 1:/DC1/R1,2:/DC1/R2,3:/DC2/R1",
    )
    parser.add_argument(
        "--racks",
        metavar="RACK,...",
        help="dry run shorthand: one broker per rack, numbered 1, 2, ... in order",
    )
    parser.add_argument(
        "--placer",
        metavar="NAME",
        help=(
            "dry run: placer name (rack-unaware, rack-aware, multi-level) or dotted path "
            f"(default {MULTI_LEVEL}; a broker defaults to {DEFAULT_REPLICA_PLACER})"
        ),
    )
    parser.add_argument("--seed", metavar="N", help="dry run: seed of the random draws")
    parser.add_argument(
        "--topic", metavar="NAME", help="topic name to put in the JSON (reassignment format)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--timeout-ms", metavar="MS", default="30000", help="wire request timeout (30000)"
    )
    parser.set_defaults(handler=run)


def _integer(option: str, text: str | None, low: int, high: int) -> int:
    if text is None:
        raise CliError(f"{option} is required")
    try:
        value = int(text.strip())
    except ValueError:
        raise CliError(f"{option} must be an integer, got {text!r}") from None
    if not low <= value <= high:
        raise CliError(f"{option} must be between {low} and {high}, got {value}")
    return value


def parse_broker_ids(text: str) -> list[int]:
    """``"1,2,3"`` → ``[1, 2, 3]``; raises :class:`CliError` on anything else."""
    items = [item.strip() for item in text.split(",")]
    if not all(item.lstrip("-").isdigit() for item in items):
        raise CliError(f"--brokers must be comma-separated broker ids, got {text!r}")
    return [int(item) for item in items]


def parse_broker_racks(text: str) -> list[BrokerInfo]:
    """``"1:/DC1/R1,2:/DC1/R2,3"`` → broker infos (a bare id has no rack).

    Raises:
        CliError: an entry is not ``ID`` or ``ID:RACK``.
    """
    brokers: list[BrokerInfo] = []
    for entry in text.split(","):
        id_text, separator, rack = entry.strip().partition(":")
        rack = rack.strip()
        if not id_text.strip().lstrip("-").isdigit():
            raise CliError(f"--broker-racks entry {entry.strip()!r} is not ID or ID:RACK")
        if separator and not rack:
            raise CliError(f"--broker-racks entry {entry.strip()!r} has an empty rack")
        brokers.append(BrokerInfo(int(id_text), rack if separator else None))
    return brokers


def parse_racks(text: str) -> list[BrokerInfo]:
    """``"/DC1/R1,/DC2/R1"`` → brokers 1, 2, … on those racks."""
    racks = [rack.strip() for rack in text.split(",")]
    if any(not rack for rack in racks):
        raise CliError(f"--racks has an empty rack: {text!r}")
    return [BrokerInfo(index, rack) for index, rack in enumerate(racks, start=1)]


def run(arguments: argparse.Namespace) -> int:
    """Compute and print the placement; user mistakes raise :class:`CliError`."""
    partition_count = _integer("--partitions", arguments.partitions, 1, 2**31 - 1)
    replication_factor = _integer(
        "--replication-factor", arguments.replication_factor, 1, 2**15 - 1
    )
    start_partition_id = _integer("--start-partition", arguments.start_partition, 0, 2**31 - 1)
    broker_ids = parse_broker_ids(arguments.brokers) if arguments.brokers else None
    if arguments.bootstrap_server:
        dry_run_only = (arguments.broker_racks, arguments.racks, arguments.seed, arguments.placer)
        if any(option is not None for option in dry_run_only):
            raise CliError(
                "--broker-racks, --racks, --seed and --placer are for a dry run, not with "
                "--bootstrap-server (the cluster uses its broker.replica.placer)"
            )
        rows = _ask_cluster(arguments, partition_count, replication_factor, start_partition_id)
        _print(arguments, rows, {}, {"bootstrap_server": arguments.bootstrap_server})
        return 0
    if arguments.command_config is not None:
        raise CliError("--command-config goes with --bootstrap-server (a dry run asks no broker)")
    if arguments.broker_racks and arguments.racks:
        raise CliError("give --broker-racks or --racks, not both")
    if arguments.broker_racks:
        brokers = parse_broker_racks(arguments.broker_racks)
    elif arguments.racks:
        brokers = parse_racks(arguments.racks)
    else:
        raise CliError("a dry run needs --broker-racks or --racks (or ask a cluster with "
                       "--bootstrap-server)")
    seed = (
        _integer("--seed", arguments.seed, 0, 2**63 - 1)
        if arguments.seed is not None
        else secrets.randbelow(SEED_MAX)
    )
    view = ClusterView.of(brokers)
    spec = PlacementSpec(
        partition_count=partition_count,
        replication_factor=replication_factor,
        start_partition_id=start_partition_id,
        force_simple_placement=arguments.force_simple,
    )
    placer_text: str = arguments.placer if arguments.placer is not None else MULTI_LEVEL
    try:
        rng = SeededRng(seed)
        placer = load_replica_placer(placer_text, rng)
        assignment = place_replicas(placer, spec, view, broker_ids, rng=rng)
    except PlacementError as error:
        raise CliError(str(error)) from error
    rows = [(start_partition_id + i, replicas) for i, replicas in enumerate(assignment)]
    racks = {broker.broker_id: broker.rack for broker in brokers}
    summary: dict[str, object] = {"placer": placer_text, "seed": seed}
    summary[PLACEMENT_SPREAD] = _spread_status(assignment, view, broker_ids, spec)
    _print(arguments, rows, racks, summary)
    return 0


def _spread_status(
    assignment: list[list[int]],
    view: ClusterView,
    broker_ids: Sequence[int] | None,
    spec: PlacementSpec,
) -> str:
    """``holds``, the first violation, or why the invariant does not apply."""
    if any(broker.rack is None or not broker.rack.startswith("/") for broker in view.brokers):
        return "n/a (racks are not multi-level paths)"
    try:
        violations = placement_spread_violations(
            assignment, view, broker_ids, start_partition_id=spec.start_partition_id
        )
    except PlacementError as error:
        return f"n/a ({error})"
    return "holds" if not violations else f"violated: {violations[0]}"


def _ask_cluster(
    arguments: argparse.Namespace,
    partition_count: int,
    replication_factor: int,
    start_partition_id: int,
) -> list[tuple[int, list[int]]]:
    timeout_ms = _integer("--timeout-ms", arguments.timeout_ms, 1, 2**31 - 1)
    request = CreateReplicaPlacementRequest(
        partition_count=partition_count,
        replication_factor=replication_factor,
        force_simple_placement=arguments.force_simple,
        broker_ids=tuple(parse_broker_ids(arguments.brokers)) if arguments.brokers else (),
        timeout_ms=timeout_ms,
        start_partition_id=start_partition_id,
    )
    try:
        response = request_replica_placement(
            arguments.bootstrap_server, request, timeout_seconds=timeout_ms / 1000,
            connect=placement_connector(arguments),
        )
    except PlacementClientError as error:
        raise CliError(str(error)) from error
    if response.error_code != 0:
        raise CliError(
            f"the cluster refused: {response.error_message or 'no message'} "
            f"(error code {response.error_code})"
        )
    return [(placement.partition_id, list(placement.replicas)) for placement in response.placements]


def _print(
    arguments: argparse.Namespace,
    rows: list[tuple[int, list[int]]],
    racks: dict[int, str | None],
    summary: dict[str, object],
) -> None:
    if arguments.json:
        partitions = []
        for partition_id, replicas in rows:
            entry: dict[str, object] = {"partition": partition_id, "replicas": replicas}
            if arguments.topic:
                entry = {"topic": arguments.topic, **entry}
            partitions.append(entry)
        print(json.dumps({"version": 1, "partitions": partitions, **summary}, sort_keys=False))
        return
    print("  ".join(f"{key}: {value}" for key, value in summary.items()))
    header = ["PARTITION", "LEADER", "REPLICAS"] + (["RACKS"] if racks else [])
    table = [header]
    for partition_id, replicas in rows:
        line = [str(partition_id), str(replicas[0]), ",".join(str(b) for b in replicas)]
        if racks:
            line.append(" ".join(str(racks.get(b) or "-") for b in replicas))
        table.append(line)
    widths = [max(len(row[column]) for row in table) for column in range(len(header))]
    for row in table:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        print("  ".join(cells).rstrip())
