"""The broker's replication shell emits the replication machine's trace events."""

from __future__ import annotations

from pathlib import Path

import pytest

from impl.storage.record_batch import build_batch
from impl.trace import ListTraceSink

from ._harness import RunningBroker
from .test_protocol_errors import Client, produce

pytestmark = pytest.mark.integration


def test_leader_events_are_traced(zk_chroot: str, tmp_path: Path) -> None:
    sink = ListTraceSink()
    broker = RunningBroker(zk_chroot, tmp_path, trace=sink).start()
    try:
        assert broker.become_leader("tr", leader_epoch=4)[0].error_code == 0
        client = Client(broker.bootstrap)
        assert produce(client, "tr", build_batch([b"a", b"b"])) == (0, 0)
        client.close()
    finally:
        broker.stop()
    events = [(e.machine, e.event, e.subject) for e in sink if e.machine == "replication"]
    assert events[:3] == [
        ("replication", "BECOME_LEADER", "tr-0@1"),
        ("replication", "LEADER_APPEND", "tr-0@1"),
        ("replication", "HW_ADVANCE", "tr-0@1"),
    ]
    append = next(e for e in sink if e.event == "LEADER_APPEND")
    assert dict(append.fields) == {"base_offset": 0, "last_offset": 1, "leader_epoch": 4}
