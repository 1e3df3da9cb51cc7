"""Accuracy of ``intra.broker.throttled.rate``: two concurrent movers, two configured rates.

Two partitions of ``--size-mib`` MiB each move at once (two movers sharing one throttle) from
dir ``a`` to dir ``b``. For ``--seconds`` at the first rate, then ``--seconds`` at the second
(changed live), the bytes that reached the destinations are sampled; prints achieved/configured
per phase (target within [0.95, 1.05]) and ends with one JSON line. Both figures are read from
the broker's Prometheus metrics served over the log manager (``kafka_log_logdirmove_bytescopied``
per partition, ``kafka_server_replicaalterlogdirs_throttlerate``), scraped over HTTP.

Run: ``python -m bench.throttle [--rates-mib 16,48] [--seconds 6]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import trio

from bench._metrics import Endpoint, total
from bench._storage_support import MIB, fill
from impl.broker.metrics import Parts
from impl.storage import LogManager, StorageConfig, TopicPartition
from impl.storage.runtime import run_log_manager, wait_moves_done

WARMUP_SECONDS = 0.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rates-mib", default="16,48")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    rates = [int(float(r) * MIB) for r in args.rates_mib.split(",")]
    needed_mib = int(sum(r * (args.seconds + WARMUP_SECONDS) for r in rates) / MIB / 2) + 64
    root = Path(tempfile.mkdtemp(prefix="logproof-bench-throttle-", dir=args.dir))
    dirs = (str(root / "a"), str(root / "b"))
    tps = [TopicPartition("bench", 0), TopicPartition("bench", 1)]
    config = StorageConfig(log_dirs=dirs, move_chunk_bytes=MIB,
                           num_replica_alter_log_dirs_threads=2,
                           intra_broker_throttled_rate=rates[0])
    phases: list[dict[str, float]] = []

    async def run() -> None:
        manager = LogManager.open(config)
        partitions = []
        for tp in tps:
            partition = await fill(manager, tp, needed_mib)
            if partition.log_dir != dirs[0]:  # placement alternates: move everything to a
                manager.alter_replica_log_dir(tp, dirs[0])
            partitions.append(partition)
        manager.set_throttle_rate(1 << 40)
        async with trio.open_nursery() as nursery:
            run_log_manager(manager, nursery)
            await wait_moves_done(manager, 600)
            manager.set_throttle_rate(rates[0])
            for tp in tps:
                manager.alter_replica_log_dir(tp, dirs[1])

            async def scrape() -> tuple[float, float, float]:
                """(bytes in the destinations, throttle rate, when) from the endpoint."""
                samples = await endpoint.scrape_async()
                return (total(samples, "kafka_log_logdirmove_bytescopied"),
                        samples[("kafka_server_replicaalterlogdirs_throttlerate", ())],
                        time.perf_counter())

            with Endpoint(Parts(logs=manager)) as endpoint:
                for rate in rates:
                    manager.set_throttle_rate(rate)
                    await trio.sleep(WARMUP_SECONDS)
                    start_bytes, configured, started = await scrape()
                    await trio.sleep(args.seconds)
                    end_bytes, _, ended = await scrape()
                    elapsed = ended - started
                    achieved = (end_bytes - start_bytes) / elapsed
                    phases.append({"configured_mib_per_second": configured / MIB,
                                   "achieved_mib_per_second": achieved / MIB,
                                   "ratio": achieved / configured, "seconds": elapsed})
            assert all(p.future is not None for p in partitions), "a move finished too early"
            for tp in tps:
                manager.alter_replica_log_dir(tp, "any")
            manager.close()

    try:
        trio.run(run)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for phase in phases:
        print(f"configured {phase['configured_mib_per_second']:.1f} MiB/s  achieved "
              f"{phase['achieved_mib_per_second']:.2f} MiB/s  ratio {phase['ratio']:.3f} "
              f"over {phase['seconds']:.1f} s (target 0.95-1.05)")
    print("(both figures read from the Prometheus endpoint)")
    print(json.dumps({"bench": "throttle", "movers": 2, "source": "prometheus", "phases": [
        {k: round(v, 4) for k, v in phase.items()} for phase in phases]}))


if __name__ == "__main__":
    main()
