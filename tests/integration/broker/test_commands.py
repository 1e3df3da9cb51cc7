"""``logproof cluster up`` with child-process brokers, and ``logproof broker`` config errors."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

START_SECONDS = 60.0


def _read_until(process: subprocess.Popen[bytes], marker: bytes, timeout: float) -> bytes:
    assert process.stdout is not None
    data = b""
    deadline = time.monotonic() + timeout
    while marker not in data:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no {marker!r} within {timeout} s: {data!r}"
        ready, _, _ = select.select([process.stdout], [], [], remaining)
        if ready:
            chunk = os.read(process.stdout.fileno(), 4096)
            assert chunk, f"process exited: {data!r}"
            data += chunk
    return data


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """A broker's ``/metrics`` as {(sample name, sorted labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_cluster_up_serves_clients_and_stops_cleanly(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    process = subprocess.Popen(
        [sys.executable, "-m", "impl.cli", "cluster", "up", "--brokers", "2",
         "--log-dirs-per-broker", "2", "--data-dir", str(tmp_path / "data")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        output = _read_until(process, b"bootstrap servers: ", START_SECONDS)
        output += _read_until(process, b"\n", 5.0) if not output.endswith(b"\n") else b""
        line = next(x for x in output.decode().splitlines() if x.startswith("bootstrap servers"))
        bootstrap = line.split(": ", 1)[1].strip()
        assert len(bootstrap.split(",")) == 2
        urls = [x.split(": ", 1)[1] for x in output.decode().splitlines()
                if x.startswith("broker ") and " metrics: " in x]
        assert len(urls) == 2, output
        before = [_scrape(url) for url in urls]
        assert all(("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "cu"),))
                   not in samples for samples in before)
        created = subprocess.run(
            [sys.executable, "-m", "impl.cli", "topics", "create", "--topic", "cu",
             "--partitions", "4", "--replication-factor", "2", "--bootstrap-server", bootstrap],
            capture_output=True, text=True, timeout=60, check=False,
        )
        assert created.returncode == 0, created.stderr
        described = subprocess.run(
            [sys.executable, "-m", "impl.cli", "topics", "describe", "--topic", "cu",
             "--bootstrap-server", bootstrap],
            capture_output=True, text=True, timeout=60, check=False,
        )
        assert described.returncode == 0, described.stderr
        rows = [x for x in described.stdout.splitlines() if x.startswith("\tTopic: cu\t")]
        assert len(rows) == 4, described.stdout
        for row in rows:
            fields = dict(item.split(": ", 1) for item in row.lstrip("\t").split("\t"))
            assert fields["LeaderEpoch"] == "0", row
            assert fields["Leader"] in fields["Replicas"].split(","), row
            assert fields["Isr"] == fields["Replicas"], row
            assert fields["Offline"] == "", row
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for index in range(40):
            producer.produce("cu", value=b"v%d" % index, partition=index % 4)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition("cu", p, 0) for p in range(4)])
        values: set[bytes] = set()
        for _ in range(100):
            if len(values) >= 40:
                break
            for message in consumer.consume(num_messages=100, timeout=0.5):
                assert message.error() is None
                value = message.value()
                assert value is not None
                values.add(value)
        consumer.close()
        assert values == {b"v%d" % index for index in range(40)}
        after = [_scrape(url) for url in urls]
        topic = (("topic", "cu"),)

        def total(name: str, labels: tuple[tuple[str, str], ...] = topic) -> float:
            return sum(samples.get((name, labels), 0.0) for samples in after)

        # each record entered its partition's leader once, went to the follower (acks=all)
        # and out to the consumer
        assert total("kafka_server_brokertopicmetrics_messagesin_total") == 40
        bytes_in = total("kafka_server_brokertopicmetrics_bytesin_total")
        assert bytes_in > 40 * 2
        assert total("kafka_server_brokertopicmetrics_bytesout_total") >= bytes_in
        assert total("kafka_server_brokertopicmetrics_replicationbytesout_total", ()) >= bytes_in
        assert sum(samples[("kafka_controller_kafkacontroller_activecontrollercount", ())]
                   for samples in after) == 1
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            out, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
    assert process.returncode == 0, err.decode()[-2000:]
    assert b"stopped 2 broker(s)" in out


def test_broker_config_errors_are_one_line(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("broker.id=one\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs=/x\n"
                      "zookeeper.connect=127.0.0.1:1\n")
    result = subprocess.run(
        [sys.executable, "-m", "impl.cli", "broker", "--config", str(config)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0
    assert "broker.id: expected an integer" in result.stderr
    from impl.cli import main as cli_main

    assert cli_main(["broker", "--config", str(tmp_path / "missing")]) == 1
    assert cli_main(["broker", "--config", str(config), "--override", "log.dirs=rel"]) == 1


def test_admin_commands_fail_in_one_line_when_unreachable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from impl.cli import main as cli_main

    assert cli_main(["log-dirs", "describe", "--bootstrap-server", "127.0.0.1:1"]) == 1
    assert cli_main(["topics", "describe", "--bootstrap-server", "nonsense"]) == 1
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("logproof: error:")]
    assert len(lines) == 2
    assert "cannot connect to 127.0.0.1:1" in lines[0]
    assert "HOST:PORT" in lines[1]
