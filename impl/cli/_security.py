"""``--command-config FILE``: the client security settings of the administration commands.

The file holds Kafka client properties (``security.protocol``, ``sasl.mechanism``,
``sasl.jaas.config`` or ``sasl.username``/``sasl.password``, ``ssl.truststore.location``, …),
as ``kafka-acls.sh --command-config`` and ``kafka-configs.sh --command-config`` read them.
"""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

from impl.broker.admin import AdminClient
from impl.broker.config import ConfigError, parse_properties
from impl.controller.placement.client import Connector, PlacementClientError
from impl.security.client import AuthenticationError, open_socket
from impl.security.config import ClientSecurity, SecurityConfigError, parse_client_properties

from ._errors import CliError


def add_security_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--command-config``."""
    parser.add_argument("--command-config", default=None, metavar="FILE",
                        help="client properties: security.protocol, sasl.mechanism, "
                             "sasl.jaas.config, ssl.truststore.location, ...")


def client_security(arguments: argparse.Namespace) -> ClientSecurity | None:
    """The settings of ``--command-config`` (None: PLAINTEXT).

    Raises:
        CliError: the file cannot be read or holds a bad setting.
    """
    path = getattr(arguments, "command_config", None)
    if path is None:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise CliError(f"--command-config: cannot read {path}: {error.strerror}") from None
    try:
        return parse_client_properties(parse_properties(text))
    except (SecurityConfigError, ConfigError) as error:
        raise CliError(f"--command-config {path}: {error}") from None


def admin_client(arguments: argparse.Namespace, *,
                 timeout_seconds: float | None = None) -> AdminClient:
    """An :class:`AdminClient` for ``--bootstrap-server`` with ``--command-config``; its
    request timeout is ``--timeout`` unless ``timeout_seconds`` is given."""
    return AdminClient(arguments.bootstrap_server,
                       timeout_seconds=arguments.timeout if timeout_seconds is None
                       else timeout_seconds,
                       security=client_security(arguments))


def placement_connector(arguments: argparse.Namespace) -> Connector:
    """Opens the placement client's connection with ``--command-config``'s TLS and SASL.

    Raises (when called):
        OSError: the connection failed.
        PlacementClientError: TLS or SASL refused.
    """
    security = client_security(arguments)

    def connect(host: str, port: int, timeout_seconds: float) -> socket.socket:
        try:
            return open_socket(host, port, security, timeout_seconds)
        except AuthenticationError as error:
            raise PlacementClientError(f"{host}:{port}: {error}") from None

    return connect
