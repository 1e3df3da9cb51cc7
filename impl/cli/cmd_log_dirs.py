"""``logproof log-dirs describe``: the KIP-113 JSON of every broker's log dirs."""

from __future__ import annotations

import argparse
import json
from typing import Any

from impl.broker.admin import AdminClientError, LogDirInfo, error_name

from ._errors import CliError
from ._security import add_security_arguments, admin_client


def register(subparsers: Any) -> None:
    """Add the ``log-dirs`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "log-dirs", help="describe log dirs (KIP-113)",
        description="Print the partitions, sizes and lags of each broker's log dirs as JSON.",
    )
    actions = parser.add_subparsers(title="actions", metavar="ACTION", required=True)
    describe = actions.add_parser("describe", help="describe log dirs as KIP-113 JSON")
    describe.add_argument("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT]")
    describe.add_argument("--broker-list", default=None, help="broker ids, e.g. 1,2 (default all)")
    describe.add_argument("--log-dirs", default=None, help="only these dirs, e.g. /d1,/d2")
    describe.add_argument("--topics", default=None, help="only these topics, e.g. t1,t2")
    describe.add_argument("--timeout", type=float, default=30.0, help="seconds (default 30)")
    add_security_arguments(describe)
    describe.set_defaults(handler=run)


def _csv(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [item.strip() for item in value.split(",") if item.strip()]


def render(described: dict[int, dict[str, LogDirInfo]], log_dirs: list[str] | None) -> str:
    """The KIP-113 JSON for ``describe_log_dirs`` results, brokers and dirs sorted."""
    brokers = []
    for broker_id in sorted(described):
        dirs = []
        for path in sorted(described[broker_id]):
            if log_dirs is not None and path not in log_dirs:
                continue
            info = described[broker_id][path]
            entry: dict[str, Any] = {"is_live": info.is_live, "path": path}
            if not info.is_live:
                entry["error"] = error_name(info.error_code)
            entry["partitions"] = [
                {
                    "topic": topic,
                    "partition": partition,
                    "size": replica.size,
                    "offset_lag": replica.offset_lag,
                    "is_temporary": replica.is_future,
                }
                for (topic, partition), replica in sorted(info.replicas.items())
            ]
            dirs.append(entry)
        brokers.append({"broker": broker_id, "log_dirs": dirs})
    return json.dumps({"version": 1, "brokers": brokers}, indent=2)


def run(arguments: argparse.Namespace) -> int:
    """Describe and print."""
    broker_ids: list[int] | None = None
    if arguments.broker_list is not None:
        try:
            broker_ids = [int(item) for item in _csv(arguments.broker_list) or []]
        except ValueError:
            raise CliError(f"--broker-list must be integers: {arguments.broker_list!r}") from None
    log_dirs = _csv(arguments.log_dirs)
    topics = _csv(arguments.topics)
    try:
        with admin_client(arguments) as admin:
            described = admin.describe_log_dirs(broker_ids, topics=topics)
    except AdminClientError as error:
        raise CliError(str(error)) from None
    print(render(described, log_dirs))
    return 0
