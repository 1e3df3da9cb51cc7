"""``logproof reassign --generate|--execute|--verify|--cancel``: reassignment with log dirs.

``--generate`` proposes a new assignment with the cluster's placer (KIP-879; see
:mod:`impl.cli._reassign_generate`).

The reassignment JSON is Kafka's (``{"version":1,"partitions":[{"topic","partition","replicas",
"log_dirs"}]}``), with ``"any"`` allowed for a replica whose dir does not matter. Everything
goes through the brokers' admin APIs, as Kafka's tool does since KIP-455 (no ZooKeeper access):

* ``--execute`` starts the cross-broker part with AlterPartitionReassignments when the replica
  lists differ from the current ones (a new order is a reassignment too: the first replica is
  the preferred leader), then sends AlterReplicaLogDirs to each broker for the replicas with an
  explicit dir, retrying those answered REPLICA_NOT_AVAILABLE every 100 ms until ``--timeout``
  (default 10 s, as in KIP-113). ``--replica-alter-log-dirs-throttle`` sets the KIP-113 mover
  throttle and ``--throttle`` the KIP-73 replication throttle (rates on the brokers, throttled
  replica lists on the topics), both as dynamic configs through IncrementalAlterConfigs.
* ``--verify`` prints, per partition, whether its replica list is the target one and no longer
  listed by ListPartitionReassignments, then each replica's move state; it exits 0 only when
  everything has completed, and then removes the throttles.
* ``--cancel`` cancels the JSON's reassignments (the controller reverts a started one to the
  original replicas and deletes the replicas it was adding, as Kafka does since KIP-455), and
  cancels the log-dir moves by pointing each replica back at its current dir, as Kafka's tool
  does; then it removes the throttles, as ``--verify`` does once complete, unless
  ``--preserve-throttles``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from impl.broker.admin import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    AdminClient,
    AdminClientError,
    TopicPartitionReplica,
    error_name,
)
from impl.broker.configs import (
    ALTER_LOG_DIRS_RATE,
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
)
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
from ._security import add_security_arguments, admin_client

REPLICA_NOT_AVAILABLE = 9
RETRY_INTERVAL_SECONDS = 0.1
SET = 0
DELETE = 1


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
    mode.add_argument("--cancel", action="store_true",
                      help="cancel the reassignment and the log-dir moves of the JSON")
    parser.add_argument("--reassignment-json-file", type=Path, default=None,
                        help="with --execute or --verify: the reassignment JSON")
    parser.add_argument("--topics-to-move-json-file", type=Path, default=None,
                        help='with --generate: {"version":1,"topics":[{"topic":"t"}]}')
    parser.add_argument("--broker-list", default=None,
                        help="with --generate: the brokers to place replicas on, e.g. 1,2,3")
    parser.add_argument("--disable-rack-aware", action="store_true",
                        help="with --generate: Kafka's rack-unaware assignment")
    parser.add_argument("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT]")
    add_security_arguments(parser)
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="seconds to retry REPLICA_NOT_AVAILABLE (default 10)")
    parser.add_argument("--zookeeper", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--throttle", type=int, default=None, metavar="BYTES_PER_SECOND",
                        help="with --execute: the KIP-73 replication throttle of the moving "
                             "replicas (removed by --verify once complete)")
    parser.add_argument("--replica-alter-log-dirs-throttle", type=int, default=None,
                        metavar="BYTES_PER_SECOND",
                        help="with --execute: limit the log-dir movers of the brokers involved "
                             "(a dynamic broker config, applied live; --verify removes it once "
                             "every move has completed)")
    parser.add_argument("--preserve-throttles", action="store_true",
                        help="with --verify or --cancel: leave the throttles as they are "
                             "(Kafka's option; by default they are removed)")
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
    """Generate, execute, verify or cancel."""
    if arguments.generate:
        return generate(arguments)
    if arguments.reassignment_json_file is None:
        raise CliError("--execute, --verify and --cancel need --reassignment-json-file")
    if arguments.zookeeper is not None:
        print("Warning: --zookeeper is no longer needed and is ignored; the reassignment goes "
              "through --bootstrap-server.", file=sys.stderr)
    if arguments.timeout <= 0:
        raise CliError("--timeout must be positive")
    for name, value in (("--replica-alter-log-dirs-throttle",
                         arguments.replica_alter_log_dirs_throttle),
                        ("--throttle", arguments.throttle)):
        if value is not None:
            if not arguments.execute:
                raise CliError(f"{name} goes with --execute")
            if value < 1:
                raise CliError(f"{name} must be at least 1")
    targets, moves = _load(arguments.reassignment_json_file)
    try:
        with admin_client(arguments, timeout_seconds=30.0) as admin:
            if arguments.execute:
                return _execute(admin, arguments, targets, moves)
            if arguments.cancel:
                status = _cancel(admin, targets, moves)
                if not arguments.preserve_throttles:
                    _remove_throttles(admin, targets, moves)
                return status
            pending = set(admin.list_partition_reassignments())
            status = _verify_partitions(admin, targets, pending)
            status = max(status, _verify(admin, moves))
            if status == 0 and not arguments.preserve_throttles:
                _remove_throttles(admin, targets, moves)
    except AdminClientError as error:
        raise CliError(str(error)) from None
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


def _alter_configs(admin: AdminClient, resource_type: int, name: str,
                   operations: list[tuple[str, int, str | None]]) -> None:
    code, message = admin.incremental_alter_configs(resource_type, name, operations)
    if code != 0:
        raise CliError(f"cannot update the config of {name}: {error_name(code)}: "
                       f"{message or ''}".rstrip(": "))


def _set_throttles(admin: AdminClient, arguments: argparse.Namespace,
                   targets: tuple[ReassignmentTarget, ...], moves: list[ReplicaMove]) -> None:
    """Kafka's --throttle and --replica-alter-log-dirs-throttle, as dynamic configs."""
    mover_rate = arguments.replica_alter_log_dirs_throttle
    if mover_rate is not None:
        for broker_id in sorted({m.broker_id for m in moves}):
            _alter_configs(admin, BROKER_RESOURCE, str(broker_id),
                           [(ALTER_LOG_DIRS_RATE, SET, str(mover_rate))])
        print(f"The log-dir movers of the brokers involved are throttled to {mover_rate} B/s.")
    rate = arguments.throttle
    if rate is None:
        return
    current = _current_replicas(admin, targets)
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for target in targets:
        existing = current[(target.topic, target.partition)]
        if tuple(existing) == tuple(target.replicas):
            continue
        # Kafka's tool: the existing replicas are throttled as leaders, the new as followers
        leaders.setdefault(target.topic, []).extend(
            f"{target.partition}:{b}" for b in existing)
        followers.setdefault(target.topic, []).extend(
            f"{target.partition}:{b}" for b in target.replicas if b not in existing)
        brokers.update(existing)
        brokers.update(target.replicas)
    for topic in sorted(set(leaders) | set(followers)):
        _alter_configs(admin, TOPIC_RESOURCE, topic, [
            (LEADER_THROTTLED_REPLICAS, SET, ",".join(leaders.get(topic, []))),
            (FOLLOWER_THROTTLED_REPLICAS, SET, ",".join(followers.get(topic, []))),
        ])
    for broker_id in sorted(brokers):
        _alter_configs(admin, BROKER_RESOURCE, str(broker_id), [
            (LEADER_THROTTLED_RATE, SET, str(rate)), (FOLLOWER_THROTTLED_RATE, SET, str(rate))])
    print(f"The inter-broker throttle limit was set to {rate} B/s.")


def _remove_throttles(admin: AdminClient, targets: tuple[ReassignmentTarget, ...],
                      moves: list[ReplicaMove]) -> None:
    """--verify's clean-up once complete, and --cancel's (as Kafka's tool): every throttle this
    tool may have set that is set."""
    removed = False
    for broker_id in sorted(admin.metadata().brokers):
        removed |= _delete_set(
            admin, BROKER_RESOURCE, str(broker_id),
            (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE, ALTER_LOG_DIRS_RATE),
            "DYNAMIC_BROKER_CONFIG")
    for topic in sorted({target.topic for target in targets}):
        removed |= _delete_set(admin, TOPIC_RESOURCE, topic,
                               (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS),
                               "DYNAMIC_TOPIC_CONFIG")
    if removed:
        print("Throttle was removed.")


def _delete_set(admin: AdminClient, resource_type: int, name: str, keys: tuple[str, ...],
                source: str) -> bool:
    """Delete those of ``keys`` the entity itself sets; whether any was."""
    code, _, entries = admin.describe_configs(resource_type, name, keys=keys, synonyms=False)
    if code != 0:
        return False  # e.g. a topic the controller does not know: nothing of ours to remove
    present = [entry.name for entry in entries if entry.source == source]
    if present:
        _alter_configs(admin, resource_type, name, [(key, DELETE, None) for key in present])
    return bool(present)


def _current_replicas(admin: AdminClient, targets: tuple[ReassignmentTarget, ...]
                      ) -> dict[tuple[str, int], tuple[int, ...]]:
    metadata = admin.metadata(sorted({target.topic for target in targets}))
    current: dict[tuple[str, int], tuple[int, ...]] = {}
    for target in targets:
        code, partitions = metadata.topics.get(target.topic, (3, ()))
        if code != 0:
            raise CliError(f"topic {target.topic!r}: {error_name(code)}")
        replicas = {info.partition: info.replicas for info in partitions}
        if target.partition not in replicas:
            raise CliError(f"partition {target.topic}-{target.partition} does not exist")
        current[(target.topic, target.partition)] = tuple(replicas[target.partition])
    return current


def _cancel(admin: AdminClient, targets: tuple[ReassignmentTarget, ...],
            moves: list[ReplicaMove]) -> int:
    """Cancel the partitions' reassignments and the replicas' log-dir moves."""
    status = 0
    ongoing = admin.list_partition_reassignments()
    wanted = [(t.topic, t.partition) for t in targets if (t.topic, t.partition) in ongoing]
    if wanted:
        results = admin.alter_partition_reassignments(dict.fromkeys(wanted))
        for (topic, partition), (code, message) in sorted(results.items()):
            if code == 0:
                print(f"Cancelled the reassignment of partition {topic}-{partition}.")
            else:
                status = 1
                print(f"Could not cancel the reassignment of {topic}-{partition}: "
                      f"{error_name(code)}: {message or ''}".rstrip(": "))
    replicas = [TopicPartitionReplica(m.topic, m.partition, m.broker_id) for m in moves]
    back: dict[TopicPartitionReplica, str] = {}
    if replicas:
        for replica, info in admin.describe_replica_log_dirs(replicas).items():
            if info.future_log_dir is not None and info.current_log_dir is not None:
                back[replica] = info.current_log_dir  # re-pointing at the current dir cancels
    if back:
        for replica, code in sorted(admin.alter_replica_log_dirs(back).items(),
                                    key=lambda item: (item[0].topic, item[0].partition,
                                                      item[0].broker_id)):
            name = f"{replica.topic}-{replica.partition} on broker {replica.broker_id}"
            if code == 0:
                print(f"Cancelled the log-dir move of {name} (it stays in {back[replica]}).")
            else:
                status = 1
                print(f"Could not cancel the log-dir move of {name}: {error_name(code)}")
    if not wanted and not back:
        print("Nothing to cancel: no reassignment or log-dir move of the JSON is in progress.")
    return status


def _alter_dirs_once(admin: AdminClient, pending: dict[TopicPartitionReplica, str]) -> None:
    """Send AlterReplicaLogDirs for ``pending``; drop the accepted ones from it."""
    if not pending:
        return
    for replica, code in admin.alter_replica_log_dirs(pending).items():
        if code == 0:
            pending.pop(replica, None)
        elif code != REPLICA_NOT_AVAILABLE:
            raise CliError(
                f"broker {replica.broker_id} refused to move {replica.topic}-"
                f"{replica.partition} to {pending.get(replica)}: {error_name(code)}"
            )


def _execute(
    admin: AdminClient,
    arguments: argparse.Namespace,
    targets: tuple[ReassignmentTarget, ...],
    moves: list[ReplicaMove],
) -> int:
    _set_throttles(admin, arguments, targets, moves)
    pending = {
        TopicPartitionReplica(m.topic, m.partition, m.broker_id): m.target_log_dir for m in moves
    }
    # First pass before the cross-broker part: a broker answers REPLICA_NOT_AVAILABLE for a
    # replica it does not host yet and creates it in the remembered dir when it arrives.
    _alter_dirs_once(admin, pending)
    if _replica_sets_change(admin, targets):
        started = admin.alter_partition_reassignments(
            {(t.topic, t.partition): t.replicas for t in targets})
        refused = {tp: item for tp, item in started.items() if item[0] != 0}
        if refused:
            (topic, partition), (code, message) = sorted(refused.items())[0]
            raise CliError(f"cannot reassign {topic}-{partition}: {error_name(code)}: "
                           f"{message or ''}".rstrip(": "))
        print("Started the cross-broker reassignment.")
    deadline = time.monotonic() + arguments.timeout
    while pending:
        _alter_dirs_once(admin, pending)
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
