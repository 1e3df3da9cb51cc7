"""Startup decisions compared with the model's classification (KIP-113 §3)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance import SimConfig, simulate
from conformance.move_abstraction import move_abstractions
from conformance.recovery_check import StartupView, compare, model_decision
from impl.storage.move_recovery import PartitionDirs, classify
from impl.storage.names import TopicPartition

pytest.importorskip("model.move_recovery")

DIRS = ("/a", "/b", "/c")
TP = TopicPartition("t", 0)


def _view(bad: tuple[str, ...] = (), **kinds: str) -> StartupView:
    return StartupView(
        {f"/{name}": frozenset(kind.split("+")) for name, kind in kinds.items()}, frozenset(bad)
    )


def _implementation(view: StartupView) -> dict[str, object]:
    good = [d for d in DIRS if d not in view.bad_dirs]

    def where(kind: str) -> frozenset[str]:
        return frozenset(d for d in good if kind in view.kinds.get(d, frozenset()))

    decision = classify(PartitionDirs(TP, where("LIVE"), where("MOVE"), where("DELETE")),
                        bool(view.bad_dirs))
    return {
        "rule": decision.rules[0].name,
        "online": not decision.offline and decision.live_dir is not None,
        "live_dir": None if decision.offline else decision.live_dir,
        "resume_dir": decision.resume_dest_dir,
        "promote_dir": decision.promote_dir,
        "delete_dirs": tuple(decision.delete_dirs),
    }


@pytest.mark.parametrize(
    ("view", "rule"),
    [
        (_view(a="LIVE"), "LIVE"),
        (_view(a="LIVE", b="MOVE"), "RESUME_MOVE"),
        (_view(b="MOVE", a="DELETE"), "PROMOTE_MOVE"),
        (_view(("/c",), b="MOVE", a="DELETE"), "OFFLINE_UNTOUCHED"),
        (_view(("/c",), a="DELETE"), "DELETE_DEFERRED"),
        (_view(a="LIVE", b="LIVE"), "OFFLINE_AMBIGUOUS"),
        (_view(a="DELETE"), "DELETE_SCHEDULED"),
    ],
)
def test_model_and_implementation_classify_alike(view: StartupView, rule: str) -> None:
    expected = model_decision(view, DIRS)
    assert expected is not None
    assert expected["rule"] == rule
    assert compare(_implementation(view), expected) is None


def test_differences_are_named_and_two_kinds_in_a_dir_are_outside_the_model() -> None:
    expected = model_decision(_view(a="LIVE", b="MOVE"), DIRS)
    assert expected is not None
    wrong = {**expected, "resume_dir": None}
    assert compare(wrong, expected) == "resume_dir: implementation None, model '/b'"
    assert model_decision(_view(a="LIVE", b="MOVE+DELETE"), DIRS) is None


def test_simulated_restarts_check_their_decisions() -> None:
    checked = restarts = 0
    for seed in range(8):
        outcome = simulate(seed, SimConfig(steps=150), abstractions=move_abstractions)
        assert outcome.violation is None, outcome.violation
        checked += outcome.recoveries_checked
        restarts += outcome.restarts
    assert restarts > 0
    assert checked >= restarts


def test_two_dir_brokers_are_padded_and_five_dir_brokers_unchecked() -> None:
    two = model_decision(_view(b="MOVE"), ("/a", "/b"))
    assert two is not None
    assert (two["rule"], two["live_dir"], two["promote_dir"]) == ("PROMOTE_MOVE", "/b", "/b")
    assert model_decision(_view(a="LIVE"), ("/a", "/b", "/c", "/d", "/e")) is None


_KINDS = ("ABSENT", "LIVE", "MOVE", "DELETE")


@settings(derandomize=True, max_examples=300, deadline=None)
@given(
    kinds=st.tuples(*[st.sampled_from(_KINDS)] * 3),
    bad=st.sets(st.sampled_from(DIRS), max_size=2),
)
def test_every_layout_is_classified_as_the_model_does(
    kinds: tuple[str, str, str], bad: set[str]
) -> None:
    view = StartupView(
        {d: frozenset({kind}) for d, kind in zip(DIRS, kinds, strict=True) if kind != "ABSENT"},
        frozenset(bad),
    )
    expected = model_decision(view, DIRS)
    assert expected is not None
    assert compare(_implementation(view), expected) is None, (kinds, sorted(bad))
