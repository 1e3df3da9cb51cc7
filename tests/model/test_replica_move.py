"""The replica-move model read concretely: the swap in order, crash recovery, the two rule sets,
and the model's project rules against the implementation's classification."""

from __future__ import annotations

import itertools

import pytest

from impl.storage import move_recovery as impl_recovery
from impl.storage.names import TopicPartition
from model import ActionNotEnabled, ArrayValue, ConcreteOps, State
from model.move_recovery import KIP113_RULES, PROJECT_RULES, DirKind, RecoveryRule, classify
from model.registry import find
from model.replica_move import DIRS, MoveState


def _run(variant: str, steps: list[tuple[str, dict[str, object]]]) -> State:
    model = find("replica_move").model(variant)
    state = model.initial_states()[0]
    for action, params in steps:
        state = model.step(state, action, params)
        assert model.check_invariants(state) == [] or variant != "shipped", action
    return state


def test_shipped_move_runs_in_order_and_keeps_every_record() -> None:
    steps: list[tuple[str, dict[str, object]]] = [
        ("source_appended", {}), ("requested", {"d": 2}), ("chunk_copied", {}),
        ("caught_up", {}), ("lock_acquired", {}), ("dest_durable", {}), ("source_renamed", {}),
        ("dest_renamed", {}), ("log_swapped", {}), ("delete_completed", {"d": 0})]
    state = _run("shipped", steps)
    assert state.move_state is MoveState.DONE
    assert state.source_dir == 2
    assert state.entry[2] is DirKind.LIVE
    assert state.entry[0] is DirKind.ABSENT
    assert state.log_end[2] == state.acked_end == 1


def test_shipped_guards_refuse_out_of_order_steps() -> None:
    model = find("replica_move").model()
    state = model.step(model.initial_states()[0], "requested", {"d": 1})
    state = model.step(state, "caught_up")
    state = model.step(state, "lock_acquired")
    assert not model.enabled(state, "source_renamed")
    with pytest.raises(ActionNotEnabled):
        model.step(state, "source_appended")


def test_truncation_while_copying_cuts_the_move_and_the_move_completes() -> None:
    # The shape the cluster simulator found (seed 25): the copy is behind, a follower
    # truncation cuts the source to the copy's length, the mover sees them equal.
    steps: list[tuple[str, dict[str, object]]] = [
        ("source_appended", {}), ("source_appended", {}), ("requested", {"d": 1}),
        ("chunk_copied", {}), ("source_truncated", {}), ("caught_up", {}),
        ("lock_acquired", {}), ("dest_durable", {}), ("source_renamed", {}),
        ("dest_renamed", {}), ("log_swapped", {})]
    state = _run("shipped", steps)
    assert state.move_state is MoveState.DONE
    assert state.log_end[1] == state.log_durable_end[1] == state.acked_end == 1


def test_truncation_cuts_a_longer_move_and_waits_for_the_lock() -> None:
    model = find("replica_move").model()
    steps: list[tuple[str, dict[str, object]]] = [
        ("source_appended", {}), ("requested", {"d": 1}), ("chunk_copied", {}),
        ("caught_up", {}), ("source_truncated", {})]
    state = _run("shipped", steps)
    assert state.move_state is MoveState.CAUGHT_UP
    assert state.log_end[0] == state.log_end[1] == state.acked_end == 0
    assert not model.enabled(state, "source_truncated")  # nothing left to cut
    state = model.step(model.step(state, "source_appended"), "lock_acquired")
    assert not model.enabled(state, "source_truncated")  # the swap holds the lock


def test_crash_after_source_rename_promotes_the_durable_move() -> None:
    steps: list[tuple[str, dict[str, object]]] = [
        ("source_appended", {}), ("requested", {"d": 1}), ("chunk_copied", {}),
        ("caught_up", {}), ("lock_acquired", {}), ("dest_durable", {}),
        ("source_renamed", {}), ("crashed", {"renames_kept": False}), ("recovered", {})]
    state = _run("shipped", steps)
    assert state.recovery_rule is RecoveryRule.PROMOTE_MOVE
    assert state.partition_online
    assert state.source_dir == 1
    assert state.log_end[1] == state.acked_end == 1


def _layout(entries: tuple[DirKind, ...], bad: tuple[bool, ...]) -> State:
    ops = ConcreteOps()
    return State({
        "entry": ArrayValue(dict(zip(DIRS, entries, strict=True)), ops),
        "dir_online": ArrayValue({d: not flag for d, flag in zip(DIRS, bad, strict=True)}, ops),
        "mount_missing": ArrayValue(dict.fromkeys(DIRS, False), ops),
    })


LAYOUTS = [
    (entries, bad)
    for entries in itertools.product(list(DirKind), repeat=len(DIRS))
    for bad in itertools.product((False, True), repeat=len(DIRS))
]


@pytest.mark.parametrize(("entries", "bad"), LAYOUTS)
def test_project_rules_agree_with_the_implementation(
    entries: tuple[DirKind, ...], bad: tuple[bool, ...]
) -> None:
    """Given the same good/bad dirs, the model's shipped rules decide as ``classify`` does."""
    ops = ConcreteOps()
    decision = classify(ops, _layout(entries, bad), DIRS, PROJECT_RULES)
    names = {d: f"/d{d}" for d in DIRS}

    def on_good(kind: DirKind) -> frozenset[str]:
        return frozenset(names[d] for d in DIRS if entries[d] is kind and not bad[d])

    tp = TopicPartition("t", 0)
    impl = impl_recovery.classify(
        impl_recovery.PartitionDirs(tp, on_good(DirKind.LIVE), on_good(DirKind.MOVE),
                                    on_good(DirKind.DELETE)),
        any(bad),
    )
    assert decision.rule.name == impl.rules[0].name
    assert decision.online == (not impl.offline and impl.live_dir is not None)
    if decision.online:
        assert names[decision.live_dir] == impl.live_dir
    if decision.resume:
        assert names[decision.resume_dir] == impl.resume_dest_dir
    assert {names[d] for d in DIRS if decision.promote[d]} == (
        {impl.promote_dir} if impl.promote_dir else set())
    assert {names[d] for d in DIRS if decision.abandon[d]} == set(impl.delete_move_dirs)
    assert {names[d] for d in DIRS if decision.schedule_delete[d]} == set(impl.delete_dirs)


def test_kip113_rules_promote_every_lone_move_and_delete_every_delete() -> None:
    ops = ConcreteOps()
    layout = _layout((DirKind.DELETE, DirKind.MOVE, DirKind.MOVE), (False, False, False))
    kip = classify(ops, layout, DIRS, KIP113_RULES)
    assert kip.rule is RecoveryRule.PROMOTE_MOVE
    assert [d for d in DIRS if kip.promote[d]] == [1, 2]
    assert kip.schedule_delete[0]
    project = classify(ops, layout, DIRS, PROJECT_RULES)
    assert project.rule is RecoveryRule.OFFLINE_AMBIGUOUS
    assert not project.online
    with pytest.raises(ValueError, match="unknown recovery rules"):
        classify(ops, layout, DIRS, "nope")


def test_missing_mount_is_a_bad_dir_under_the_project_rules() -> None:
    ops = ConcreteOps()
    layout = State({
        "entry": ArrayValue({0: DirKind.LIVE, 1: DirKind.MOVE, 2: DirKind.ABSENT}, ops),
        "dir_online": ArrayValue(dict.fromkeys(DIRS, True), ops),
        "mount_missing": ArrayValue({0: True, 1: False, 2: False}, ops),
    })
    assert classify(ops, layout, DIRS, PROJECT_RULES).rule is RecoveryRule.OFFLINE_UNTOUCHED
    assert classify(ops, layout, DIRS, KIP113_RULES).rule is RecoveryRule.PROMOTE_MOVE
