"""``logproof configs --describe|--alter``: topic and broker configs, as ``kafka-configs.sh``.

``--entity-type topics|brokers`` with ``--entity-name X`` or (brokers) ``--entity-default``
(the cluster-wide ``<default>`` entity). ``--describe`` prints the dynamic configs (``--all``:
every config with its value) with their synonyms; without an entity name it describes every
topic or every live broker. ``--alter`` applies ``--add-config k=v,k2=[a,b]`` (SET; brackets
hold a list value's commas) and ``--delete-config k,k2`` (DELETE) in one
IncrementalAlterConfigs request. Refusals (INVALID_CONFIG naming the key ...) are printed as
one line with exit status 1.
"""

from __future__ import annotations

import argparse
from typing import Any

from impl.broker.admin import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    AdminClient,
    AdminClientError,
    ConfigEntryInfo,
    error_name,
)

from ._errors import CliError
from ._security import add_security_arguments, admin_client

SET = 0
DELETE = 1
#: Sources a plain ``--describe`` shows (kafka-configs.sh shows the dynamic ones).
_DYNAMIC_SOURCES = frozenset({"DYNAMIC_TOPIC_CONFIG", "DYNAMIC_BROKER_CONFIG",
                              "DYNAMIC_DEFAULT_BROKER_CONFIG"})


def register(subparsers: Any) -> None:
    """Add the ``configs`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "configs", help="describe or alter topic and broker configs (kafka-configs.sh)",
        description=(
            "Describe or alter the dynamic configs of a topic, a broker, or the cluster-wide "
            "broker default, in the shape of Kafka's kafka-configs.sh."
        ),
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--describe", action="store_true", help="list configs")
    mode.add_argument("--alter", action="store_true", help="add or delete configs")
    parser.add_argument("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT]")
    parser.add_argument("--entity-type", required=True, choices=("topics", "brokers"),
                        help="topics or brokers")
    entity = parser.add_mutually_exclusive_group()
    entity.add_argument("--entity-name", default=None, help="a topic name or a broker id")
    entity.add_argument("--entity-default", action="store_true",
                        help="the cluster-wide default broker config (brokers only)")
    parser.add_argument("--add-config", default=None, metavar="K=V,...",
                        help="configs to set: k1=v1,k2=[v2a,v2b]")
    parser.add_argument("--delete-config", default=None, metavar="K,...",
                        help="configs to remove (they revert to the next layer)")
    parser.add_argument("--all", action="store_true",
                        help="with --describe: every config, not only the dynamic ones")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds (default 30)")
    add_security_arguments(parser)
    parser.set_defaults(handler=run)


def parse_add_config(text: str) -> list[tuple[str, str]]:
    """``k1=v1,k2=[a,b]`` → ``[("k1", "v1"), ("k2", "a,b")]``.

    Raises:
        CliError: an item without ``=``, an empty key, or an unclosed ``[``.
    """
    items: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        equals = text.find("=", position)
        if equals < 0:
            raise CliError(f"--add-config: expected key=value, got {text[position:]!r}")
        key = text[position:equals].strip()
        if not key or "," in key:
            raise CliError(f"--add-config: expected key=value, got {text[position:]!r}")
        start = equals + 1
        if text.startswith("[", start):
            close = text.find("]", start)
            if close < 0:
                raise CliError(f"--add-config: unclosed '[' in the value of {key}")
            value = text[start + 1:close]
            position = close + 1
            if position < len(text) and text[position] != ",":
                raise CliError(f"--add-config: expected ',' after the value of {key}")
            position += 1
        else:
            comma = text.find(",", start)
            end = len(text) if comma < 0 else comma
            value = text[start:end]
            position = end + 1
        items.append((key, value.strip()))
    return items


def _entities(admin: AdminClient, arguments: argparse.Namespace) -> list[str]:
    if arguments.entity_default:
        return [""]
    if arguments.entity_name is not None:
        return [arguments.entity_name]
    metadata = admin.metadata()
    if arguments.entity_type == "topics":
        return sorted(metadata.topics)
    return [str(broker_id) for broker_id in sorted(metadata.brokers)]


def _title(arguments: argparse.Namespace, name: str) -> str:
    kind = "topic" if arguments.entity_type == "topics" else "broker"
    scope = "All" if arguments.all else "Dynamic"
    if not name:
        return f"{'All' if arguments.all else 'Default'} configs for brokers in the cluster are:"
    return f"{scope} configs for {kind} {name} are:"


def render_entry(entry: ConfigEntryInfo) -> str:
    """One line as kafka-configs.sh prints it."""
    value = "null" if entry.value is None else entry.value
    synonyms = ", ".join(f"{source}:{name}={'null' if v is None else v}"
                         for name, v, source in entry.synonyms)
    return (f"  {entry.name}={value} sensitive={str(entry.sensitive).lower()} "
            f"synonyms={{{synonyms}}}")


def _describe(admin: AdminClient, arguments: argparse.Namespace) -> int:
    resource = TOPIC_RESOURCE if arguments.entity_type == "topics" else BROKER_RESOURCE
    for name in _entities(admin, arguments):
        code, message, entries = admin.describe_configs(resource, name)
        if code != 0:
            raise CliError(f"cannot describe {arguments.entity_type} {name or '<default>'}: "
                           f"{error_name(code)}: {message or ''}".rstrip(": "))
        print(_title(arguments, name))
        for entry in sorted(entries, key=lambda e: e.name):
            if arguments.all or entry.source in _DYNAMIC_SOURCES:
                print(render_entry(entry))
    return 0


def _alter(admin: AdminClient, arguments: argparse.Namespace) -> int:
    if arguments.entity_name is None and not arguments.entity_default:
        raise CliError("--alter needs --entity-name or --entity-default")
    operations: list[tuple[str, int, str | None]] = []
    if arguments.add_config:
        operations += [(key, SET, value) for key, value in parse_add_config(arguments.add_config)]
    if arguments.delete_config:
        operations += [(key.strip(), DELETE, None)
                       for key in arguments.delete_config.split(",") if key.strip()]
    if not operations:
        raise CliError("--alter needs --add-config or --delete-config")
    resource = TOPIC_RESOURCE if arguments.entity_type == "topics" else BROKER_RESOURCE
    name = "" if arguments.entity_default else arguments.entity_name
    code, message = admin.incremental_alter_configs(resource, name, operations)
    if code != 0:
        raise CliError(f"{error_name(code)}: {message or 'refused'}")
    if not name:
        print("Completed updating default config for brokers in the cluster.")
    else:
        kind = "topic" if arguments.entity_type == "topics" else "broker"
        print(f"Completed updating config for {kind} {name}.")
    return 0


def run(arguments: argparse.Namespace) -> int:
    """Describe or alter configs."""
    if arguments.entity_default and arguments.entity_type != "brokers":
        raise CliError("--entity-default applies to --entity-type brokers only")
    if arguments.describe and (arguments.add_config or arguments.delete_config):
        raise CliError("--add-config and --delete-config go with --alter")
    try:
        with admin_client(arguments) as admin:
            if arguments.describe:
                return _describe(admin, arguments)
            return _alter(admin, arguments)
    except AdminClientError as error:
        raise CliError(str(error)) from None
