"""``logproof reassign --generate|--execute|--verify``: reassignment with log dirs (KIP-113 §2).

``--generate`` proposes a new assignment with the cluster's placer (KIP-879; see
:mod:`impl.cli._reassign_generate`).

The reassignment JSON is Kafka's (``{"version":1,"partitions":[{"topic","partition","replicas",
"log_dirs"}]}``), with ``"any"`` allowed for a replica whose dir does not matter. ``--execute``
sends AlterReplicaLogDirs to each broker for the replicas with an explicit dir, retrying those
answered REPLICA_NOT_AVAILABLE every 100 ms until ``--timeout`` (default 10 s, as in the KIP);
when the replica sets differ from the current assignment and ``--zookeeper`` is given, it also
starts the cross-broker reassignment by creating ``/admin/reassign_partitions``.
``--verify`` prints, per partition, whether its replica set is the target one (and, given
``--zookeeper``, no longer listed in ``/admin/reassign_partitions``), then each replica's move
state; it exits 0 only when every partition and every move has completed; then, given
``--zookeeper``, it removes the throttle ``--replica-alter-log-dirs-throttle`` set.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from impl.broker.admin import AdminClient, AdminClientError, TopicPartitionReplica, error_name
from impl.broker.log_dir_moves import (
    LogDirMoveState,
    ReassignmentFileError,
    ReplicaMove,
    move_state,
    replica_moves,
)
from impl.controller.znodes import ReassignmentTarget, ZnodeFormatError, decode_reassignment

from ._errors import CliError
from ._reassign_generate import generate

REPLICA_NOT_AVAILABLE = 9
RETRY_INTERVAL_SECONDS = 0.1


def register(subparsers: Any) -> None:
    """Add the ``reassign`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "reassign", help="move replicas between log dirs (KIP-113) and check the moves",
        description=(
            "Generate a reassignment with the cluster's placer, or execute or verify a "
            "reassignment JSON with per-replica log_dirs."
        ),
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--generate", action="store_true",
                      help="propose a reassignment of --topics-to-move-json-file onto "
                           "--broker-list with the cluster's placer (changes nothing)")
    mode.add_argument("--execute", action="store_true", help="start the moves")
    mode.add_argument("--verify", action="store_true", help="report each replica's move state")
    parser.add_argument("--reassignment-json-file", type=Path, default=None,
                        help="with --execute or --verify: the reassignment JSON")
    parser.add_argument("--topics-to-move-json-file", type=Path, default=None,
                        help='with --generate: {"version":1,"topics":[{"topic":"t"}]}')
    parser.add_argument("--broker-list", default=None,
                        help="with --generate: the brokers to place replicas on, e.g. 1,2,3")
    parser.add_argument("--disable-rack-aware", action="store_true",
                        help="with --generate: Kafka's rack-unaware assignment")
    parser.add_argument("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT]")
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="seconds to retry REPLICA_NOT_AVAILABLE (default 10)")
    parser.add_argument("--zookeeper", default=None,
                        help="HOST:PORT[/chroot]: needed to change replica sets and throttles")
    parser.add_argument("--replica-alter-log-dirs-throttle", type=int, default=None,
                        metavar="BYTES_PER_SECOND",
                        help="with --execute: limit the log-dir movers of the brokers involved "
                             "(a dynamic broker config, applied live; --verify removes it once "
                             "every move has completed)")
    parser.set_defaults(handler=run)


def _load(path: Path) -> tuple[tuple[ReassignmentTarget, ...], list[ReplicaMove]]:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror}") from None
    try:
        targets = decode_reassignment(data)
        moves = replica_moves(targets)
    except (ZnodeFormatError, ReassignmentFileError) as error:
        raise CliError(f"{path}: {error}") from None
    if not targets:
        raise CliError(f"{path}: no partitions to reassign")
    return targets, moves


def run(arguments: argparse.Namespace) -> int:
    """Generate, execute or verify."""
    if arguments.generate:
        return generate(arguments)
    if arguments.reassignment_json_file is None:
        raise CliError("--execute and --verify need --reassignment-json-file")
    if arguments.timeout <= 0:
        raise CliError("--timeout must be positive")
    throttle = arguments.replica_alter_log_dirs_throttle
    if throttle is not None:
        if not arguments.execute:
            raise CliError("--replica-alter-log-dirs-throttle goes with --execute")
        if arguments.zookeeper is None:
            raise CliError("--replica-alter-log-dirs-throttle needs --zookeeper")
        if throttle < 1:
            raise CliError("--replica-alter-log-dirs-throttle must be at least 1")
    targets, moves = _load(arguments.reassignment_json_file)
    try:
        with AdminClient(arguments.bootstrap_server) as admin:
            if arguments.execute:
                return _execute(admin, arguments, targets, moves)
            pending = (set() if arguments.zookeeper is None
                       else _reassigning(arguments.zookeeper))
            status = _verify_partitions(admin, targets, pending)
            status = max(status, _verify(admin, moves))
    except AdminClientError as error:
        raise CliError(str(error)) from None
    if status == 0 and moves and arguments.zookeeper is not None:
        _set_throttle(arguments.zookeeper, sorted({m.broker_id for m in moves}), None)
        print("Throttle was removed.")
    return status


def _replica_sets_change(admin: AdminClient, targets: tuple[ReassignmentTarget, ...]) -> bool:
    metadata = admin.metadata(sorted({target.topic for target in targets}))
    for target in targets:
        code, partitions = metadata.topics.get(target.topic, (3, ()))
        if code != 0:
            raise CliError(f"topic {target.topic!r}: {error_name(code)}")
        current = {info.partition: info.replicas for info in partitions}
        if target.partition not in current:
            raise CliError(f"partition {target.topic}-{target.partition} does not exist")
        if tuple(current[target.partition]) != tuple(target.replicas):
            return True  # a new order is a reassignment too: the first replica is preferred
    return False


def _start_cross_broker(zookeeper: str, targets: tuple[ReassignmentTarget, ...]) -> None:
    import trio  # noqa: PLC0415

    from impl.controller import admin as zk_admin  # noqa: PLC0415
    from impl.controller._kazoo import KazooCoordinator  # noqa: PLC0415
    from impl.controller.coordinator import CoordinatorError  # noqa: PLC0415

    async def main() -> None:
        coordinator = await KazooCoordinator.connect(zookeeper)
        try:
            await zk_admin.reassign_partitions(coordinator, targets)
        finally:
            await coordinator.close()

    try:
        trio.run(main)
    except (CoordinatorError, zk_admin.AdminError, ZnodeFormatError) as error:
        raise CliError(f"cannot start the reassignment: {error}") from None


def _reassigning(zookeeper: str) -> set[tuple[str, int]]:
    """The partitions ``/admin/reassign_partitions`` still lists."""
    import trio  # noqa: PLC0415

    from impl.controller._kazoo import KazooCoordinator  # noqa: PLC0415
    from impl.controller.coordinator import CoordinatorError, NoNodeError  # noqa: PLC0415
    from impl.controller.znodes import REASSIGN_PARTITIONS_PATH  # noqa: PLC0415

    async def main() -> set[tuple[str, int]]:
        coordinator = await KazooCoordinator.connect(zookeeper)
        try:
            data, _stat = await coordinator.get(REASSIGN_PARTITIONS_PATH)
        except NoNodeError:
            return set()
        finally:
            await coordinator.close()
        return {(t.topic, t.partition) for t in decode_reassignment(data)}

    try:
        return trio.run(main)
    except (CoordinatorError, ZnodeFormatError) as error:
        raise CliError(f"cannot read the reassignment in progress: {error}") from None


def _verify_partitions(admin: AdminClient, targets: tuple[ReassignmentTarget, ...],
                       pending: set[tuple[str, int]]) -> int:
    """Kafka's partition part of ``--verify``: 0 when every partition known to the cluster has
    its target replica set and is no longer listed in ``pending``."""
    metadata = admin.metadata(sorted({target.topic for target in targets}))
    complete = True
    for target in targets:
        code, partitions = metadata.topics.get(target.topic, (3, ()))
        current = {info.partition: info.replicas for info in partitions} if code == 0 else {}
        name = f"{target.topic}-{target.partition}"
        if target.partition not in current:
            if (target.topic, target.partition) in pending:
                complete = False
                print(f"Reassignment of partition {name} is still in progress.")
            continue
        if (target.topic, target.partition) in pending or (
            tuple(current[target.partition]) != tuple(target.replicas)
        ):
            complete = False
            print(f"Reassignment of partition {name} is still in progress.")
        else:
            print(f"Reassignment of partition {name} is completed.")
    return 0 if complete else 1


def _set_throttle(zookeeper: str, broker_ids: list[int], rate: int | None) -> None:
    """Write (or, with None, remove) the movers' throttle in each broker's dynamic config."""
    import trio  # noqa: PLC0415

    from impl.broker import dynamic_config  # noqa: PLC0415
    from impl.controller import admin as zk_admin  # noqa: PLC0415
    from impl.controller._kazoo import KazooCoordinator  # noqa: PLC0415
    from impl.controller.coordinator import (  # noqa: PLC0415
        BadVersionError,
        CoordinatorError,
        NodeExistsError,
        NoNodeError,
    )

    async def update(coordinator: KazooCoordinator, broker_id: int) -> None:
        path = dynamic_config.config_path(broker_id)
        for _ in range(100):  # bounded retries on concurrent writers
            try:
                data, stat = await coordinator.get(path)
                config = dynamic_config.parse_config_node(data)
                version = stat.version
            except NoNodeError:
                config, version = {}, -2
            config.pop(dynamic_config.THROTTLE_KEY_KIP, None)
            if rate is None:
                if dynamic_config.THROTTLE_KEY not in config:
                    return
                config.pop(dynamic_config.THROTTLE_KEY)
            else:
                config[dynamic_config.THROTTLE_KEY] = str(rate)
            encoded = dynamic_config.encode_config_node(config)
            try:
                if version == -2:
                    await zk_admin.ensure_path(coordinator, "/config/brokers")
                    await coordinator.create(path, encoded)
                else:
                    await coordinator.set(path, encoded, version=version)
            except (NodeExistsError, BadVersionError, NoNodeError):
                continue
            return
        raise CliError(f"could not update {path}: too many concurrent writers")

    async def main() -> None:
        coordinator = await KazooCoordinator.connect(zookeeper)
        try:
            for broker_id in broker_ids:
                await update(coordinator, broker_id)
        finally:
            await coordinator.close()

    try:
        trio.run(main)
    except (CoordinatorError, dynamic_config.DynamicConfigError) as error:
        raise CliError(f"cannot update the throttle: {error}") from None


def _execute(
    admin: AdminClient,
    arguments: argparse.Namespace,
    targets: tuple[ReassignmentTarget, ...],
    moves: list[ReplicaMove],
) -> int:
    if _replica_sets_change(admin, targets):
        if arguments.zookeeper is None:
            raise CliError("the replica lists change: give --zookeeper to start that part")
        _start_cross_broker(arguments.zookeeper, targets)
        print("Started the cross-broker reassignment.")
    throttle = arguments.replica_alter_log_dirs_throttle
    if throttle is not None:
        _set_throttle(arguments.zookeeper, sorted({m.broker_id for m in moves}), throttle)
        print(f"The log-dir movers of the brokers involved are throttled to {throttle} B/s.")
    pending = {
        TopicPartitionReplica(m.topic, m.partition, m.broker_id): m.target_log_dir for m in moves
    }
    deadline = time.monotonic() + arguments.timeout
    while pending:
        results = admin.alter_replica_log_dirs(pending)
        for replica, code in results.items():
            if code == 0:
                pending.pop(replica, None)
            elif code != REPLICA_NOT_AVAILABLE:
                raise CliError(
                    f"broker {replica.broker_id} refused to move {replica.topic}-"
                    f"{replica.partition} to {pending.get(replica)}: {error_name(code)}"
                )
        if not pending:
            break
        if time.monotonic() >= deadline:
            names = ", ".join(f"{r.topic}-{r.partition}@{r.broker_id}" for r in sorted(
                pending, key=lambda r: (r.topic, r.partition, r.broker_id)))
            raise CliError(f"timed out waiting for replicas to exist: {names}")
        time.sleep(RETRY_INTERVAL_SECONDS)  # a retry pace, as the KIP's tool, not a wait
    print(f"Started {len(moves)} replica move(s) between log dirs.")
    return 0


def _verify(admin: AdminClient, moves: list[ReplicaMove]) -> int:
    if not moves:
        print("No replica names a log dir; nothing to verify.")
        return 0
    broker_ids = sorted({move.broker_id for move in moves})
    described = admin.describe_log_dirs(broker_ids)
    replicas = admin.describe_replica_log_dirs(
        [TopicPartitionReplica(m.topic, m.partition, m.broker_id) for m in moves]
    )
    complete = True
    for move in moves:
        info = replicas[TopicPartitionReplica(move.topic, move.partition, move.broker_id)]
        status = move_state(
            move,
            described.get(move.broker_id, {}).keys(),
            info.current_log_dir,
            info.future_log_dir,
            info.future_offset_lag,
        )
        complete = complete and status.state is LogDirMoveState.COMPLETED
        print(status.describe())
    return 0 if complete else 1
