"""A failed log dir takes offline only its own replicas (KIP-112, ``DIR_FAILURE_ISOLATION``).

The broker runs on the real file system through a Disk wrapper that, once armed, fails every
operation under one log dir with ``OSError(EIO)`` — the fault a dying disk shows. Fault model:
only that dir fails, from the moment it is armed, until the broker stops.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from impl.controller.requests import (
    BrokerEndpoint,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
)
from impl.storage import TopicPartition
from impl.storage.os_disk import OsDisk
from impl.storage.record_batch import build_batch

from ._harness import RunningBroker
from .test_protocol_errors import Client

pytestmark = pytest.mark.integration


class FailingDirDisk:
    """OsDisk, except that every call naming a path under ``failed_dir`` raises EIO once armed."""

    def __init__(self) -> None:
        self._disk = OsDisk()
        self.failed_dir: str | None = None

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._disk, name)
        if not callable(method):
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            failed = self.failed_dir
            if failed is not None:
                for value in (*args, *kwargs.values()):
                    if isinstance(value, str) and (value == failed or
                                                   value.startswith(failed + "/")):
                        raise OSError(errno.EIO, "injected I/O error", value)
            return method(*args, **kwargs)

        wrapper: Callable[..., Any] = call
        return wrapper


def test_failed_dir_isolates_its_replicas(zk_chroot: str, tmp_path: Path) -> None:
    disk = FailingDirDisk()
    broker = RunningBroker(zk_chroot, tmp_path, disk=disk).start()
    try:
        assert broker.become_leader("df", partitions=2)[0].error_code == 0

        def dirs() -> dict[int, str]:
            logs = broker.broker.logs
            assert logs is not None
            found = {}
            for p in range(2):
                partition = logs.get(TopicPartition("df", p))
                assert partition is not None
                found[p] = partition.log_dir
            return found

        placed = broker.call_sync(dirs)
        assert set(placed.values()) == set(broker.log_dirs), placed
        bad = next(p for p, d in placed.items() if d == broker.log_dirs[1])
        good = 1 - bad
        client = Client(broker.bootstrap)
        disk.failed_dir = broker.log_dirs[1]

        def produce_to(partition: int) -> int:
            response = client.call(0, 8, {
                "transactional_id": None, "acks": -1, "timeout": 5000,
                "topic_data": [{"name": "df", "partition_data": [
                    {"index": partition, "records": build_batch([b"x"])}]}]})
            return int(response.responses[0].partition_responses[0].error_code)

        assert produce_to(bad) == 56
        assert produce_to(good) == 0
        assert produce_to(bad) == 56
        described = client.call(35, 1, {"topics": None})
        errors = {r.log_dir: int(r.error_code) for r in described.results}
        assert errors == {broker.log_dirs[0]: 0, broker.log_dirs[1]: 56}
        epoch = broker.broker.broker_epoch
        me = BrokerEndpoint(1, "127.0.0.1", broker.broker.port)

        def leader_and_isr(partition: int, leader_epoch: int, *, is_new: bool) -> dict[Any, int]:
            response = broker.send(LeaderAndIsrRequest(0, 1, epoch, (
                LeaderAndIsrPartitionState("df", partition, 1, 1, leader_epoch, (1,), 1, (1,),
                                           is_new=is_new),), (me,)))
            assert response.error_code == 0
            return dict(response.partition_errors)

        assert leader_and_isr(bad, 1, is_new=False) == {("df", bad): 56}
        assert leader_and_isr(5, 0, is_new=False) == {("df", 5): 56}  # may be on the bad dir
        assert leader_and_isr(6, 0, is_new=True) == {}  # new: created on the good dir
        assert produce_to(6) == 0

        def dir_of_new() -> str:
            logs = broker.broker.logs
            assert logs is not None
            partition = logs.get(TopicPartition("df", 6))
            assert partition is not None
            return partition.log_dir

        assert broker.call_sync(dir_of_new) == broker.log_dirs[0]
        client.close()
    finally:
        disk.failed_dir = None
        broker.stop()
