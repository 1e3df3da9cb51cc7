"""A native Kafka client for the benchmarks, so that the client is not what a figure measures.

The preferred client is ``bench/native/lp_perf.c``, a small C program against librdkafka,
compiled on first use with the system's C compiler and librdkafka's headers
(``librdkafka-dev``, which ``make system-packages`` installs): it produces from one buffer
without copying, can pace itself to a steady rate, and reports each record's latency from
``produce()`` to its delivery report. Where it cannot be built, :class:`KcatClient` drives
``kcat -P -l`` from a pre-written file of records and ``kcat -C -e`` to ``/dev/null`` (no
latency figures, no pacing). Every result names the client that ran.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

SOURCE = Path(__file__).with_name("native") / "lp_perf.c"
#: how long one client run may take before the benchmark gives up on it
RUN_SECONDS = 600.0

#: librdkafka settings of a throughput phase: large batches, deep queues, no compression
THROUGHPUT_PRODUCER = {
    "linger.ms": "5",
    "batch.size": "1000000",
    "batch.num.messages": "1000000",
    "queue.buffering.max.kbytes": "2097151",
    "queue.buffering.max.messages": "10000000",
    "compression.codec": "none",
    "message.max.bytes": "1000000",
}
#: librdkafka settings of the latency phase: its default linger (5 ms, which every record's
#: latency includes), batches of at most 256 KiB; with linger.ms=0 a paced producer sends a
#: request per few records and measures how many requests per second the broker answers instead
LATENCY_LINGER_MS = 5
LATENCY_PRODUCER = {**THROUGHPUT_PRODUCER, "linger.ms": str(LATENCY_LINGER_MS),
                    "batch.size": "262144"}
CONSUMER = {
    "fetch.message.max.bytes": "16777216",
    "fetch.max.bytes": "52428800",
    "fetch.wait.max.ms": "100",
    "queued.max.messages.kbytes": "1048576",
    "queued.min.messages": "1000000",
}


@dataclass(frozen=True)
class ProduceResult:
    """One produce run: wall seconds, the client's name and latency percentiles (microseconds;
    empty when the client cannot measure them)."""

    client: str
    elapsed_s: float
    latency_us: dict[str, int]


@dataclass(frozen=True)
class ConsumeResult:
    """One consume run: wall seconds from the first record to the last, value bytes received,
    the client's name, and the seconds before the first record (None: included in
    ``elapsed_s``, as kcat's whole command is timed)."""

    client: str
    elapsed_s: float
    value_bytes: int
    start_s: float | None = None


class NativeClient(Protocol):
    """What a benchmark needs of a native client."""

    name: str
    measures_latency: bool

    def produce(self, bootstrap: str, topic: str, records: int, record_bytes: int, acks: str,
                *, rate_mb_s: float = 0.0, latency: bool = False,
                partitions: int = 1) -> ProduceResult:
        """Produce ``records`` records of ``record_bytes`` bytes to partition 0 (or spread
        over partitions 0 to ``partitions - 1``)."""
        ...

    def consume(self, bootstrap: str, topic: str, records: int,
                record_bytes: int) -> ConsumeResult:
        """Read ``records`` records of partition 0 from the beginning."""
        ...


def _settings(pairs: dict[str, str]) -> list[str]:
    return [f"{key}={value}" for key, value in pairs.items()]


def _run(command: list[str]) -> str:
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=RUN_SECONDS,
                                check=False)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{Path(command[0]).name} did not finish within {RUN_SECONDS:.0f} s") \
            from None
    if result.returncode != 0:
        message = result.stderr.strip().splitlines()
        raise SystemExit(f"{Path(command[0]).name} {command[1]} failed: "
                         f"{message[-1] if message else 'exit status ' + str(result.returncode)}")
    return result.stdout


class LpPerf:
    """``bench/native/lp_perf.c``, built into ``directory``."""

    measures_latency = True

    def __init__(self, binary: Path) -> None:
        self.binary = binary
        self.name = "lp_perf (librdkafka)"

    def produce(self, bootstrap: str, topic: str, records: int, record_bytes: int, acks: str,
                *, rate_mb_s: float = 0.0, latency: bool = False,
                partitions: int = 1) -> ProduceResult:
        """Produce with librdkafka (record i to partition i % ``partitions``); latency
        percentiles from its delivery reports."""
        settings = {**(LATENCY_PRODUCER if latency else THROUGHPUT_PRODUCER), "acks": acks,
                    "lp.partitions": str(partitions)}
        output = _run([str(self.binary), "produce", bootstrap, topic, str(records),
                       str(record_bytes), str(rate_mb_s), *_settings(settings)])
        report = json.loads(output.strip().splitlines()[-1])
        self.name = f"lp_perf ({report['client']})"
        return ProduceResult(self.name, float(report["elapsed_s"]),
                             {key: int(value) for key, value in report["latency_us"].items()})

    def consume(self, bootstrap: str, topic: str, records: int,
                record_bytes: int) -> ConsumeResult:
        """Consume with librdkafka's callback consumer."""
        output = _run([str(self.binary), "consume", bootstrap, topic, str(records),
                       *_settings(CONSUMER)])
        report = json.loads(output.strip().splitlines()[-1])
        self.name = f"lp_perf ({report['client']})"
        return ConsumeResult(self.name, float(report["elapsed_s"]), int(report["bytes"]),
                             float(report["start_s"]))


class KcatClient:
    """``kcat``: produce from a file of newline-delimited records, consume to /dev/null."""

    measures_latency = False

    def __init__(self, binary: str, directory: Path) -> None:
        self.binary = binary
        self.directory = directory
        self.name = "kcat (librdkafka)"

    def _records_file(self, records: int, record_bytes: int) -> Path:
        path = self.directory / f"records-{records}-{record_bytes}.txt"
        if not path.exists():
            # printable bytes: kcat -l splits records at newlines
            line = (bytes(range(33, 127)) * (record_bytes // 94 + 1))[:record_bytes - 1] + b"\n"
            with path.open("wb") as out:
                block = line * 1000
                for _ in range(records // 1000):
                    out.write(block)
                out.write(line * (records % 1000))
        return path

    def produce(self, bootstrap: str, topic: str, records: int, record_bytes: int, acks: str,
                *, rate_mb_s: float = 0.0, latency: bool = False,
                partitions: int = 1) -> ProduceResult:
        """``kcat -P -l``: wall time of the whole command (start-up included); over several
        partitions, librdkafka's partitioner places each record (random: no keys)."""
        if rate_mb_s or latency:
            raise SystemExit("kcat cannot pace itself or report latencies")
        path = self._records_file(records, record_bytes)
        settings = {**THROUGHPUT_PRODUCER, "acks": acks}
        command = [self.binary, "-P", "-q", "-b", bootstrap, "-t", topic, "-p",
                   "0" if partitions == 1 else "-1", "-l", str(path)]
        for item in _settings(settings):
            command += ["-X", item]
        start = time.perf_counter()
        _run(command)
        return ProduceResult(self.name, time.perf_counter() - start, {})

    def consume(self, bootstrap: str, topic: str, records: int,
                record_bytes: int) -> ConsumeResult:
        """``kcat -C -o beginning -e`` to /dev/null."""
        command = [self.binary, "-C", "-q", "-b", bootstrap, "-t", topic, "-p", "0",
                   "-o", "beginning", "-e", "-c", str(records), "-f", ""]
        for item in _settings(CONSUMER):
            command += ["-X", item]
        start = time.perf_counter()
        _run(command)
        # -f '' prints nothing per record: the bytes are the records that were asked for
        return ConsumeResult(self.name, time.perf_counter() - start, records * record_bytes)


def build_lp_perf(directory: Path) -> tuple[LpPerf | None, str]:
    """Compile ``lp_perf`` into ``directory``: (client, "") or (None, why it could not be)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None, "no C compiler"
    if not Path("/usr/include/librdkafka/rdkafka.h").exists():
        return None, "librdkafka's headers are missing (apt-get install librdkafka-dev)"
    binary = directory / "lp_perf"
    result = subprocess.run([compiler, "-O2", "-o", str(binary), str(SOURCE), "-lrdkafka"],
                            capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        return None, f"cc failed: {lines[-1] if lines else result.returncode}"
    return LpPerf(binary), ""


def native_client(directory: Path, prefer: str = "lp_perf") -> NativeClient:
    """The best native client this machine has (``prefer`` "kcat" skips lp_perf).

    Raises:
        SystemExit: neither lp_perf can be built nor kcat found.
    """
    why = "kcat asked for"
    if prefer != "kcat":
        client, why = build_lp_perf(directory)
        if client is not None:
            return client
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        raise SystemExit(f"no native client: lp_perf cannot be built ({why}) and kcat is missing")
    print(f"lp_perf not used ({why}): kcat drives the native phases, without latency figures")
    return KcatClient(kcat, directory)
