"""spec/, model/ and impl/ use one vocabulary (DESIGN.md, "one vocabulary, one code path").

For every machine: the implementation's enums are the ones ``spec/VOCABULARY.md`` names, with
every member listed there; the model's enums of the same name have exactly the same members; every
model action is the lower-case name of an implementation event, or one of the model-only actions
the vocabulary declares; and the machine's spec mentions every state and event by name (an event
may appear as its model action, in lower case).
"""

from __future__ import annotations

import enum
import importlib
import re
from pathlib import Path

import pytest

from model.registry import discover

ROOT = Path(__file__).resolve().parents[2]
VOCABULARY = (ROOT / "spec" / "VOCABULARY.md").read_text()

#: enum name -> (implementation module, model module or None, spec file)
ENUMS: dict[str, tuple[str, str | None, str]] = {
    "MoveState": ("impl.storage.replica_move", "model.replica_move", "replica_move.md"),
    "MoveEvent": ("impl.storage.replica_move", None, "replica_move.md"),
    "RecoveryRule": ("impl.storage.move_recovery", "model.move_recovery", "replica_move.md"),
    "LogDirState": ("impl.storage.log_dir_failure", "model.log_dir_failure", "log_dir_failure.md"),
    "LogDirEvent": ("impl.storage.log_dir_failure", None, "log_dir_failure.md"),
    "ReplicaStorageState": (
        "impl.storage.log_dir_failure",
        "model.log_dir_failure",
        "log_dir_failure.md",
    ),
    "ReplicaRole": ("impl.broker.replication", "model.replication", "replication.md"),
    "ReplicationEvent": ("impl.broker.replication", "model.replication", "replication.md"),
    "TruncationPolicy": ("impl.broker.replication", "model.replication", "replication.md"),
    "ControllerEvent": ("impl.controller.controller", "model.controller", "controller.md"),
    "PartitionState": ("impl.controller.controller", "model.controller", "controller.md"),
    "ReplicaState": ("impl.controller.controller", "model.controller", "controller.md"),
    "ReassignmentPhase": ("impl.controller.reassignment", "model.reassignment", "reassignment.md"),
    "ReassignmentEvent": ("impl.controller.reassignment", "model.reassignment", "reassignment.md"),
    "PlacementState": ("impl.controller.placement._multi_level", None, "placement.md"),
    "PlacementEvent": ("impl.controller.placement._multi_level", "model.placement", "placement.md"),
    "AclEvent": ("impl.security.authorizer", "model.authorizer", "authorizer.md"),
    "GroupState": ("impl.broker.group_coordinator", "model.group_coordinator",
                   "group_coordinator.md"),
    "CoordinatorState": ("impl.broker.group_coordinator", "model.group_coordinator",
                         "group_coordinator.md"),
    "GroupEvent": ("impl.broker.group_coordinator", None, "group_coordinator.md"),
    "CleanerState": ("impl.storage.log_cleaner", "model.log_cleaner", "log_cleaner.md"),
    "CleanerEvent": ("impl.storage.log_cleaner", None, "log_cleaner.md"),
}
EVENT_ENUMS = (
    "MoveEvent",
    "LogDirEvent",
    "ReplicationEvent",
    "ControllerEvent",
    "ReassignmentEvent",
    "PlacementEvent",
    "AclEvent",
    "GroupEvent",
    "CleanerEvent",
)


def _enum(module: str, name: str) -> type[enum.Enum]:
    found = getattr(importlib.import_module(module), name)
    assert isinstance(found, type)
    assert issubclass(found, enum.Enum)
    return found


def _members(module: str, name: str) -> list[str]:
    return [member.name for member in _enum(module, name)]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def _model_only_actions() -> set[str]:
    match = re.search(r"Model-only actions: ([^.]*)\.", " ".join(VOCABULARY.split()))
    assert match is not None, "spec/VOCABULARY.md declares no model-only actions"
    return set(re.findall(r"`([a-z_]+)`", match.group(1)))


@pytest.mark.parametrize("name", sorted(ENUMS))
def test_implementation_enum_is_in_the_vocabulary(name: str) -> None:
    module, _, _ = ENUMS[name]
    assert f"`{name}`" in VOCABULARY
    missing = [member for member in _members(module, name) if member not in _words(VOCABULARY)]
    assert missing == [], f"{module}.{name} members missing from spec/VOCABULARY.md"


@pytest.mark.parametrize("name", sorted(name for name, paths in ENUMS.items() if paths[1]))
def test_model_and_implementation_enums_agree(name: str) -> None:
    impl_module, model_module, _ = ENUMS[name]
    assert model_module is not None
    assert sorted(_members(model_module, name)) == sorted(_members(impl_module, name))


@pytest.mark.parametrize("name", sorted(ENUMS))
def test_spec_names_every_member(name: str) -> None:
    module, _, spec = ENUMS[name]
    text = _words((ROOT / "spec" / spec).read_text())
    # An event may be named as its model action (lower case), the vocabulary's own rule.
    missing = [
        member
        for member in _members(module, name)
        if member not in text and member.lower() not in text
    ]
    assert missing == [], f"spec/{spec} does not name {missing}"


def test_every_model_action_is_an_implementation_event() -> None:
    events = {
        member.lower()
        for name in EVENT_ENUMS
        for member in _members(ENUMS[name][0], name)
    }
    allowed = events | _model_only_actions()
    strays: dict[str, list[str]] = {}
    for definition in discover():
        actions = sorted(definition.model().actions)
        assert actions, f"model {definition.name} has no actions"
        unknown = [action for action in actions if action not in allowed]
        if unknown:
            strays[definition.name] = unknown
    assert strays == {}


def test_word_matching_is_exact() -> None:
    words = _words("`MoveState`: NONE, COPYING_DONE (a note) `caught_up`")
    assert "COPYING_DONE" in words
    assert "COPYING" not in words
    assert "caught_up" in words
    assert "CAUGHT_UP" not in words
