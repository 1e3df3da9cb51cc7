"""Planted bugs: the mutation test of the default conformance run.

Each :class:`Plant` is a realistic bug in one decision of the replication, controller, storage or
group path, written as a source edit of the module that owns the decision: an ``anchor`` (a fragment
that must occur exactly once in the module) and its ``replacement``. :func:`run_plant` starts a
fresh Python process that imports the module with the edit applied (an import hook installed before
anything else is imported, so every importer sees the planted code) and runs seeds of the default
cluster configuration (the one ``logproof conformance run``, the demo and ``logproof fuzz`` use)
until one fails; ``seeds`` is the budget the default run catches the plant within (measured; the
first failing seed is recorded next to it).

:data:`GAPS` holds the plants the default run does not catch within the seeds measured: the
decisions its workload and faults do not yet reach (run them with ``--only NAME``).

Anchors make a refactor fail loudly: when the decision moves, its anchor no longer occurs once and
:func:`planted_source` raises :class:`PlantStale` naming the plant, so the list is updated with the
code rather than silently planting nothing (``tests/conformance/test_plants.py`` checks every
anchor in the default test run).

Run: ``python -m conformance.plants [--only NAME ...] [--seeds N]`` prints, per plant, the seed
that caught it and the invariant, and ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

#: The repository root (the parent of the packages).
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True, slots=True)
class Plant:
    """One planted bug.

    Attributes:
        name: a short slug.
        area: ``replication``, ``controller``, ``storage`` or ``groups``.
        module: the module holding the decision (``impl.broker.replication``).
        anchor: the fragment replaced (must occur exactly once).
        replacement: what replaces it.
        bug: what the planted code gets wrong, and whose bug it is.
        seeds: the budget: one of seeds ``0 .. seeds - 1`` of the default run fails (for a
            gap: the seeds measured without a failure).
        caught_at: the first failing seed measured, and its invariant (``(-1, "")``: a gap).
    """

    name: str
    area: str
    module: str
    anchor: str
    replacement: str
    bug: str
    seeds: int
    caught_at: tuple[int, str]


class PlantStale(Exception):  # noqa: N818 (a verdict on the list, not an error of a run)
    """A plant's anchor does not occur exactly once: the code it targets moved."""


PLANTS: tuple[Plant, ...] = (
    Plant(
        "isr_expansion_before_epoch_start", "replication", "impl.broker.replication",
        "elif follower_log_end_offsets.get(replica, -1) >= max(\n"
        "            high_watermark, leader_epoch_start_offset\n        ):",
        "elif follower_log_end_offsets.get(replica, -1) >= high_watermark:",
        "ISR expansion once the follower reaches the HW, before the start of the leader's epoch "
        "(KIP-320 rule 4)", 34, (4, "NOT_ENABLED"),
    ),
    Plant(
        "hw_from_the_leader_alone", "replication", "impl.broker.replication",
        "    return max(current_high_watermark, min(offsets))",
        "    return max(current_high_watermark, leader_log_end_offset)",
        "the leader's HW ignores its followers' fetch offsets (commits what only it holds)",
        4, (0, "NOT_ENABLED"),
    ),
    Plant(
        "fetch_from_an_older_epoch_served", "replication", "impl.broker.node",
        "        if epoch is not None and epoch >= 0 and epoch != state.leader_epoch:",
        "        if epoch is not None and epoch >= 0 and epoch < state.leader_epoch:",
        "a leader of an older epoch answers a follower that already follows a newer one (the "
        "fetch epoch fence only rejects older requests, KIP-320)", 96, (87, "COMMITTED_DURABLE"),
    ),
    Plant(
        "isr_expansion_on_first_fetch", "replication", "impl.broker.replication",
        "elif follower_log_end_offsets.get(replica, -1) >= max(\n"
        "            high_watermark, leader_epoch_start_offset\n        ):",
        "elif follower_log_end_offsets.get(replica, -1) >= 0:",
        "a follower joins the ISR as soon as it fetches, before it holds everything below the HW",
        4, (0, "LOG_MATCHING"),
    ),
    Plant(
        "truncation_to_the_hw", "replication", "impl.broker.replication",
        "    if policy is TruncationPolicy.HIGH_WATERMARK:\n"
        "        return TruncationStep(clamp(high_watermark))",
        "    if True:\n        return TruncationStep(clamp(high_watermark))",
        "a new follower truncates to its own HW instead of asking the leader (KIP-101 scenario 1: "
        "it drops acknowledged records a later leader needs)", 4, (0, "LOG_MATCHING"),
    ),
    Plant(
        "election_keeps_the_epoch", "controller", "impl.controller.controller",
        "        new = LeaderIsr(leader, current.leader_epoch + 1, isr, self.epoch, "
        "current.zk_version)",
        "        new = LeaderIsr(leader, current.leader_epoch, isr, self.epoch, "
        "current.zk_version)",
        "an election writes the new leader under the old leader epoch",
        4, (0, "IMPLEMENTATION_ERROR"),
    ),
    Plant(
        "controller_writes_unfenced", "controller", "impl.controller.controller",
        "        if not self.config.fence_writes:\n"
        "            return CheckOp(CONTROLLER_EPOCH_PATH, ANY_VERSION)\n"
        "        return CheckOp(CONTROLLER_EPOCH_PATH, self.epoch_zk_version)",
        "        return CheckOp(CONTROLLER_EPOCH_PATH, ANY_VERSION)",
        "controller writes do not check /controller_epoch's version: a zombie controller's write "
        "lands (KAFKA-6082)", 4, (2, "CONTROLLER_FENCED"),
    ),
    Plant(
        "recovery_without_crc", "storage", "impl.storage.log",
        "self._scan(segment, 0, size, check_crc=not trusted, build_index=True)",
        "self._scan(segment, 0, size, check_crc=False, build_index=True)",
        "log recovery does not check the CRC of unflushed batches (a torn write in the middle of "
        "a segment is served)", 8, (2, "READ_CONSISTENT"),
    ),
    Plant(
        "lost_replica_recreated_while_a_dir_is_offline", "storage", "impl.storage.manager",
        "        if not is_new and (tp in self._lost or self.offline_dirs):",
        "        if not is_new and tp in self._lost:",
        "a replica not known lost is created empty without isNew while a dir is offline (it may "
        "be on that dir: KAFKA-10314)", 8, (2, "DIR_FAILURE_ISOLATION"),
    ),
    Plant(
        "swap_without_final_catch_up", "storage", "impl.storage.manager",
        "                    copied = mover.copy_all(partition.log, future)",
        "                    copied = 0",
        "the swap skips the final catch-up under the lock: records appended since the last "
        "chunk are not in the new log", 4, (0, "IMPLEMENTATION_ERROR"),
    ),
    Plant(
        "swap_before_the_destination_is_durable", "storage", "impl.storage.manager",
        "                    future.make_durable()\n"
        "                    self.disk.fsync_dir(future.log_dir)",
        "                    pass",
        "the swap renames before tp.move's data and entry are durable (Apache Kafka's order): a "
        "crash after the renames loses the copy", 10, (0, "MOVE_NO_LOSS"),
    ),
    Plant(
        "election_outside_the_isr", "controller", "impl.controller.controller",
        "        candidates = [r for r in replicas if r in isr_usable]",
        "        candidates = [r for r in replicas if r in eligible]",
        "the controller elects the first live replica, in the ISR or not (an unclean election "
        "with unclean.leader.election.enable off)", 30, (0, "NOT_ENABLED"),
    ),
    Plant(
        "deposed_leader_acknowledges", "replication", "impl.broker.node",
        "        return (state is not None and state.role is ReplicaRole.LEADER\n"
        "                and state.leader_epoch == leader_epoch)",
        "        return state is not None",
        "a leader deposed by a newer LeaderAndIsr while its append waited for the partition lock "
        "still writes and acknowledges it", 36, (5, "NOT_ENABLED"),
    ),
    Plant(
        "delayed_fetch_counts_what_it_sends", "replication", "impl.broker.node",
        "        if not consumer and not call.asked_again:\n"
        "            self._record_follower_fetch(tp, call, partition, out)",
        "        if not consumer:\n"
        "            self._record_follower_fetch(tp, call._replace(offset=partition.log_end_offset)"
        " if call.asked_again else call, partition, out)",
        "a delayed fetch woken by new records records its follower at the leader's LEO, counting "
        "what it is about to send as replicated (the HW passes records only the leader holds; "
        "Kafka records a follower's position from its fetch request, never from a response)",
        4, (0, "LOG_MATCHING"),
    ),
    Plant(
        "commit_any_generation", "groups", "impl.broker.group_coordinator",
        "            if request.generation_id != group.generation:\n"
        "                return answer(ILLEGAL_GENERATION)\n"
        "            if group.state is GroupState.COMPLETING_REBALANCE:\n"
        "                return answer(REBALANCE_IN_PROGRESS)\n"
        "            self._heartbeat(group.members[request.member_id])",
        "            if group.state is GroupState.COMPLETING_REBALANCE:\n"
        "                return answer(REBALANCE_IN_PROGRESS)\n"
        "            self._heartbeat(group.members[request.member_id])",
        "OffsetCommit is accepted from a member of any generation (a revoked owner's late "
        "auto-commit overwrites the new owner's offsets)", 8, (1, "NOT_ENABLED"),
    ),
    Plant(
        "serve_while_loading", "groups", "impl.broker.group_coordinator",
        "        if state is CoordinatorState.LOADING:\n            return loading_error",
        "        if False:\n            return loading_error",
        "the coordinator answers before its load of the offsets partition completes (an "
        "OffsetFetch answers from a half-replayed cache)", 4, (0, "NOT_ENABLED"),
    ),
    Plant(
        "offsets_acks_one", "groups", "impl.broker.group_coordinator",
        "    records: tuple[tuple[bytes, bytes | None], ...]\n    acks: int = -1",
        "    records: tuple[tuple[bytes, bytes | None], ...]\n    acks: int = 1",
        "group and offset records are written with acks=1: a commit is acknowledged before the "
        "followers hold it, and a leader change loses it", 24, (1, "OFFSETS_DURABLE"),
    ),
    Plant(
        "zombie_coordinator", "groups", "impl.broker.group_coordinator",
        "            return\n        self._unload(event.partition, out)\n"
        "        state.leader_epoch = max(state.leader_epoch, event.leader_epoch)",
        "            return\n        state.leader_epoch = max(state.leader_epoch, "
        "event.leader_epoch)",
        "the old leader of an offsets partition keeps its groups loaded after losing the "
        "leadership and answers from its cache (a zombie coordinator)", 20,
        (0, "COORDINATOR_LOADED"),
    ),
    Plant(
        "queued_delete_unguarded", "storage", "impl.storage.manager",
        "        if not request.guarded:\n            return None\n"
        "        partition = self._partitions.get(request.tp)",
        "        return None\n        partition = self._partitions.get(request.tp)",
        "a queued tp.delete is removed while no online dir serves a copy at least as long (the "
        "swap's other copy may be lost or not yet durable)", 4, (0, "MOVE_NO_LOSS"),
    ),
    Plant(
        "redirect_off_a_failed_dir", "storage", "impl.storage.manager",
        "                if swallow.failed and move.state in "
        "(MoveState.COPYING, MoveState.CAUGHT_UP):",
        "                if False:",
        "a redirect whose old tp.move could not be retired creates the new one anyway (seed 954)",
        48, (45, "DIR_FAILURE_ISOLATION"),
    ),
    Plant(
        "recovery_loads_from_a_failed_dir", "storage", "impl.storage.manager",
        "        if live_dir in self.offline_dirs:\n            # the dir failed earlier",
        "        if False:\n            # the dir failed earlier",
        "startup recovery loads partitions from a dir that failed earlier in the same recovery "
        "(seed 170)", 16, (15, "DIR_FAILURE_ISOLATION"),
    ),
    Plant(
        "sequence_gap_accepted", "replication", "impl.broker.producer_state",
        "        if first_sequence != _next_sequence(entry.batches[-1].last_sequence):\n"
        "            return SequenceCheck(SequenceVerdict.REJECT, OUT_OF_ORDER_SEQUENCE_NUMBER)",
        "        if False:\n"
        "            return SequenceCheck(SequenceVerdict.REJECT, OUT_OF_ORDER_SEQUENCE_NUMBER)",
        "an idempotent producer's batch with a sequence gap is appended (the leader's sequence "
        "check skips the gap)", 4, (1, "IDEMPOTENCE_SEQUENCED"),
    ),
    Plant(
        "uncleanly_restarted_member_elected", "controller", "impl.controller.controller",
        "        if not marked or all(r in marked for r in isr):\n"
        "            return frozenset()",
        "        if True:\n            return frozenset()",
        "the controller ignores how an ISR member last shut down and elects it over a member "
        "that kept its log (ZooKeeper-era Kafka; KIP-966, cluster seed 595)", 40,
        (9, "NO_COMMITTED_LOSS"),
    ),
    Plant(
        "follower_log_start_from_the_hw", "replication", "impl.broker.node",
        "self.store.follow_log_start_offset(tp, leader_log_start_offset)",
        "self.store.follow_log_start_offset(tp, leader_hw)",
        "a follower moves its log start offset to the HW its fetch answer carries instead of "
        "the leader's log start (DeleteRecords reaching the followers deletes committed records "
        "a later leader must serve)", 4, (0, "LOG_MATCHING"),
    ),
    Plant(
        "segment_holding_the_log_start_deleted", "storage", "impl.storage.log",
        "self.segments[0].next_offset <= offset",
        "self.segments[0].base_offset < offset",
        "DeleteRecords (or retention) also deletes the segment that holds the new log start "
        "offset: the records at and above it in that segment are lost", 15,
        (14, "NO_COMMITTED_LOSS"),
    ),
    Plant(
        "preferred_election_ignores_the_isr", "controller", "impl.controller.controller",
        "if (tp in self._preferred and current.leader != preferred and preferred in isr_usable",
        "if (tp in self._preferred and current.leader != preferred and preferred in eligible",
        "a preferred replica election elects the preferred replica when it is live but out of "
        "the ISR (a lagging copy leads: acknowledged records lost)", 4, (3, "NOT_ENABLED"),
    ),
    Plant(
        "deleted_topic_replicas_kept", "controller", "impl.controller.controller",
        "topic, partition, EPOCH_DURING_DELETE, True",
        "topic, partition, EPOCH_DURING_DELETE, False",
        "topic deletion sends StopReplica without delete: the replicas stop but their logs stay "
        "on the brokers after the topic is gone", 4, (0, "TOPIC_DELETED"),
    ),
    Plant(
        "round_names_a_partition_twice", "replication", "impl.broker.fetch_rounds",
        "        latest = latest_per_partition(waiting)\n",
        "        latest = list(waiting)\n",
        "a follower's round names a partition twice when a LeaderAndIsr replaced its fetch state "
        "while a call of the old state still waited; the leader answers both, and the answer "
        "meant for the stale call (FENCED_LEADER_EPOCH for the old epoch) is applied to the new "
        "one: the partition stays failed until a newer LeaderAndIsr (the trio fetcher's bug "
        "that stalled a reassignment in the integration tests; a gap, none of seeds 0-149 "
        "failing, until the run checked FOLLOWER_PROGRESS)", 16, (9, "FOLLOWER_PROGRESS"),
    ),
    Plant(
        "isr_expansion_only_when_the_follower_advances", "replication", "impl.broker.node",
        "            self.advance_hw(tp, partition, out)\n"
        "            self._complete(tp, out)\n"
        "        self.maybe_change_isr(tp, out, fetched=replica)\n",
        "            self.advance_hw(tp, partition, out)\n"
        "            self._complete(tp, out)\n"
        "            self.maybe_change_isr(tp, out, fetched=replica)\n",
        "the leader reconsiders a follower's ISR membership only on a fetch that moved the "
        "follower's offset: a follower whose catch-up fetch came while an ISR write was in "
        "flight, or before the HW reached the start of the leader's epoch, fetches on at the "
        "leader's end and never joins; the partition stays under-replicated with no safety "
        "invariant broken (none of seeds 0-59 failing until the run checked CLUSTER_HEALS)", 4,
        (1, "CLUSTER_HEALS"),
    ),
    Plant(
        "max_timestamp_searched_as_a_time", "replication", "impl.broker.node",
        "                found = (self.store.max_timestamp_record(tp) if call.timestamp == "
        "MAX_TIMESTAMP\n",
        "                found = (self.store.max_timestamp_record(tp) if False\n",
        "ListOffsets' max timestamp (-3, KIP-734) answered as a search by time for -3, the "
        "first record of the log, as a broker before Kafka 3.0 does (logproof did until it "
        "advertised ListOffsets v7)", 4, (0, "READ_CONSISTENT"),
    ),
)

#: Plants the default run does not catch within their budget (seeds run, no failure): gaps
#: of the run's reach, kept so that a harsher run can be measured against them.
GAPS: tuple[Plant, ...] = (
    Plant(
        "latest_offset_from_a_lagging_hw", "replication", "impl.broker.node",
        "            lagging = consumer and (",
        "            lagging = False and (",
        "a new leader answers a consumer's ListOffsets latest with the HW it inherited while that "
        "HW is still below the start of its epoch (Kafka answers OFFSET_NOT_AVAILABLE): the "
        "end offset moves backwards below what the consumer read. A gap until the simulator "
        "parked followers' delayed fetches (a follower's HW then comes with records or at the "
        "deadline, so a new leader's inherited HW lags longer): 3 lagging answers in 30 seeds "
        "before, none past the consumer's position; none of seeds 0-149 failed. Caught at seed "
        "12 until a follower applied a late answer to an earlier fetch from its log end "
        "(inferred: a follower's HW is then fresher when it is elected): 3 lagging answers in "
        "30 seeds still; seeds 0-400 pass, seed 401 catches it (too far for the plants' run)",
        401, (-1, ""),
    ),
    Plant(
        "deletion_with_the_cached_leader_epoch", "controller", "impl.controller.controller",
        "topic, partition, EPOCH_DURING_DELETE, True",
        "topic, partition,\n                    "
        "self.leader_isr[tp].leader_epoch if tp in self.leader_isr else -1, True",
        "a topic deletion's StopReplica carries the controller's cached leader epoch, not "
        "Kafka's EpochDuringDelete: replicas that already hold a later epoch refuse it "
        "(FENCED_LEADER_EPOCH) and the deletion never finishes (fuzz seed 67 of the admin "
        "workload; the default run has since moved: seeds 0-59 pass with it)", 60, (-1, ""),
    ),
    Plant(
        "failed_broker_kept_in_the_isr", "controller", "impl.controller.controller",
        "            eligible = [r for r in eligible if r not in removed]",
        "            pass",
        "a pending ISR removal of a failed (bounced) broker is dropped: the controller plans from "
        "its cached ISR and keeps the broker in it (caught at seed 64 before the default run ran "
        "consumer groups, whose traffic moved the interleaving; KIP-966's marks now also bar "
        "a bounced broker that lost its tail, whatever its pending removal)", 80, (-1, ""),
    ),
    Plant(
        "zombie_reads_on_a_new_session", "controller", "impl.controller.node",
        "        if event.session_id != self.session_id:\n"
        "            self._session_gone(event.session_id)  # its results are never acted on",
        "        if False:\n"
        "            self._session_gone(event.session_id)  # its results are never acted on",
        "the controller node acts on reads its client ran under a new session (its term's "
        "session expired, the notice not yet heard): a zombie reads fresh ZooKeeper data and "
        "sends brokers its stale cached states (fuzz seed 10226; seeds 0-199 of the default run "
        "and 0-399 of that seed's configuration with the whole rule reverted: none failed, the "
        "damage needs a broker restart in the window and a stale state that then matters)",
        200, (-1, ""),
    ),
    Plant(
        "lost_replica_checkpoint_entries_dropped", "storage", "impl.storage.manager",
        "        if self._lost:\n            recorded = self._checkpoint_entries",
        "        if False:\n            recorded = self._checkpoint_entries",
        "a rewrite of a dir's checkpoints drops the entries of a lost replica's untouched copy: "
        "a tp.move promoted at a later start loses its HW and log start offset, and records "
        "DeleteRecords removed come back. The default run's storage broker does not reach it in "
        "200 seeds (it needs DeleteRecords inside a segment, a swap crash after the source "
        "rename, a dir bad at the next start, then repaired); the single-broker run "
        "`--brokers 1 --steps 300` catches it at seed 167 (MOVE_NO_LOSS, 1 of 300 seeds), "
        "`--compacted 1` at seed 557", 200, (-1, ""),
    ),
)


def source_path(module: str) -> Path:
    """The file of ``module`` under the repository root (without importing anything)."""
    base = ROOT.joinpath(*module.split("."))
    path = base.with_suffix(".py")
    return path if path.exists() else base / "__init__.py"


def planted_source(plant: Plant) -> str:
    """The module's source with the plant applied.

    Raises:
        PlantStale: the anchor does not occur exactly once.
    """
    source = source_path(plant.module).read_text()
    found = source.count(plant.anchor)
    if found != 1:
        raise PlantStale(
            f"plant {plant.name}: its anchor occurs {found} times in {plant.module} (the code "
            f"it plants a bug in moved; update the plant): {plant.anchor!r}"
        )
    return source.replace(plant.anchor, plant.replacement)


#: Run in the child: the import hook first, then the seeds (argv[1]: JSON arguments).
_CHILD = """
import importlib.abc, importlib.machinery, importlib.util, json, sys
args = json.loads(sys.argv[1])
sys.path.insert(0, args["root"])

class Loader(importlib.abc.Loader):
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        exec(compile(args["source"], args["path"], "exec"), module.__dict__)

class Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != args["module"]:
            return None
        return importlib.util.spec_from_file_location(name, args["path"], loader=Loader())

sys.meta_path.insert(0, Finder())
import logging
logging.disable(logging.CRITICAL)
from conformance.cluster_sim import ClusterConfig
from conformance.runner import run_seed
config = ClusterConfig()
for seed in range(args["first"], args["first"] + args["seeds"]):
    result = run_seed(seed, config)
    if result.failed:
        print(json.dumps({"seed": seed, "invariant": result.violated_invariant,
                          "replay": result.replay_command}))
        break
else:
    print(json.dumps({"seed": -1, "invariant": ""}))
"""


@dataclass(frozen=True, slots=True)
class PlantResult:
    """What the default run did to one plant."""

    plant: str
    area: str
    seeds_run: int
    caught_seed: int
    invariant: str
    seconds: float

    @property
    def caught(self) -> bool:
        """Whether a seed failed within the budget."""
        return self.caught_seed >= 0


def run_plant(plant: Plant, seeds: int | None = None, first_seed: int = 0,
              timeout_seconds: float = 3600.0) -> PlantResult:
    """Run the default configuration with ``plant`` applied, from ``first_seed`` until a seed
    fails or ``seeds`` (the plant's budget by default) ran, in a fresh process.

    Raises:
        PlantStale: the plant's anchor moved.
        RuntimeError: the child process failed (its stderr).
    """
    budget = plant.seeds if seeds is None else seeds
    arguments = {
        "root": str(ROOT), "module": plant.module, "path": str(source_path(plant.module)),
        "source": planted_source(plant), "first": first_seed, "seeds": budget,
    }
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(arguments)], capture_output=True, text=True,
        timeout=timeout_seconds, check=False, cwd=str(ROOT),
    )
    if done.returncode != 0:
        raise RuntimeError(f"plant {plant.name}: the run failed:\n{done.stderr[-4000:]}")
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    caught = int(answer["seed"])
    return PlantResult(plant.name, plant.area, budget if caught < 0 else caught - first_seed + 1,
                       caught, str(answer["invariant"]), time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    """Run every plant (or ``--only`` some) and print what caught each."""
    parser = argparse.ArgumentParser(prog="python -m conformance.plants")
    parser.add_argument("--only", nargs="*", default=None,
                        help="plant names (of PLANTS or GAPS; default: every plant of PLANTS)")
    parser.add_argument("--seeds", type=int, default=None,
                        help="seeds per plant (default: each plant's budget)")
    arguments = parser.parse_args(argv)
    chosen = [p for p in (*PLANTS, *GAPS)
              if (p.name in arguments.only if arguments.only is not None else p in PLANTS)]
    results = []
    for plant in chosen:
        result = run_plant(plant, arguments.seeds)
        results.append(result)
        verdict = (f"caught at seed {result.caught_seed} ({result.invariant})" if result.caught
                   else f"NOT caught in {result.seeds_run} seeds")
        print(f"{plant.area:12} {plant.name:48} budget {plant.seeds:3}  {verdict}  "
              f"{result.seconds:.0f} s", flush=True)
    caught = sum(r.caught for r in results)
    print(f"caught {caught} of {len(results)}")
    print(json.dumps({"plants": len(results), "caught": caught, "results": [
        {"plant": r.plant, "area": r.area, "caught_seed": r.caught_seed,
         "invariant": r.invariant, "seeds_run": r.seeds_run} for r in results]}))
    return 0 if caught == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
