"""``logproof placement``: the dry run prints the placement; bad input is one line, exit 1."""

from __future__ import annotations

import json

import pytest

from impl.cli import main
from impl.controller.placement import parse_rack

KIP_RACKS = "1:/DC1/R1,2:/DC1/R2,3:/DC2/R1,4:/DC2/R2,5:/DC3/R1,6:/DC3/R2"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["placement", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_dry_run_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(
        capsys, "--partitions", "6", "--replication-factor", "3",
        "--broker-racks", KIP_RACKS, "--seed", "7",
    )
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "placer: multi-level  seed: 7  PLACEMENT_SPREAD: holds"
    assert lines[1].split() == ["PARTITION", "LEADER", "REPLICAS", "RACKS"]
    assert len(lines) == 2 + 6
    for partition_id, line in enumerate(lines[2:]):
        cells = line.split()
        assert cells[0] == str(partition_id)
        replicas = cells[2].split(",")
        assert cells[1] == replicas[0]
        assert sorted(parse_rack(rack)[0] for rack in cells[3:]) == ["DC1", "DC2", "DC3"]


def test_dry_run_json_is_a_reassignment_file(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--partitions", "4", "--replication-factor", "2", "--racks", "/a,/b,/c",
            "--seed", "3", "--json", "--topic", "events"]
    status, out, _ = run(capsys, *argv)
    assert status == 0
    document = json.loads(out)
    assert document["version"] == 1
    assert [p["partition"] for p in document["partitions"]] == [0, 1, 2, 3]
    assert {p["topic"] for p in document["partitions"]} == {"events"}
    assert all(len(set(p["replicas"])) == 2 for p in document["partitions"])
    assert document["seed"] == 3
    # The same seed gives the same placement.
    assert run(capsys, *argv)[1] == out


def test_dry_run_honours_brokers_and_force_simple(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(
        capsys, "--partitions", "5", "--replication-factor", "2", "--broker-racks", KIP_RACKS,
        "--brokers", "2,4,6", "--force-simple", "--seed", "1", "--json",
    )
    assert status == 0
    used = {b for p in json.loads(out)["partitions"] for b in p["replicas"]}
    assert used <= {2, 4, 6}


def test_seed_is_printed_when_drawn(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "--partitions", "1", "--replication-factor", "1",
                         "--racks", "/a", "--json")
    assert status == 0
    assert isinstance(json.loads(out)["seed"], int)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--replication-factor", "1", "--racks", "/a"], "--partitions is required"),
        (["--partitions", "x", "--replication-factor", "1", "--racks", "/a"], "integer"),
        (["--partitions", "1", "--replication-factor", "0", "--racks", "/a"], "between"),
        (["--partitions", "1", "--replication-factor", "4", "--racks", "/a,/b"], "larger than"),
        (["--partitions", "1", "--replication-factor", "1"], "needs --broker-racks"),
        (["--partitions", "1", "--replication-factor", "1", "--racks", "a/b"], "start with '/'"),
        (["--partitions", "1", "--replication-factor", "1", "--broker-racks", "x:/a"],
         "not ID or ID:RACK"),
        (["--partitions", "1", "--replication-factor", "1", "--broker-racks", "1:/a,1:/b"],
         "duplicate broker ids"),
        (["--partitions", "1", "--replication-factor", "1", "--racks", "/a", "--brokers", "9"],
         "unknown broker ids"),
        (["--partitions", "1", "--replication-factor", "1", "--racks", "/a",
          "--placer", "nowhere"], "broker.replica.placer"),
        (["--partitions", "1", "--replication-factor", "1", "--racks", "/a",
          "--bootstrap-server", "h:1"], "dry run"),
        (["--partitions", "1", "--replication-factor", "1", "--bootstrap-server", "nohost"],
         "not HOST:PORT"),
    ],
)
def test_bad_input_is_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    status, out, err = run(capsys, *argv)
    assert status == 1
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("logproof: error: ")
    assert message in err


@pytest.mark.integration
def test_asks_a_broker_over_loopback(capsys: pytest.CaptureFixture[str]) -> None:
    import socket
    import threading

    from .test_protocol import serve_once

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def accept_and_serve() -> None:
        connection, _ = listener.accept()
        serve_once(connection, advertise=True)

    server = threading.Thread(target=accept_and_serve)
    server.start()
    try:
        status, out, err = run(
            capsys, "--partitions", "3", "--replication-factor", "3",
            "--bootstrap-server", f"127.0.0.1:{port}", "--json",
        )
    finally:
        server.join(timeout=10)
        listener.close()
    assert (status, err) == (0, "")
    document = json.loads(out)
    assert [p["partition"] for p in document["partitions"]] == [0, 1, 2]
    assert document["bootstrap_server"] == f"127.0.0.1:{port}"


def test_json_with_topic_is_a_reassignment_document(capsys: pytest.CaptureFixture[str]) -> None:
    from impl.controller.znodes import decode_reassignment

    status, out, _ = run(
        capsys, "--partitions", "3", "--replication-factor", "2", "--broker-racks", KIP_RACKS,
        "--seed", "5", "--json", "--topic", "orders",
    )
    assert status == 0
    targets = decode_reassignment(out.encode())
    assert [(t.topic, t.partition) for t in targets] == [("orders", p) for p in range(3)]


def test_placer_option_is_for_dry_runs_only(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(
        capsys, "--partitions", "1", "--replication-factor", "1",
        "--bootstrap-server", "127.0.0.1:1", "--placer", "rack-aware",
    )
    assert status == 1
    assert "broker.replica.placer" in err
    status, out, _ = run(
        capsys, "--partitions", "1", "--replication-factor", "1", "--racks", "r1,r2",
        "--placer", "rack-aware", "--seed", "0",
    )
    assert status == 0
    assert out.startswith("placer: rack-aware  seed: 0  PLACEMENT_SPREAD: n/a")
