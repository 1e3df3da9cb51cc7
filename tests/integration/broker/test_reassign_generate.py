"""``logproof reassign --generate`` (KIP-879's Admin API): the cluster's placer proposes a new
assignment of the topics to move onto ``--broker-list``; the proposal is an executable
reassignment JSON, and nothing changes in the cluster."""

from __future__ import annotations

import contextlib
import io
import json
import time
from pathlib import Path

import pytest

from impl.broker.admin import AdminClient
from impl.cli import main as cli_main
from impl.controller.znodes import decode_reassignment

from ._harness import RunningBroker

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def _generate(*arguments: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli_main(["reassign", "--generate", *arguments])
    return status, out.getvalue(), err.getvalue()


def test_generate_proposes_with_the_cluster_placer(zk_chroot: str, tmp_path: Path) -> None:
    brokers = [
        RunningBroker(
            zk_chroot,
            tmp_path / f"b{broker_id}",
            broker_id=broker_id,
            run_controller=True,
            overrides=[f"broker.rack=rack{broker_id}"],
        ).start()
        for broker_id in (1, 2, 3)
    ]
    try:
        bootstrap = ",".join(broker.bootstrap for broker in brokers)
        with AdminClient(bootstrap) as admin:
            deadline = time.monotonic() + 30
            while len(admin.metadata().brokers) < 3:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            created = admin.create_topics([("g", {0: [1], 1: [1], 2: [1]})], timeout_ms=20_000)
            assert created["g"][0] == 0
        topics = tmp_path / "topics.json"
        topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "g"}]}))

        status, out, err = _generate(
            "--topics-to-move-json-file", str(topics), "--broker-list", "2,3",
            "--bootstrap-server", bootstrap,
        )

        assert (status, err) == (0, "")
        lines = out.splitlines()
        assert lines[0] == "Current partition replica assignment"
        current = json.loads(lines[1])
        assert [(p["topic"], p["partition"], p["replicas"]) for p in current["partitions"]] == [
            ("g", 0, [1]), ("g", 1, [1]), ("g", 2, [1])
        ]
        assert lines[3] == "Proposed partition reassignment configuration"
        proposed = json.loads(lines[4])
        placed = {p["partition"]: p["replicas"] for p in proposed["partitions"]}
        assert sorted(placed) == [0, 1, 2]
        assert all(len(replicas) == 1 and replicas[0] in {2, 3} for replicas in placed.values())
        assert {replicas[0] for replicas in placed.values()} == {2, 3}
        assert all(p["log_dirs"] == ["any"] for p in proposed["partitions"])
        assert len(decode_reassignment(lines[4].encode())) == 3
        with AdminClient(bootstrap) as admin:
            _, partitions = admin.metadata(["g"]).topics["g"]
        assert [partition.replicas for partition in partitions] == [(1,), (1,), (1,)]

        status, _, err = _generate(
            "--topics-to-move-json-file", str(topics), "--broker-list", "2,9",
            "--bootstrap-server", bootstrap,
        )
        assert (status, err) == (1, "logproof: error: --broker-list: no live broker 9\n")
    finally:
        for broker in brokers:
            broker.stop()


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        (None, ["--broker-list", "1"], "--generate needs --topics-to-move-json-file"),
        ('{"version":1,"topics":[{"topic":"t"}]}', [], "--generate needs --broker-list"),
        ('{"topics": 3}', ["--broker-list", "1"], "expected"),
        ("not json", ["--broker-list", "1"], "not JSON"),
        ('{"version":1,"topics":[{"topic":"t"}]}', ["--broker-list", "1,x"], "'x' is not"),
        ('{"version":1,"topics":[{"topic":"t"}]}', ["--broker-list", "1,1"], "listed twice"),
    ],
)
def test_generate_rejects_bad_input_in_one_line(
    tmp_path: Path, content: str | None, extra: list[str], message: str
) -> None:
    arguments = ["--bootstrap-server", "127.0.0.1:9", *extra]
    if content is not None:
        path = tmp_path / "topics.json"
        path.write_text(content)
        arguments += ["--topics-to-move-json-file", str(path)]
    status, out, err = _generate(*arguments)
    assert (status, out) == (1, "")
    assert err.startswith("logproof: error: ")
    assert message in err
    assert err.count("\n") == 1
