"""The transition tables printed in the specs are the implementation's tables, exactly.

STYLE.md item 1: diagrams, tests and the model read the same table. ``spec/controller.md`` prints
the controller's partition and replica machines as Markdown tables (``| from | events | to |``);
this test parses them and compares them with ``PARTITION_TRANSITIONS`` and
``REPLICA_TRANSITIONS`` in both directions, so neither can change without the other.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from impl.controller.controller import (
    PARTITION_TRANSITIONS,
    REPLICA_TRANSITIONS,
    ControllerEvent,
    PartitionState,
    ReplicaState,
)

SPEC = Path(__file__).resolve().parents[2] / "spec" / "controller.md"


def parse_table(text: str, title: str) -> set[tuple[str, str, str]]:
    """The (from, event, to) triples of the table that follows the line ``title``."""
    lines = text.splitlines()
    start = lines.index(title)
    triples: set[tuple[str, str, str]] = set()
    for line in lines[start + 1 :]:
        if not line.strip():
            if triples:
                break
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in {"from", "---"}:
            continue
        for event in re.findall(r"`([a-z_]+)`", cells[1]):
            triples.add((cells[0], event.upper(), cells[2]))
    return triples


Table = Mapping[tuple[PartitionState, ControllerEvent], PartitionState] | Mapping[
    tuple[ReplicaState, ControllerEvent], ReplicaState
]


def as_triples(table: Table) -> set[tuple[str, str, str]]:
    """The (from, event, to) triples of an implementation table, by name."""
    return {(state.name, event.name, after.name) for (state, event), after in table.items()}


@pytest.mark.parametrize(
    ("title", "table", "states"),
    [
        ("Partition transitions:", PARTITION_TRANSITIONS, PartitionState),
        ("Replica transitions:", REPLICA_TRANSITIONS, ReplicaState),
    ],
)
def test_spec_table_is_the_implementation_table(
    title: str,
    table: Table,
    states: type[enum.Enum],
) -> None:
    printed = parse_table(SPEC.read_text(), title)
    assert printed == as_triples(table)
    assert {before for before, _, _ in printed} <= {state.name for state in states}


def test_parser_sees_a_changed_row() -> None:
    text = SPEC.read_text().replace("| NON_EXISTENT | `topic_created` | NEW |", "| x | `y` | z |")
    assert parse_table(text, "Partition transitions:") != as_triples(PARTITION_TRANSITIONS)
