"""The trio broker's log-dir failure notice (KIP-112) survives a refused write."""

from __future__ import annotations

from typing import Any, cast

import trio
import trio.testing

from impl.broker.broker import DIR_FAILURE_RETRY_SECONDS, report_dir_failures
from impl.controller.coordinator import ConnectionLossError, Coordinator, NodeExistsError
from impl.controller.znodes import LOG_DIR_EVENT_NOTIFICATION_PATH, decode_log_dir_event


class _Flaky:
    """Creates nodes in memory; the first ``losses`` creates of a notification are lost."""

    def __init__(self, losses: int) -> None:
        self.losses = losses
        self.nodes: dict[str, bytes] = {}
        self.sequence = 0

    async def create(self, path: str, data: bytes = b"", *, sequential: bool = False,
                     **_: Any) -> str:
        if sequential:
            if self.losses > 0:
                self.losses -= 1
                raise ConnectionLossError("connection lost")
            path = f"{path}{self.sequence:010d}"
            self.sequence += 1
        elif path in self.nodes:
            raise NodeExistsError(path)
        self.nodes[path] = data
        return path


def _notices(zk: _Flaky) -> list[int]:
    prefix = f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/"
    return [decode_log_dir_event(data) for path, data in sorted(zk.nodes.items())
            if path.startswith(prefix)]


def test_a_notice_lost_with_the_connection_is_written_again() -> None:
    zk = _Flaky(losses=2)
    pending = ["/data/a", "/data/b"]

    async def main() -> float:
        start = trio.current_time()
        await report_dir_failures(lambda: cast(Coordinator, zk), 7, pending)
        return trio.current_time() - start

    took = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert pending == []
    assert _notices(zk) == [7, 7], "a failed dir went unreported"
    assert took == 2 * DIR_FAILURE_RETRY_SECONDS


def test_without_a_coordinator_the_notices_are_dropped() -> None:
    pending = ["/data/a"]
    trio.run(report_dir_failures, lambda: None, 7, pending)
    assert pending == []
