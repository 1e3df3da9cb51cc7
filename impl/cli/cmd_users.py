"""``logproof users``: SCRAM credentials in ZooKeeper, in the shape of ``kafka-configs.sh``.

Examples::

    logproof users --zookeeper localhost:2181 --entity-type users --entity-name alice \\
        --alter --add-config 'SCRAM-SHA-256=[password=secret],SCRAM-SHA-512=[password=secret]'
    logproof users --zookeeper localhost:2181 --entity-name alice --alter \\
        --delete-config SCRAM-SHA-256
    logproof users --zookeeper localhost:2181 --describe [--entity-name alice]

Credentials are stored as Kafka stores them (KIP-84): ``/config/users/<user>`` holds
``{"version":1,"config":{"SCRAM-SHA-512":"salt=…,stored_key=…,server_key=…,iterations=4096"}}``
and each change adds a ``/config/changes/config_change_<seq>`` notification. Passwords are never
stored or printed; brokers read the credential at each login.
"""

from __future__ import annotations

import argparse
import contextlib
import re
from typing import Any

import trio

from impl.security.sasl import (
    CONFIG_CHANGE_PREFIX,
    CONFIG_CHANGES_ROOT,
    ITERATIONS_MIN,
    SCRAM_MECHANISMS,
    USERS_CONFIG_ROOT,
    CredentialError,
    decode_user_config,
    encode_user_change,
    encode_user_config,
    make_credential,
    user_config_path,
)

from ._errors import CliError

#: One ``MECHANISM=[key=value,…]`` item of ``--add-config``.
_ITEM = re.compile(r"\s*(SCRAM-SHA-(?:256|512))\s*=\s*\[([^\]]*)\]\s*(?:,|$)")
#: Compare-and-set attempts against concurrent writers.
ATTEMPTS_MAX = 20


def register(subparsers: Any) -> None:
    """Add the ``users`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "users", help="add, remove or describe SCRAM credentials (kafka-configs.sh shape)",
        description="Manage SCRAM-SHA-256/512 credentials stored in ZooKeeper.",
    )
    parser.add_argument("--zookeeper", required=True, help="HOST:PORT[/chroot]")
    parser.add_argument("--entity-type", default="users", choices=["users"])
    parser.add_argument("--entity-name", default=None, help="the user")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true")
    action.add_argument("--describe", action="store_true")
    parser.add_argument("--add-config", default=None,
                        help="'SCRAM-SHA-512=[password=...]' or "
                             "'SCRAM-SHA-256=[iterations=8192,password=...]', comma-separated")
    parser.add_argument("--delete-config", default=None,
                        help="mechanisms to remove, comma-separated")
    parser.set_defaults(handler=_run)


def parse_add_config(text: str) -> dict[str, tuple[str, int]]:
    """``--add-config``: mechanism → (password, iterations).

    Raises:
        CliError: not of the form ``MECHANISM=[password=…]``.
    """
    found: dict[str, tuple[str, int]] = {}
    position = 0
    while position < len(text):
        match = _ITEM.match(text, position)
        if match is None:
            raise CliError(f"--add-config: expected SCRAM-SHA-256=[password=...] or "
                           f"SCRAM-SHA-512=[password=...], got {text[position:]!r}")
        position = match.end()
        options = dict(part.split("=", 1) for part in match.group(2).split(",") if "=" in part)
        unknown = set(options) - {"password", "iterations"}
        if unknown or "password" not in options:
            raise CliError(f"--add-config: {match.group(1)} takes password= and optionally "
                           "iterations=")
        try:
            iterations = int(options.get("iterations", ITERATIONS_MIN))
        except ValueError:
            raise CliError("--add-config: iterations must be an integer") from None
        found[match.group(1)] = (options["password"], iterations)
    if not found:
        raise CliError("--add-config: nothing to add")
    return found


async def alter_user(coordinator: Any, user: str, credentials: dict[str, str],
                     deletions: list[str]) -> None:
    """Set ``credentials`` (mechanism → Kafka's credential text) and remove ``deletions`` in
    ``/config/users/<user>`` with a compare-and-set, then notify ``/config/changes``.

    Raises:
        CliError: a deleted mechanism is absent, or too many concurrent writers.
    """
    from impl.controller.coordinator import (  # noqa: PLC0415
        BadVersionError,
        NodeExistsError,
        NoNodeError,
    )

    async def ensure(path: str) -> None:
        current = ""
        for part in (part for part in path.split("/") if part):
            current = f"{current}/{part}"
            with contextlib.suppress(NodeExistsError):
                await coordinator.create(current)

    path = user_config_path(user)
    await ensure(USERS_CONFIG_ROOT)
    await ensure(CONFIG_CHANGES_ROOT)
    for _ in range(ATTEMPTS_MAX):
        try:
            data, stat = await coordinator.get(path)
            config, version = decode_user_config(data), stat.version
        except NoNodeError:
            config, version = {}, -1
        missing = [mechanism for mechanism in deletions if mechanism not in config]
        if missing:
            raise CliError(f"--delete-config: {user} has no {missing[0]} credential")
        for mechanism in deletions:
            config.pop(mechanism)
        config.update(credentials)
        try:
            if version < 0:
                await coordinator.create(path, encode_user_config(config))
            else:
                await coordinator.set(path, encode_user_config(config), version=version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue
        await coordinator.create(f"{CONFIG_CHANGES_ROOT}/{CONFIG_CHANGE_PREFIX}",
                                 encode_user_change(user), sequential=True)
        return
    raise CliError(f"could not update {path}: too many concurrent writers")


def _run(arguments: argparse.Namespace) -> int:
    from impl.controller._kazoo import KazooCoordinator  # noqa: PLC0415
    from impl.controller.coordinator import CoordinatorError, NoNodeError  # noqa: PLC0415

    if arguments.alter:
        if not arguments.entity_name:
            raise CliError("--alter needs --entity-name")
        if not arguments.add_config and not arguments.delete_config:
            raise CliError("--alter needs --add-config or --delete-config")
        if "/" in arguments.entity_name:
            raise CliError("--entity-name must not contain '/'")
    additions = parse_add_config(arguments.add_config) if arguments.add_config else {}
    deletions = [item.strip().upper() for item in (arguments.delete_config or "").split(",")
                 if item.strip()]
    for mechanism in deletions:
        if mechanism not in SCRAM_MECHANISMS:
            raise CliError(f"--delete-config: unknown mechanism {mechanism!r}")
    try:
        credentials = {mechanism: make_credential(mechanism, password, iterations).to_text()
                       for mechanism, (password, iterations) in additions.items()}
    except CredentialError as error:
        raise CliError(f"--add-config: {error}") from None

    async def alter(coordinator: Any) -> None:
        await alter_user(coordinator, arguments.entity_name, credentials, deletions)
        print(f"Completed updating config for user {arguments.entity_name}.")

    async def describe(coordinator: Any) -> None:
        try:
            users = ([arguments.entity_name] if arguments.entity_name
                     else sorted(await coordinator.children(USERS_CONFIG_ROOT)))
        except NoNodeError:
            users = []
        for user in users:
            try:
                data, _ = await coordinator.get(user_config_path(user))
            except NoNodeError:
                continue
            config = decode_user_config(data)
            shown = []
            for mechanism in SCRAM_MECHANISMS:
                if mechanism in config:
                    iterations = config[mechanism].rsplit("iterations=", 1)[-1]
                    shown.append(f"{mechanism}=iterations={iterations}")
            print(f"SCRAM credential configs for user-principal '{user}' are "
                  f"{', '.join(shown) or 'none'}")

    async def main() -> None:
        coordinator = await KazooCoordinator.connect(arguments.zookeeper)
        try:
            await (alter(coordinator) if arguments.alter else describe(coordinator))
        finally:
            await coordinator.close()

    try:
        trio.run(main)
    except (CoordinatorError, ValueError) as error:
        raise CliError(f"users: {error}") from None
    return 0
