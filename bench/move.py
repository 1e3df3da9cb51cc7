"""Throughput of one unthrottled replica move between two log dirs, as a ratio to ``cp``.

Builds one partition of ``--size-mib`` MiB in dir ``a``, then (same run, same dirs, page cache
warm for both) copies its segment files with ``cp`` to dir ``b`` and fsyncs them (the move makes
its destination durable too), then moves the partition from ``a`` to ``b`` through
``LogManager.alter_replica_log_dir`` with the trio runner. Prints MiB/s of each and the ratio
move/cp (target >= 0.8), and ends with one JSON line. While the partition moves, the broker's
Prometheus metrics served over the log manager are scraped over HTTP every
:data:`SCRAPE_SECONDS`: the copy rate printed is the slope of ``kafka_log_logdirmove_bytescopied``
between the first and the last scrape that saw the move copying, with the offset lag
(``kafka_log_logdirmove_offsetlag``) at the last one.

Run: ``python -m bench.move --size-mib 1024 [--dir PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import trio

from bench._metrics import Endpoint
from bench._storage_support import MIB, fill
from impl.broker.metrics import Parts
from impl.storage import LogManager, MoveState, StorageConfig, TopicPartition
from impl.storage.runtime import run_log_manager, wait_moves_done

TARGET_RATIO = 0.8
SCRAPE_SECONDS = 0.2


def _cp_seconds(source: Path, dest: Path) -> float:
    files = sorted(p for p in source.iterdir() if p.suffix in (".log", ".index"))
    dest.mkdir()
    started = time.perf_counter()
    subprocess.run(["cp", *map(str, files), str(dest)], check=True)
    for path in dest.iterdir():
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    fd = os.open(dest, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--dir", default=None, help="parent dir of the two log dirs")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="logproof-bench-move-", dir=args.dir))
    dirs = (str(root / "a"), str(root / "b"))
    tp = TopicPartition("bench", 0)
    config = StorageConfig(log_dirs=dirs, segment_bytes=256 * MIB)
    result: dict[str, float] = {}

    async def run() -> None:
        manager = LogManager.open(config)
        partition = await fill(manager, tp, args.size_mib)
        size = partition.size_in_bytes
        assert partition.log_dir == dirs[0]
        cp_seconds = _cp_seconds(Path(partition.log.path), root / "b" / "cp-copy")
        shutil.rmtree(root / "b" / "cp-copy")
        labels = (("partition", str(tp.partition)), ("topic", tp.topic))
        seen: list[tuple[float, float, float]] = []  # (when, bytes copied, offset lag)

        async def watch(endpoint: Endpoint) -> None:
            while True:
                samples = await endpoint.scrape_async()
                copied = samples.get(("kafka_log_logdirmove_bytescopied", labels))
                if copied is not None:
                    seen.append((time.perf_counter(), copied,
                                 samples[("kafka_log_logdirmove_offsetlag", labels)]))
                await trio.sleep(SCRAPE_SECONDS)

        with Endpoint(Parts(logs=manager)) as endpoint:
            async with trio.open_nursery() as nursery:
                run_log_manager(manager, nursery)
                started = time.perf_counter()
                manager.alter_replica_log_dir(tp, dirs[1])
                nursery.start_soon(watch, endpoint)
                await wait_moves_done(manager, timeout_s=3600)
                move_seconds = time.perf_counter() - started
                nursery.cancel_scope.cancel()
            manager.close()
        if len(seen) >= 2 and seen[-1][0] > seen[0][0]:
            result.update(
                endpoint_copy_mib_per_second=(seen[-1][1] - seen[0][1]) / MIB
                / (seen[-1][0] - seen[0][0]),
                endpoint_scrapes=len(seen), endpoint_last_offset_lag=seen[-1][2])
        assert manager.move_state(tp).state is MoveState.DONE
        assert partition.log_dir == dirs[1]
        result.update(
            size_mib=size / MIB,
            cp_mib_per_second=size / MIB / cp_seconds,
            move_mib_per_second=size / MIB / move_seconds,
            move_seconds=move_seconds,
            cp_seconds=cp_seconds,
        )

    try:
        trio.run(run)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ratio = result["move_mib_per_second"] / result["cp_mib_per_second"]
    print(f"partition size      {result['size_mib']:.0f} MiB")
    print(f"cp + fsync          {result['cp_mib_per_second']:.0f} MiB/s "
          f"({result['cp_seconds']:.2f} s)")
    print(f"move (unthrottled)  {result['move_mib_per_second']:.0f} MiB/s "
          f"({result['move_seconds']:.2f} s)")
    print(f"ratio move/cp       {ratio:.2f} (target >= {TARGET_RATIO})")
    if "endpoint_copy_mib_per_second" in result:
        print(f"endpoint            {result['endpoint_copy_mib_per_second']:.0f} MiB/s copied "
              f"(kafka_log_logdirmove_bytescopied over {result['endpoint_scrapes']:.0f} scrapes, "
              f"offset lag {result['endpoint_last_offset_lag']:.0f} at the last)")
    else:
        print(f"endpoint            the move finished before two scrapes "
              f"({SCRAPE_SECONDS} s apart) saw it copying: move a larger partition")
    print(json.dumps({"bench": "move", **{k: round(v, 3) for k, v in result.items()},
                      "ratio_to_cp": round(ratio, 3), "target_ratio": TARGET_RATIO}))


if __name__ == "__main__":
    main()
