"""``logproof users``: SCRAM credentials, in the shape of ``kafka-configs.sh``.

Examples::

    logproof users --bootstrap-server localhost:9092 --command-config admin.properties \
        --entity-type users --entity-name alice \
        --alter --add-config 'SCRAM-SHA-256=[password=secret],SCRAM-SHA-512=[password=secret]'
    logproof users --bootstrap-server localhost:9092 --command-config admin.properties \
        --entity-name alice --alter --delete-config SCRAM-SHA-256
    logproof users --bootstrap-server localhost:9092 --describe [--entity-name alice]
    logproof users --zookeeper localhost:2181 --entity-name admin --alter \
        --add-config 'SCRAM-SHA-512=[password=secret]'

Through a broker (``--bootstrap-server``) the command uses AlterUserScramCredentials and
DescribeUserScramCredentials (KIP-554): the password is salted here and only the salted password
is sent; the principal needs ALTER (or DESCRIBE) on the cluster. ``--zookeeper`` writes
ZooKeeper directly, as ``kafka-configs.sh --zookeeper`` does, to create the first users before
any broker runs (the brokers' own inter-broker user). Either way credentials are stored as
Kafka stores them (KIP-84): ``/config/users/<user>`` holds
``{"version":1,"config":{"SCRAM-SHA-512":"salt=…,stored_key=…,server_key=…,iterations=4096"}}``
and each change adds a ``/config/changes/config_change_<seq>`` notification. Passwords are never
stored or printed; brokers read the credential at each login.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

import trio

from impl.security.sasl import (
    ITERATIONS_MIN,
    SCRAM_MECHANISMS,
    CredentialError,
    make_credential,
)

from ._errors import CliError
from ._security import add_security_arguments, admin_client

#: One ``MECHANISM=[key=value,…]`` item of ``--add-config``.
_ITEM = re.compile(r"\s*(SCRAM-SHA-(?:256|512))\s*=\s*\[([^\]]*)\]\s*(?:,|$)")


def register(subparsers: Any) -> None:
    """Add the ``users`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "users", help="add, remove or describe SCRAM credentials (kafka-configs.sh shape)",
        description="Manage SCRAM-SHA-256/512 credentials stored in ZooKeeper.",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap-server", default=None, help="HOST:PORT[,HOST:PORT]: "
                       "through a broker (AlterUserScramCredentials, KIP-554)")
    where.add_argument("--zookeeper", default=None, help="HOST:PORT[/chroot]: write ZooKeeper "
                       "directly (before any broker runs)")
    add_security_arguments(parser)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds (default 30)")
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
    ``/config/users/<user>`` directly (:func:`impl.security.credential_store.update_user`).

    Raises:
        CliError: a deleted mechanism is absent, the node is malformed, or too many concurrent
            writers.
    """
    from impl.security.credential_store import (  # noqa: PLC0415
        CredentialStoreError,
        update_user,
    )
    from impl.security.scram_credentials import UserChange  # noqa: PLC0415

    change = UserChange(user, credentials, tuple(deletions))
    try:
        refused = await update_user(coordinator, user, change.apply)
    except CredentialStoreError as error:
        raise CliError(str(error)) from None
    if refused is not None:
        raise CliError(f"--delete-config: {user}: {refused[1]}")


def _describe_line(user: str, credentials: Any) -> str:
    shown = [f"{mechanism}=iterations={iterations}" for mechanism, iterations in credentials]
    return (f"SCRAM credential configs for user-principal '{user}' are "
            f"{', '.join(shown) or 'none'}")


def _run_through_broker(arguments: argparse.Namespace,
                        additions: dict[str, tuple[str, int]], deletions: list[str]) -> int:
    from impl.broker.admin import AdminClientError, error_name  # noqa: PLC0415

    try:
        with admin_client(arguments) as admin:
            if arguments.alter:
                user = arguments.entity_name
                results = admin.alter_user_scram_credentials(
                    [(user, mechanism, password, iterations)
                     for mechanism, (password, iterations) in additions.items()],
                    [(user, mechanism) for mechanism in deletions])
                code, message = results.get(user, (0, None))
                if code != 0:
                    raise CliError(f"altering the credentials of {user}: {error_name(code)}"
                                   + (f" ({message})" if message else ""))
                print(f"Completed updating config for user {user}.")
                return 0
            users = [arguments.entity_name] if arguments.entity_name else None
            code, message, described = admin.describe_user_scram_credentials(users)
    except AdminClientError as error:
        raise CliError(f"users: {error}") from None
    if code != 0:
        raise CliError(f"describing credentials: {error_name(code)}"
                       + (f" ({message})" if message else ""))
    for item in described:
        if item.error_code == 0:
            print(_describe_line(item.user, item.credentials))
    return 0


def _run(arguments: argparse.Namespace) -> int:
    from impl.controller._kazoo import KazooCoordinator  # noqa: PLC0415
    from impl.controller.coordinator import CoordinatorError  # noqa: PLC0415

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

    if arguments.bootstrap_server:
        return _run_through_broker(arguments, additions, deletions)

    async def alter(coordinator: Any) -> None:
        await alter_user(coordinator, arguments.entity_name, credentials, deletions)
        print(f"Completed updating config for user {arguments.entity_name}.")

    async def describe(coordinator: Any) -> None:
        from impl.security.credential_store import read_users  # noqa: PLC0415
        from impl.security.scram_credentials import MECHANISM_NAMES, describe  # noqa: PLC0415

        users = [arguments.entity_name] if arguments.entity_name else None
        for item in describe(users, await read_users(coordinator, users)):
            if item.error_code == 0:
                print(_describe_line(item.user, [(MECHANISM_NAMES[mechanism], iterations)
                                                 for mechanism, iterations in item.credentials]))

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
