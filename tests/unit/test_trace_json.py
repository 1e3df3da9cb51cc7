"""``TraceEvent.to_json`` builds its line by hand for speed; it must stay exactly the
``json.dumps`` line (sorted keys, compact separators) that trace digests were defined on."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from impl.trace import TraceEvent

_TEXT = st.text(max_size=12)  # any code point: escapes, non-ASCII, surrogates
_SCALARS = st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | _TEXT
#: ``TraceEvent.of``'s own parameters cannot be field names
_PARAMETERS = frozenset({"machine", "event", "subject", "state_before", "state_after"})
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4), max_leaves=10)


def _reference(event: TraceEvent) -> str:
    return json.dumps(
        {"machine": event.machine, "event": event.event, "subject": event.subject,
         "before": event.state_before, "after": event.state_after,
         "fields": dict(event.fields)},
        sort_keys=True, separators=(",", ":"),
    )


@settings(max_examples=400, deadline=None)
@given(names=st.tuples(_TEXT, _TEXT, _TEXT, _TEXT, _TEXT),
       fields=st.dictionaries(_TEXT.filter(lambda key: key not in _PARAMETERS), _VALUES,
                              max_size=6))
def test_the_line_is_json_dumps_of_the_event(names: tuple[str, str, str, str, str],
                                             fields: dict[str, Any]) -> None:
    event = TraceEvent.of(*names, **fields)
    assert event.to_json() == _reference(event)


def test_a_typical_event_and_its_repeat_give_the_same_line() -> None:
    event = TraceEvent.of("replication", "FOLLOWER_FETCH", "t-0@1", "LEADER", "LEADER",
                          replica=2, fetch_offset=17, isr=(1, 2, 0), note="é\n", flag=True,
                          nothing=None)
    first = event.to_json()
    assert first == _reference(event)
    assert event.to_json() == first  # the cached head and tail give the same bytes
    assert json.loads(first)["fields"]["isr"] == [1, 2, 0]
