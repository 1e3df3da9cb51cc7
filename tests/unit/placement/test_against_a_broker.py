"""``logproof placement --bootstrap-server`` against a real in-process broker with its controller,
configured with ``broker.replica.placer=multi-level`` and a multi-level ``broker.rack``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from impl.cli import main
from tests.integration.broker._harness import RunningBroker

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture
def multi_level_broker(zk_chroot: str, tmp_path: Path) -> Iterator[RunningBroker]:
    running = RunningBroker(
        zk_chroot,
        tmp_path,
        run_controller=True,
        overrides=["broker.rack=/DC1/R1", "broker.replica.placer=multi-level"],
    ).start()
    try:
        yield running
    finally:
        running.stop()


def _check_reassignment_proposal(multi_level_broker: RunningBroker) -> None:
    from impl.controller.placement import TopicPartition
    from impl.controller.placement.client import (
        PlacementClientError,
        request_reassignment_proposal,
    )

    current = {TopicPartition("a", 0): [1], TopicPartition("a", 1): [1],
               TopicPartition("b", 0): [1]}
    proposal = request_reassignment_proposal(multi_level_broker.bootstrap, current)
    assert proposal == {tp: [1] for tp in current}
    with pytest.raises(PlacementClientError, match="refused topic a: replication factor 2"):
        request_reassignment_proposal(
            multi_level_broker.bootstrap, {TopicPartition("a", 0): [1, 2]}
        )


def test_cli_and_reassignment_ask_the_broker(
    multi_level_broker: RunningBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = multi_level_broker.bootstrap
    status = main(["placement", "--partitions", "3", "--replication-factor", "1",
                   "--bootstrap-server", bootstrap, "--json", "--topic", "t"])
    captured = capsys.readouterr()
    assert (status, captured.err) == (0, "")
    document = json.loads(captured.out)
    assert [(p["topic"], p["partition"], p["replicas"]) for p in document["partitions"]] == [
        ("t", 0, [1]), ("t", 1, [1]), ("t", 2, [1])
    ]
    status = main(["placement", "--partitions", "1", "--replication-factor", "2",
                   "--bootstrap-server", bootstrap])
    captured = capsys.readouterr()
    assert status == 1
    assert captured.err.count("\n") == 1
    assert "the cluster refused: replication factor 2 larger than the 1 available brokers" in (
        captured.err
    )
    # The same broker suggests reassignments (KIP-879 Admin API), one topic per request.
    _check_reassignment_proposal(multi_level_broker)


def test_broker_uses_its_configured_placer(
    zk_chroot: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A flat rack is fine for Kafka's rack-aware placer but not for the multi-level one: the
    # refusal shows the broker placed with the placer its config names.
    running = RunningBroker(
        zk_chroot,
        tmp_path,
        run_controller=True,
        overrides=["broker.rack=rack-a", "broker.replica.placer=multi-level"],
    ).start()
    try:
        status = main(["placement", "--partitions", "1", "--replication-factor", "1",
                       "--bootstrap-server", running.bootstrap])
    finally:
        running.stop()
    captured = capsys.readouterr()
    assert status == 1
    assert "rack 'rack-a' of broker 1 does not start with '/'" in captured.err
