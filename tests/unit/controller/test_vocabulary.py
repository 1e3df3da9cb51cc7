"""The controller's and the reassignment's names are the shared vocabulary's, exactly."""

from __future__ import annotations

import enum
import importlib
import re
from pathlib import Path

import pytest

from impl.controller.controller import ControllerEvent, PartitionState, ReplicaState
from impl.controller.reassignment import ReassignmentPhase

VOCABULARY = Path(__file__).resolve().parents[3] / "spec" / "VOCABULARY.md"


def _listed(name: str) -> set[str]:
    text = re.sub(r"\([^)]*\)", "", " ".join(VOCABULARY.read_text().split()))
    match = re.search(rf"`{name}`: ([A-Z_, ]+[A-Z_])", text)
    assert match is not None, f"{name} not in the vocabulary"
    return {item.strip() for item in match.group(1).split(",") if item.strip()}


@pytest.mark.parametrize(
    ("name", "members"),
    [
        ("ControllerEvent", ControllerEvent),
        ("PartitionState", PartitionState),
        ("ReplicaState", ReplicaState),
        ("ReassignmentPhase", ReassignmentPhase),
    ],
)
def test_enum_members_are_the_vocabulary(name: str, members: type[enum.Enum]) -> None:
    assert {member.name for member in members} == _listed(name)


@pytest.mark.parametrize(
    ("module", "name", "members"),
    [
        ("model.controller", "ControllerEvent", ControllerEvent),
        ("model.controller", "PartitionState", PartitionState),
        ("model.controller", "ReplicaState", ReplicaState),
        ("model.reassignment", "ReassignmentPhase", ReassignmentPhase),
    ],
)
def test_model_and_impl_use_the_same_names(module: str, name: str,
                                           members: type[enum.Enum]) -> None:
    model_enum = getattr(importlib.import_module(module), name)
    assert [m.name for m in model_enum] == [m.name for m in members]
