"""The decisions the move core took over from the storage shell: which request is a new move, a
redirect or a cancel; which copy is CAUGHT_UP; the completion each effect names; and the one
mover scheduler (``num.replica.alter.log.dirs.threads`` slots, the shared throttle)."""

from __future__ import annotations

import ast
from pathlib import Path

from conformance.disk import SimDisk
from impl.storage import ErrorCode, LogManager, MoveState, TopicPartition
from impl.storage import replica_move as rm
from impl.storage.manager import MoverCopy, MoverSwap, MoverWait

from ._support import DIR_A, DIR_B, DIR_C, ManualClock, batch, config, run

E, S = rm.MoveEvent, rm.MoveState
DIRS = (DIR_A, DIR_B, DIR_C)
T0 = TopicPartition("t", 0)


def _decide(move: rm.Move, requested: str, *, current: str | None = DIR_A,
            offline: frozenset[str] = frozenset(), partition_offline: bool = False
            ) -> rm.RequestDecision:
    return rm.decide_request(move, requested, configured_dirs=DIRS, offline_dirs=offline,
                             current_dir=current, partition_offline=partition_offline,
                             source_leo=7)


def test_a_request_for_another_dir_is_a_new_move_with_the_source_leo() -> None:
    decision = _decide(rm.Move(T0), DIR_B)
    assert decision == rm.RequestDecision(rm.MoveInput(E.REQUESTED, DIR_B, source_leo=7), None)


def test_while_moving_another_dir_redirects_the_same_dir_does_nothing_the_current_cancels() -> None:
    moving = rm.Move(T0, S.COPYING, DIR_A, DIR_B)
    assert _decide(moving, DIR_C).input == rm.MoveInput(E.REDIRECTED, DIR_C)
    assert _decide(moving, DIR_B) == rm.RequestDecision(None, None)
    assert _decide(moving, DIR_A).input == rm.MoveInput(E.CANCEL_REQUESTED)
    assert _decide(rm.Move(T0, S.CAUGHT_UP, DIR_A, DIR_B), "any").input == rm.MoveInput(
        E.CANCEL_REQUESTED)
    # not moving: the current dir or "any" is nothing to do
    assert _decide(rm.Move(T0, S.DONE, DIR_C, None), DIR_A) == rm.RequestDecision(None, None)


def test_no_new_move_dir_while_any_dir_is_offline_but_a_cancel_goes_through() -> None:
    offline = frozenset({DIR_C})
    assert _decide(rm.Move(T0), DIR_B, offline=offline) == rm.RequestDecision(
        None, ErrorCode.KAFKA_STORAGE_ERROR)
    moving = rm.Move(T0, S.COPYING, DIR_A, DIR_B)
    assert _decide(moving, "any", offline=offline).input == rm.MoveInput(E.CANCEL_REQUESTED)
    assert _decide(moving, DIR_B, offline=offline) == rm.RequestDecision(None, None)
    assert _decide(moving, DIR_C, offline=offline).error is ErrorCode.KAFKA_STORAGE_ERROR


def test_a_replica_not_hosted_remembers_its_dir() -> None:
    decision = _decide(rm.Move(T0), DIR_B, current=None)
    assert decision == rm.RequestDecision(rm.MoveInput(E.PLACEMENT_RECORDED, DIR_B),
                                          ErrorCode.REPLICA_NOT_AVAILABLE)
    pending = rm.Move(T0, S.PENDING_PLACEMENT, None, DIR_B)
    assert _decide(pending, "any", current=None) == rm.RequestDecision(
        rm.MoveInput(E.CANCEL_REQUESTED), ErrorCode.REPLICA_NOT_AVAILABLE)
    assert _decide(rm.Move(T0), DIR_B, current=None, partition_offline=True).error is (
        ErrorCode.KAFKA_STORAGE_ERROR)
    assert _decide(rm.Move(T0), "/elsewhere").error is ErrorCode.LOG_DIR_NOT_FOUND


def test_the_answer_reports_a_dir_the_request_itself_failed() -> None:
    assert rm.request_answer(DIR_B, frozenset(), frozenset()) is ErrorCode.NONE
    assert rm.request_answer(DIR_B, frozenset(), frozenset({DIR_C})) is (
        ErrorCode.KAFKA_STORAGE_ERROR)
    assert rm.request_answer(DIR_B, frozenset({DIR_B}), frozenset({DIR_B})) is (
        ErrorCode.KAFKA_STORAGE_ERROR)
    assert rm.request_answer("any", frozenset({DIR_C}), frozenset({DIR_C})) is ErrorCode.NONE


def test_a_copy_is_caught_up_exactly_when_the_offsets_meet() -> None:
    assert rm.copy_completion(10, 10) == rm.MoveInput(E.CAUGHT_UP, source_leo=10, dest_leo=10)
    assert rm.copy_completion(10, 9) == rm.MoveInput(E.CHUNK_COPIED, source_leo=10, dest_leo=9)


def test_each_swap_effect_names_the_event_that_completes_it() -> None:
    move = rm.Move(T0, S.CAUGHT_UP, DIR_A, DIR_B, 5, 5)
    seen: list[str] = []
    event: rm.MoveInput | None = rm.MoveInput(E.LOCK_ACQUIRED)
    while event is not None:
        transition = rm.step(move, event)
        move, event = transition.move, None
        seen.append(transition.trace.event)
        for effect in transition.effects:
            done = rm.completion(effect, source_leo=5, dest_leo=5)
            if done is not None:
                assert event is None, "two completions in one transition"
                event = done
    assert seen == ["LOCK_ACQUIRED", "FINAL_CATCH_UP", "DEST_DURABLE", "SOURCE_RENAMED",
                    "DEST_RENAMED", "LOG_SWAPPED", "DELETE_COMPLETED"]
    assert move.state is S.DONE
    # an aborted swap releases the lock with nothing to report
    swapping = rm.Move(T0, S.SWAPPING, DIR_A, DIR_B, 5, 5, lock_held=True)
    failed = rm.step(swapping, rm.MoveInput(E.DIR_FAILED, DIR_B))
    assert [rm.completion(e) for e in failed.effects] == [None, None]


def test_the_mover_slots_honour_the_thread_count_and_a_slot_is_kept_until_done() -> None:
    async def main() -> None:
        clock = ManualClock()
        manager = LogManager.open(config(DIR_A, DIR_B), disk=SimDisk([DIR_A, DIR_B]),
                                  clock=clock)
        manager.set_mover_count(1)
        tps = [TopicPartition("t", p) for p in range(3)]
        for tp in tps:
            partition = manager.create(tp, is_new=True)
            for i in range(5):
                await partition.append_as_leader(batch(i), 1)
        def other_dir(tp: TopicPartition) -> str:
            partition = manager.get(tp)
            assert partition is not None
            return DIR_B if partition.log_dir == DIR_A else DIR_A

        # t-2 starts first: it keeps the one slot although t-0 and t-1 sort before it
        assert manager.alter_replica_log_dir(tps[2], other_dir(tps[2])) is ErrorCode.NONE
        assert manager.mover_slots() == [tps[2]]
        for tp in tps[:2]:
            assert manager.alter_replica_log_dir(tp, other_dir(tp)) is ErrorCode.NONE
        assert manager.mover_slots() == [tps[2]]
        steps = 0
        while manager.move_state(tps[2]).state is not MoveState.DONE:
            steps += 1
            assert steps < 100
            action = manager.mover_action(tps[2], clock.monotonic_ns())
            if isinstance(action, MoverCopy):
                manager.copy_step_nowait(tps[2], 400)
            else:
                assert isinstance(action, MoverSwap)
                moving = manager.get(tps[2])
                assert moving is not None
                await moving.lock.acquire()
                manager.swap_locked_nowait(tps[2])
        assert manager.mover_action(tps[2], clock.monotonic_ns()) is None
        assert manager.mover_slots() == [tps[0]], "the freed slot goes to the first in line"
        manager.set_mover_count(2)
        assert manager.mover_slots() == [tps[0], tps[1]]

    run(main)


def test_a_mover_waits_while_the_shared_throttle_admits_nothing() -> None:
    async def main() -> None:
        clock = ManualClock()
        manager = LogManager.open(config(DIR_A, DIR_B), disk=SimDisk([DIR_A, DIR_B]),
                                  clock=clock)
        partition = manager.create(T0, is_new=True)
        for i in range(20):
            await partition.append_as_leader(batch(i), 1)
        manager.set_throttle_rate(1000)
        manager.alter_replica_log_dir(T0, DIR_B)
        assert isinstance(manager.mover_action(T0, clock.monotonic_ns()), MoverCopy)
        manager.copy_step_nowait(T0, 400)
        action = manager.mover_action(T0, clock.monotonic_ns())
        assert isinstance(action, MoverWait)
        assert action.wait_ns > 0
        clock.now_ns += action.wait_ns
        assert isinstance(manager.mover_action(T0, clock.monotonic_ns()), MoverCopy)

    run(main)


def test_the_log_manager_imports_no_event_loop() -> None:
    source = (Path(__file__).resolve().parents[3] / "impl/storage/manager.py").read_text()
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            imported.add(node.module.split(".")[0])
    assert not imported & {"trio", "asyncio", "anyio"}, imported


def test_a_nowait_append_takes_the_lock_and_finding_it_held_is_a_bug() -> None:
    manager = LogManager.open(config(DIR_A, DIR_B), disk=SimDisk([DIR_A, DIR_B]),
                              clock=ManualClock())
    partition = manager.create(T0, is_new=True)
    assert partition.append_as_leader_nowait(batch(0), 1).base_offset == 0
    end = partition.log_end_offset
    assert end > 0
    assert not partition.lock.locked()
    partition.lock.acquire_nowait()  # a swap in progress
    try:
        partition.append_as_leader_nowait(batch(1), 1)
    except AssertionError:
        pass
    else:
        raise AssertionError("an append went through a held partition lock")
    partition.lock.release()
    assert partition.log_end_offset == end, "nothing appended under the held lock"
    assert partition.append_as_follower_nowait(b"").base_offset == end
