"""The replica-move core and its model in lockstep (Hypothesis ``RuleBasedStateMachine``).

Each rule is one event: the core (:func:`impl.storage.replica_move.step`) and the model
(``model.replica_move``, shipped variant, run concretely) take it together. Where the model
allows an action the core must accept the event; where the core's guards refuse (offsets not
equal, destination not durable, source not renamed), the model must refuse too; after every step
the machine states and the swap flags agree and every model invariant holds. Dirs are a bundle;
offsets are the model's record counts.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from impl.storage import replica_move as rm
from impl.storage.names import TopicPartition

model_module = pytest.importorskip("model.replica_move")

TP = TopicPartition("t", 0)
MODEL = model_module.MODELS[0].model()
_MOVING = ("COPYING", "CAUGHT_UP", "SWAPPING")


def _dir(index: int) -> str:
    return f"/data/d{index}"


class MoveMachine(RuleBasedStateMachine):
    """The core's move and the model's state, stepped together."""

    dirs = Bundle("dirs")
    def __init__(self) -> None:
        super().__init__()
        self.state: Any = MODEL.initial_states()[0]
        self.move = rm.Move(TP, source_dir=_dir(0))

    @initialize(target=dirs)
    def add_dirs(self) -> Any:
        return multiple(*model_module.DIRS)

    # --- helpers ---------------------------------------------------------------------------

    def _enabled(self, action: str, **params: Any) -> bool:
        return bool(MODEL.enabled(self.state, action, params))

    def _model_step(self, action: str, **params: Any) -> None:
        self.state = MODEL.step(self.state, action, params)

    def core_step(self, move: rm.Move, event: rm.MoveInput) -> rm.Transition:
        """The core under test (a subclass may substitute a broken one)."""
        return rm.step(move, event)

    def _core(self, event: rm.MoveEvent, **data: Any) -> bool:
        """Step the core; ``False`` when it refuses (the move is then unchanged)."""
        try:
            self.move = self.core_step(self.move, rm.MoveInput(event, **data)).move
        except rm.InvalidMoveTransition:
            return False
        return True

    def _leos(self) -> tuple[int, int]:
        state = self.state
        return state.log_end[state.source_dir], state.log_end[state.dest_dir]

    def _running(self) -> bool:
        return bool(self.state.running)

    def _swapping_before(self, flag: str) -> bool:
        """In the swap (a repeated step too: the core must refuse it as the model does)."""
        del flag
        return self._healthy() and self.move.state.name == "SWAPPING"

    def _healthy(self) -> bool:
        """Running, serving, every dir readable: the core's own guards are then the model's.

        (The core does not know dir health: the log manager turns I/O errors into DIR_FAILED.)
        """
        state = self.state
        return bool(state.running and state.partition_online) and all(
            state.dir_online[d] for d in model_module.DIRS
        )

    # --- the move ----------------------------------------------------------------------------

    @precondition(lambda self: self._running() and self._enabled("source_appended"))
    @rule()
    def source_appended(self) -> None:
        self._model_step("source_appended")
        source_leo, _ = self._leos()
        if self.move.state.name in ("COPYING", "CAUGHT_UP"):
            assert self._core(rm.MoveEvent.SOURCE_APPENDED, source_leo=source_leo)

    @precondition(lambda self: self._running() and self._enabled("source_truncated"))
    @rule()
    def source_truncated(self) -> None:
        self._model_step("source_truncated")
        source_leo, dest_leo = self._leos()
        if self.move.state.name in ("COPYING", "CAUGHT_UP"):
            assert self._core(
                rm.MoveEvent.SOURCE_TRUNCATED, source_leo=source_leo, dest_leo=dest_leo
            )

    @precondition(lambda self: self._running())
    @rule(d=dirs)
    def requested(self, d: int) -> None:
        if not self._enabled("requested", d=d):
            return
        self._model_step("requested", d=d)
        source_leo, _ = self._leos()
        assert self._core(rm.MoveEvent.REQUESTED, log_dir=_dir(d), source_leo=source_leo), (
            "the model allows the request, the core refused it"
        )

    @precondition(lambda self: self._running() and self._enabled("chunk_copied"))
    @rule()
    def chunk_copied(self) -> None:
        self._model_step("chunk_copied")
        source_leo, dest_leo = self._leos()
        assert self._core(rm.MoveEvent.CHUNK_COPIED, source_leo=source_leo, dest_leo=dest_leo)

    @precondition(lambda self: self._healthy() and self.move.state.name == "COPYING")
    @rule()
    def caught_up(self) -> None:
        source_leo, dest_leo = self._leos()
        model_allows = self._enabled("caught_up")
        core_accepts = self._core(
            rm.MoveEvent.CAUGHT_UP, source_leo=source_leo, dest_leo=dest_leo
        )
        assert core_accepts == model_allows, (source_leo, dest_leo)
        if model_allows:
            self._model_step("caught_up")

    @precondition(lambda self: self._running() and self._enabled("lock_acquired"))
    @rule()
    def lock_acquired(self) -> None:
        self._model_step("lock_acquired")
        assert self._core(rm.MoveEvent.LOCK_ACQUIRED)

    @precondition(lambda self: self._healthy() and self.move.state.name == "SWAPPING")
    @rule()
    def final_catch_up(self) -> None:
        if self.move.dest_durable or self.move.source_renamed:
            return
        if self._enabled("final_catch_up"):
            self._model_step("final_catch_up")
        source_leo, dest_leo = self._leos()
        assert source_leo == dest_leo, "after the final catch-up the copy equals the source"
        assert self._core(rm.MoveEvent.FINAL_CATCH_UP, source_leo=source_leo, dest_leo=dest_leo)

    @precondition(lambda self: self._swapping_before("dest_durable"))
    @rule()
    def dest_durable(self) -> None:
        model_allows = self._enabled("dest_durable")
        source_leo, dest_leo = self._leos()
        core_accepts = self._core(rm.MoveEvent.DEST_DURABLE)
        # (a repeated step finds the flag set by the earlier one: only accepting the event
        # again, where the model refuses it, is the core's error)
        if core_accepts and not model_allows:
            raise AssertionError("the core made tp.move durable where the model forbids it")
        if model_allows:
            assert core_accepts or source_leo != dest_leo
            self._model_step("dest_durable")

    @precondition(lambda self: self._swapping_before("source_renamed"))
    @rule()
    def source_renamed(self) -> None:
        model_allows = self._enabled("source_renamed")
        core_accepts = self._core(rm.MoveEvent.SOURCE_RENAMED)
        assert core_accepts == model_allows, "source rename guard (destination durable first)"
        if model_allows:
            self._model_step("source_renamed")

    @precondition(lambda self: self._swapping_before("dest_renamed"))
    @rule()
    def dest_renamed(self) -> None:
        model_allows = self._enabled("dest_renamed")
        core_accepts = self._core(rm.MoveEvent.DEST_RENAMED)
        assert core_accepts == model_allows, "dest rename guard (source renamed first)"
        if model_allows:
            self._model_step("dest_renamed")

    @precondition(lambda self: self._healthy() and self.move.state.name == "SWAPPING")
    @rule()
    def log_swapped(self) -> None:
        model_allows = self._enabled("log_swapped")
        core_accepts = self._core(rm.MoveEvent.LOG_SWAPPED)
        assert core_accepts == model_allows, "swap guard (destination renamed first)"
        if model_allows:
            self._model_step("log_swapped")

    @precondition(lambda self: self._healthy() and self.move.state.name in _MOVING)
    @rule(count=st.integers(min_value=1, max_value=8))
    def mover_runs(self, count: int) -> None:
        """The mover's next ``count`` steps in the core's order (a crash or a cancel may
        follow): copy, see caught up, take the lock, then the swap step by step."""
        for _ in range(count):
            state = self.move.state.name
            if state == "COPYING":
                if self._enabled("chunk_copied"):
                    self.chunk_copied()
                else:
                    self.caught_up()
            elif state == "CAUGHT_UP":
                self.lock_acquired()
            elif state == "SWAPPING":
                order = (self.final_catch_up, self.dest_durable, self.source_renamed,
                         self.dest_renamed, self.log_swapped)
                if not self.move.dest_durable:
                    self.final_catch_up()
                    self.dest_durable()
                else:
                    done = sum((self.move.source_renamed, self.move.dest_renamed))
                    order[2 + done]()
            else:
                break

    @precondition(lambda self: self._running() and self._enabled("cancel_requested"))
    @rule()
    def cancel_requested(self) -> None:
        self._model_step("cancel_requested")
        assert self._core(rm.MoveEvent.CANCEL_REQUESTED)

    @precondition(lambda self: self._running())
    @rule(d=dirs)
    def redirected(self, d: int) -> None:
        if not self._enabled("redirected", d=d):
            return
        self._model_step("redirected", d=d)
        assert self._core(rm.MoveEvent.REDIRECTED, log_dir=_dir(d), dest_leo=0)

    @precondition(lambda self: self._running())
    @rule(d=dirs, role=st.sampled_from(("source", "destination", "given")),
          roll=st.integers(min_value=0, max_value=7))
    def dir_failed(self, d: int, role: str, roll: int) -> None:
        if role == "source":
            d = self.state.source_dir
        elif role == "destination":
            d = self.state.dest_dir
        if roll != 0 or not self._enabled("dir_failed", d=d):
            return
        moving = self.move.state.name in _MOVING
        involved = _dir(d) in (self.move.source_dir, self.move.dest_dir)
        self._model_step("dir_failed", d=d)
        if moving and involved:
            assert self._core(rm.MoveEvent.DIR_FAILED, log_dir=_dir(d))

    @precondition(lambda self: self._running())
    @rule(renames_kept=st.booleans(), roll=st.integers(min_value=0, max_value=7))
    def crashed_and_recovered(self, renames_kept: bool, roll: int) -> None:
        if roll != 0:
            return  # crashes are one draw in eight: a machine that always crashed never swaps
        self._model_step("crashed", renames_kept=renames_kept)
        assert self._core(rm.MoveEvent.CRASHED)
        self._model_step("recovered")
        state = self.state
        self.move = rm.Move(TP, source_dir=_dir(state.source_dir))
        if state.move_state.name == "COPYING":
            source_leo, _ = self._leos()
            assert self._core(
                rm.MoveEvent.REQUESTED, log_dir=_dir(state.dest_dir), source_leo=source_leo
            )

    # --- invariants -------------------------------------------------------------------------

    @invariant()
    def model_invariants_hold(self) -> None:
        assert MODEL.check_invariants(self.state) == []

    @invariant()
    def core_and_model_agree(self) -> None:
        state = self.state
        if not state.running:
            return
        model_state = state.move_state.name
        if model_state == "FAILED" and self.move.state.name not in _MOVING:
            return  # a failed dir the core's move never involved
        assert self.move.state.name == model_state
        if model_state in _MOVING:
            assert self.move.source_dir == _dir(state.source_dir)
            assert self.move.dest_dir == _dir(state.dest_dir)
            assert self.move.dest_durable == state.dest_durable
            assert self.move.source_renamed == state.source_renamed
            assert self.move.dest_renamed == state.dest_renamed


SETTINGS = settings(
    derandomize=True,
    max_examples=40,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
MoveMachine.TestCase.settings = SETTINGS
TestMoveMachine = MoveMachine.TestCase


def _started() -> MoveMachine:
    machine = MoveMachine()
    machine.add_dirs()
    machine.source_appended()
    machine.requested(1)
    return machine


def test_scripted_runs_reach_done_failed_and_recovery() -> None:
    done = _started()
    done.mover_runs(8)
    done.mover_runs(8)
    done.core_and_model_agree()
    assert done.move.state is rm.MoveState.DONE
    assert done.move.source_dir == _dir(1)
    failed = _started()
    failed.mover_runs(4)
    assert failed.move.state.name == "SWAPPING"
    failed.dir_failed(1, "destination", 0)
    failed.core_and_model_agree()
    assert failed.move.state.name == "FAILED"
    crashed = _started()
    crashed.mover_runs(5)
    assert crashed.move.source_renamed
    crashed.crashed_and_recovered(renames_kept=True, roll=0)
    crashed.core_and_model_agree()
    crashed.model_invariants_hold()
    assert crashed.state.recovery_rule.name == "PROMOTE_MOVE"
    assert crashed.move.source_dir == _dir(1)


@pytest.mark.parametrize("repeated", [rm.MoveEvent.DEST_DURABLE, rm.MoveEvent.SOURCE_RENAMED,
                                      rm.MoveEvent.DEST_RENAMED])
def test_core_refuses_a_repeated_swap_step(repeated: rm.MoveEvent) -> None:
    """Found by this machine: the core used to accept a swap step twice (re-emitting its
    effect) where the model refuses it."""
    machine = _started()
    order = (rm.MoveEvent.DEST_DURABLE, rm.MoveEvent.SOURCE_RENAMED, rm.MoveEvent.DEST_RENAMED)
    machine.mover_runs(4 + order.index(repeated))
    assert getattr(machine.move, repeated.name.lower())
    assert not machine._enabled(repeated.name.lower())
    with pytest.raises(rm.InvalidMoveTransition):
        rm.step(machine.move, rm.MoveInput(repeated))


class RenameBeforeDurableCore(MoveMachine):
    """A broken core: renames the source before ``tp.move`` is durable (Apache Kafka's order)."""

    def core_step(self, move: rm.Move, event: rm.MoveInput) -> rm.Transition:
        if event.event is rm.MoveEvent.SOURCE_RENAMED and not move.dest_durable:
            return rm.step(move.__class__(**{**_fields(move), "dest_durable": True}), event)
        return rm.step(move, event)


def _fields(move: rm.Move) -> dict[str, Any]:
    return {name: getattr(move, name) for name in move.__slots__}


def test_the_machine_catches_a_core_that_renames_before_durable() -> None:
    machine = RenameBeforeDurableCore()
    machine.add_dirs()
    machine.source_appended()
    machine.requested(1)
    machine.mover_runs(3)
    assert machine.move.state.name == "SWAPPING"
    with pytest.raises(AssertionError, match="destination durable first"):
        machine.source_renamed()


def test_a_repeated_dest_durable_is_refused_without_an_alarm() -> None:
    """Hypothesis's case from CI: the mover's swap made tp.move durable, then the rule stepped
    DEST_DURABLE again; the core refuses it as the model does, and that is no error."""
    machine = MoveMachine()
    machine.add_dirs()
    machine.requested(d=2)
    machine.mover_runs(count=3)
    assert machine.move.dest_durable
    machine.dest_durable()
    machine.core_and_model_agree()
