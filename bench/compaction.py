"""Log compaction: cleaner throughput, and produce throughput while the cleaner runs.

Part 1 (in process, real files through the OS disk): a compacted log of ``--log-mib`` MiB of
keyed records (``--keys`` keys, 100-byte values, 500-record batches, ``--codec``) in 8 MiB
segments is cleaned once by :class:`LogCleanerRunner` (two worker threads). Prints the MB of log
cleaned (the sealed segments replaced) per CPU-second of the whole process (worker threads
included) and per wall second, and how much of the log survives.

Part 2 (a real broker, a child process, with a real client): confluent-kafka produces
``--records`` keyed records (100 keys) with acks=1 to a ``cleanup.policy=compact`` topic with
1 MiB segments and ``min.cleanable.dirty.ratio=0.01``, once with ``log.cleaner.enable=false`` and
once with the cleaner on (``log.cleaner.backoff.ms=50``: it cleans all along). Prints records/s
for both, the ratio (with / without: 1.0 means the cleaner costs produce nothing) and the broker's
CPU seconds.

Ends with one JSON line. Run: ``python -m bench.compaction [--log-mib N] [--records N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from bench._broker import cpu_seconds, start_broker
from impl.controller import EmbeddedZooKeeper, find_free_loopback_port
from impl.storage import LogConfig, LogManager, StorageConfig, TopicPartition
from impl.storage import compression as codecs
from impl.storage import records as rec
from impl.storage.cleaner_runner import CleanerConfig, LogCleanerRunner

MB = 1_000_000
MIB = 1 << 20
CODECS = {"none": codecs.CODEC_NONE, "gzip": codecs.CODEC_GZIP,
          "lz4": codecs.CODEC_LZ4, "zstd": codecs.CODEC_ZSTD}


# --- part 1: the cleaner alone ------------------------------------------------------------------


async def _clean_once(root: Path, log_mib: int, keys: int, codec: int) -> dict[str, Any]:
    config = StorageConfig(log_dirs=(str(root / "d0"),), segment_bytes=8 * MIB)
    (root / "d0").mkdir()
    manager = LogManager.open(config)
    tp = TopicPartition("bench-compacted", 0)
    manager.set_log_config(tp.topic, LogConfig(
        segment_bytes=8 * MIB, cleanup_policy=frozenset({"compact"}),
        min_cleanable_dirty_ratio=0.0,
    ))
    partition = manager.create(tp, is_new=True)
    rng = random.Random(1)
    offset = 0
    while partition.size_in_bytes < log_mib * MIB:
        records = [
            rec.Record(i, 1_000 + offset + i, b"key-%06d" % rng.randrange(keys),
                       rng.randbytes(100), ())
            for i in range(500)
        ]
        batch = rec.encode_batch(records, base_offset=0, codec=codec)
        await partition.append_as_leader(batch, 1)
        offset += 500
    partition.high_watermark = partition.log_end_offset
    partition.flush()
    log_bytes = partition.size_in_bytes
    runner = LogCleanerRunner(manager, CleanerConfig(threads=2))
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    cleaned = await runner.clean_once()
    cpu, wall = time.process_time() - cpu_start, time.perf_counter() - wall_start
    assert cleaned, "nothing was cleaned"
    stats = runner.stats
    manager.close()
    return {
        "log_bytes": log_bytes,
        "bytes_read": stats.bytes_read,
        "bytes_cleaned": stats.bytes_cleaned,
        "bytes_written": stats.bytes_written,
        "records_read": stats.records_read,
        "records_kept": stats.records_kept,
        "cpu_seconds": round(cpu, 3),
        "wall_seconds": round(wall, 3),
        "cleaner_mb_per_cpu_second": round(stats.bytes_cleaned / MB / cpu, 2),
        "cleaner_mb_per_second": round(stats.bytes_cleaned / MB / wall, 2),
    }


# --- part 2: produce with and without the cleaner -------------------------------------------------


def _start_broker(root: Path, zookeeper: str, cleaner: bool) -> tuple[subprocess.Popen[bytes], str]:
    port = find_free_loopback_port()
    (root / "logs").mkdir(parents=True)
    process = start_broker(
        root,
        f"broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={root / 'logs'}\n"
        f"zookeeper.connect={zookeeper}\nlog.cleaner.enable={'true' if cleaner else 'false'}\n"
        "log.cleaner.backoff.ms=50\nlog.cleaner.threads=1\n",
    )
    return process, f"127.0.0.1:{port}"


def _produce_run(zookeeper: str, cleaner: bool, records: int) -> dict[str, Any]:
    from confluent_kafka import Producer
    from kafka.admin import KafkaAdminClient, NewTopic

    with tempfile.TemporaryDirectory(prefix="logproof-bench-compaction-") as directory:
        process, bootstrap = _start_broker(Path(directory), zookeeper, cleaner)
        try:
            topic = f"compacted-{'on' if cleaner else 'off'}-{os.getpid()}"
            admin = KafkaAdminClient(bootstrap_servers=bootstrap)
            admin.create_topics([NewTopic(topic, 1, 1, topic_configs={
                "cleanup.policy": "compact", "segment.bytes": str(MIB),
                "min.cleanable.dirty.ratio": "0.01",
            })], timeout_ms=60_000)
            admin.close()
            producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                                 "batch.size": 256_000, "compression.type": "none",
                                 "queue.buffering.max.messages": 1_000_000})
            failures = 0

            def delivered(error: object, _message: object) -> None:
                nonlocal failures
                failures += error is not None

            value = bytes(100)
            cpu_start = cpu_seconds(process.pid)
            start = time.perf_counter()
            for i in range(records):
                while True:
                    try:
                        producer.produce(topic, value, key=b"key-%03d" % (i % 100), partition=0,
                                         on_delivery=delivered)
                        break
                    except BufferError:
                        producer.poll(0.01)
            remaining = producer.flush(300)
            elapsed = time.perf_counter() - start
            cpu = cpu_seconds(process.pid) - cpu_start
            if remaining or failures:
                raise SystemExit(f"produce: {remaining} unflushed, {failures} failed")
            log_dir = Path(directory) / "logs" / f"{topic}-0"
            on_disk = sum(p.stat().st_size for p in log_dir.glob("*.log"))
            return {"records_per_second": round(records / elapsed, 1),
                    "seconds": round(elapsed, 3), "broker_cpu_seconds": round(cpu, 2),
                    "log_bytes_on_disk": on_disk}
        finally:
            process.terminate()
            process.wait(60)


def main(argv: list[str] | None = None) -> None:
    """Run both parts and print the figures and one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m bench.compaction", description=__doc__)
    parser.add_argument("--log-mib", type=int, default=64)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--codec", choices=sorted(CODECS), default="none")
    parser.add_argument("--records", type=int, default=300_000)
    arguments = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="logproof-bench-cleaner-") as directory:
        cleaner = trio.run(_clean_once, Path(directory), arguments.log_mib, arguments.keys,
                           CODECS[arguments.codec])
    print(f"cleaner: {cleaner['bytes_cleaned'] / MB:.1f} MB of log cleaned "
          f"({cleaner['bytes_read'] / MB:.1f} MB read: map pass and rewrite pass), "
          f"{cleaner['records_kept']}/{cleaner['records_read']} records kept, "
          f"{cleaner['cleaner_mb_per_cpu_second']} MB per CPU-second "
          f"({cleaner['cleaner_mb_per_second']} MB/s wall, {cleaner['cpu_seconds']} CPU s)")

    with EmbeddedZooKeeper() as zookeeper:
        without = _produce_run(zookeeper.connect_string, False, arguments.records)
        with_cleaner = _produce_run(zookeeper.connect_string, True, arguments.records)
    ratio = with_cleaner["records_per_second"] / without["records_per_second"]
    print(f"produce without the cleaner: {without['records_per_second']:.0f} records/s "
          f"({without['log_bytes_on_disk'] / MB:.1f} MB on disk)")
    print(f"produce with the cleaner:    {with_cleaner['records_per_second']:.0f} records/s "
          f"({with_cleaner['log_bytes_on_disk'] / MB:.1f} MB on disk)")
    print(f"ratio with/without: {ratio:.2f}")
    print(json.dumps({
        "benchmark": "compaction",
        "log_mib": arguments.log_mib, "keys": arguments.keys, "codec": arguments.codec,
        "records": arguments.records,
        "cleaner": cleaner,
        "produce_without_cleaner": without,
        "produce_with_cleaner": with_cleaner,
        "produce_ratio_with_to_without": round(ratio, 3),
    }, sort_keys=True))


if __name__ == "__main__":
    main()
