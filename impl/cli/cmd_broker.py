"""``logproof broker --config FILE [--override key=value ...]``: run one broker until signalled.

The configuration is a Kafka-style properties file (``broker.id``, ``listeners``, ``log.dirs``,
``zookeeper.connect``, ``intra.broker.throttled.rate``, ``num.replica.alter.log.dirs.threads``,
``min.insync.replicas``, segment and retention settings, ``broker.rack``, …); overrides win. A bad
value is a one-line error. Once registered and serving, the broker prints
``broker <id> serving on <host:port>`` on stdout (with ``, metrics on <url>`` when
``metrics.port`` is set); SIGTERM or SIGINT stops it gracefully.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import trio

from impl.broker import garbage
from impl.broker.broker import Broker
from impl.broker.config import ConfigError, load_config
from impl.controller import AdminError, CoordinatorError

from ._errors import CliError


def register(subparsers: Any) -> None:
    """Add the ``broker`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "broker", help="run one broker",
        description="Run one Kafka-compatible broker until SIGTERM or SIGINT.",
    )
    parser.add_argument("--config", type=Path, required=True, help="a .properties file")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="override one setting (repeatable)")
    parser.add_argument("--log-level", default="INFO",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.set_defaults(handler=run)


#: glibc ``mallopt`` parameters.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def _keep_large_buffers_on_the_heap() -> None:
    """Produce requests bring megabyte buffers at line rate. With glibc's defaults each is a
    fresh ``mmap`` whose pages fault in on every copy (measured: a third of the produce path's
    CPU); keeping them on the heap, and not trimming it eagerly, lets the memory be reused."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc: nothing to tune
        return
    libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    libc.mallopt(_M_TRIM_THRESHOLD, 256 << 20)


#: How long a thread may hold the GIL while another wants it (CPython's default is 5 ms).
GIL_SWITCH_INTERVAL_SECONDS = 0.0005


def _serve_the_loop_first() -> None:
    """Worker threads (record validation, large responses, the storage runtime's CPU work) hold
    the GIL in turns with the event loop; with CPython's 5 ms switch interval the loop waits up
    to 5 ms each time it wakes while one runs, and a client's produce->consume round trip wakes
    it a dozen times. A shorter interval bounds each wait at half a millisecond."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_SECONDS)


async def _serve(broker: Broker) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.serve)
            metrics = ("" if broker.metrics_port is None else
                       f", metrics on http://{broker.config.listeners[0].host or '0.0.0.0'}:"
                       f"{broker.metrics_port}/metrics")
            print(f"broker {broker.config.broker_id} serving on {broker.bootstrap}{metrics}",
                  flush=True)
            server = broker.server
            assert server is not None
            garbage.take_over_full_collections()
            nursery.start_soon(garbage.collect_when_quiet,
                               lambda: server.large_requests_in_flight)

            async def stop_on_signal() -> None:
                async for _ in signals:
                    broker.request_stop()
                    return

            nursery.start_soon(stop_on_signal)
            await broker.wait_stopped()
            nursery.cancel_scope.cancel()


class _RepeatFilter(logging.Filter):
    """Drop a log line identical to the previous one (kazoo warns once per reconnect attempt:
    about 96 lines for an unreachable ``zookeeper.connect`` before the broker gives up)."""

    def __init__(self) -> None:
        super().__init__()
        self._last: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message == self._last:
            return False
        self._last = message
        return True


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


def run(arguments: argparse.Namespace) -> int:
    """Load the config, run the broker, stop on a signal."""
    try:
        text = arguments.config.read_text()
    except OSError as error:
        raise CliError(f"cannot read {arguments.config}: {error.strerror}") from None
    try:
        config = load_config(text, arguments.override)
    except ConfigError as error:
        raise CliError(f"{arguments.config}: {error}") from None
    for log_dir in config.log_dirs:
        try:
            Path(log_dir).mkdir(parents=True, exist_ok=True)  # as Kafka creates missing dirs
        except OSError as error:
            # an unusable dir is not fatal: the storage engine starts with it offline (KIP-112)
            print(f"logproof: warning: log dir {log_dir}: {error.strerror}", file=sys.stderr)
    logging.basicConfig(
        level=getattr(logging, arguments.log_level), stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    logging.getLogger("kazoo.client").addFilter(_RepeatFilter())
    _keep_large_buffers_on_the_heap()
    _serve_the_loop_first()
    broker = Broker(config)
    try:
        try:
            trio.run(_serve, broker)
        except BaseExceptionGroup as group:  # a nursery's failure: report its first cause
            leaf = _first_leaf(group)
            if not isinstance(leaf, OSError | CoordinatorError | AdminError | ValueError):
                raise
            raise leaf from None
    except OSError as error:
        raise CliError(f"broker {config.broker_id}: {error.strerror or error}") from None
    except (CoordinatorError, AdminError) as error:
        raise CliError(f"broker {config.broker_id}: ZooKeeper: {error}") from None
    except ValueError as error:  # e.g. a log dir that belongs to another broker id
        raise CliError(f"broker {config.broker_id}: {error}") from None
    return 0
