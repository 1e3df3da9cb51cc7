"""``logproof cluster up``: ZooKeeper and N brokers with M log dirs each, on loopback.

Without ``--zookeeper`` an embedded ZooKeeper (Debian's package) is started. Each broker is a
child process (``logproof broker``) with its config in ``<data-dir>/broker-<id>/server.properties``
and its log in ``broker.log`` beside it. Every broker serves its Prometheus metrics
(``metrics.port``) on a free loopback port. The command prints each broker's metrics URL and the
bootstrap servers once every broker serves, runs until SIGINT or SIGTERM, then stops the brokers
gracefully (SIGTERM, bounded wait, then SIGKILL) and ZooKeeper.

``--run-as USER`` starts each broker as that user through ``setpriv`` (util-linux), with its
config dir and log dirs owned by the user: a broker run as root ignores file permissions, so this
is how a permission change (``chmod 000`` on a log dir) can fail the broker's I/O as a dead disk
would.

``--security sasl_ssl`` makes the cluster secure in one command: a self-signed CA and a
certificate per broker (``<data-dir>/tls``), an ``admin`` user with a random password stored as
SCRAM-SHA-256/512 credentials in ZooKeeper, brokers listening on SASL_SSL only (clients and
inter-broker traffic, SCRAM-SHA-512 between brokers), ACLs on with ``User:admin`` the super user,
and ``<data-dir>/admin.properties``: the client settings for ``logproof acls|topics
--command-config`` and Kafka's own tools.
"""

from __future__ import annotations

import argparse
import os
import pwd
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from impl.controller import EmbeddedZooKeeper, ZooKeeperUnavailableError, find_free_loopback_port

from ._errors import CliError

START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 30.0


def register(subparsers: Any) -> None:
    """Add the ``cluster`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "cluster", help="run ZooKeeper and N brokers on loopback",
        description="Start a local cluster and run it until interrupted.",
    )
    actions = parser.add_subparsers(title="actions", metavar="ACTION", required=True)
    up = actions.add_parser("up", help="start the cluster and run until interrupted")
    up.add_argument("--brokers", type=int, default=1)
    up.add_argument("--log-dirs-per-broker", type=int, default=2)
    up.add_argument("--zookeeper", default=None, help="HOST:PORT[/chroot] (default: embedded)")
    up.add_argument("--data-dir", type=Path, default=None, help="default: a temporary dir")
    up.add_argument("--base-port", type=int, default=None,
                    help="broker i listens on base+i-1 (default: free ports)")
    up.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker setting for every broker (repeatable)")
    up.add_argument("--security", default="plaintext", choices=["plaintext", "sasl_ssl"],
                    help="sasl_ssl: TLS with a self-signed CA, SCRAM users, ACLs, an admin "
                         "user (default plaintext)")
    up.add_argument("--run-as", default=None, metavar="USER",
                    help="run the brokers as this user (setpriv; needs root); the data dir "
                         "must be reachable by that user")
    up.set_defaults(handler=run)


class Cluster:
    """Brokers as child processes (and an embedded ZooKeeper unless one is given).

    Args:
        run_as: a user name: each broker runs as that user and group (its primary group) through
            ``setpriv --reuid --regid --clear-groups``, and its config dir and log dirs are
            given to it. ``None``: brokers run as the calling user.
    """

    def __init__(self, data_dir: Path, brokers: int, log_dirs_per_broker: int, *,
                 zookeeper: str | None, base_port: int | None, overrides: list[str],
                 run_as: str | None = None, security: str = "plaintext") -> None:
        self.data_dir = data_dir
        self.security = security
        #: the admin's client settings (``--security sasl_ssl``)
        self.admin_properties: Path | None = None
        self._secure_settings = ""
        self.brokers = brokers
        self.log_dirs_per_broker = log_dirs_per_broker
        self.zookeeper_connect = zookeeper
        self.base_port = base_port
        self.overrides = overrides
        self.run_as = run_as
        self.embedded: EmbeddedZooKeeper | None = None
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self.ports: dict[int, int] = {}
        #: each broker's ``metrics.port`` (kept across a restart)
        self.metrics_ports: dict[int, int] = {}

    def start(self) -> str:
        """Start everything; returns the bootstrap servers.

        Raises:
            CliError: ZooKeeper or a broker did not start.
        """
        if self.zookeeper_connect is None:
            self.embedded = EmbeddedZooKeeper(data_dir=self.data_dir / "zookeeper")
            self.embedded.start()
            self.zookeeper_connect = self.embedded.connect_string
        if self.security == "sasl_ssl":
            self._secure()
        for broker_id in range(1, self.brokers + 1):
            port = (self.base_port + broker_id - 1 if self.base_port is not None
                    else find_free_loopback_port())
            self.ports[broker_id] = port
            self._spawn(broker_id, port)
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        for broker_id, process in self.processes.items():
            self._wait_ready(broker_id, process, deadline)
        return self.bootstrap_servers

    def _secure(self) -> None:
        """The CA, the broker certificates, the admin user and its client settings."""
        import trio  # noqa: PLC0415

        from impl.controller._kazoo import KazooCoordinator  # noqa: PLC0415
        from impl.controller.coordinator import CoordinatorError  # noqa: PLC0415
        from impl.security.certificates import create_authority, issue  # noqa: PLC0415
        from impl.security.sasl import make_credential  # noqa: PLC0415

        from .cmd_users import alter_user  # noqa: PLC0415

        tls = self.data_dir / "tls"
        authority = create_authority(tls)
        for broker_id in range(1, self.brokers + 1):
            issue(authority, tls, f"broker-{broker_id}")
        password = secrets.token_urlsafe(18)
        credentials = {mechanism: make_credential(mechanism, password).to_text()
                       for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")}
        assert self.zookeeper_connect is not None
        zookeeper = self.zookeeper_connect

        async def add_admin() -> None:
            coordinator = await KazooCoordinator.connect(zookeeper)
            try:
                await alter_user(coordinator, "admin", credentials, [])
            finally:
                await coordinator.close()

        try:
            trio.run(add_admin)
        except CoordinatorError as error:
            raise CliError(f"cannot store the admin credentials: {error}") from None
        jaas = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="admin" password="{password}";')
        self.admin_properties = self.data_dir / "admin.properties"
        self.admin_properties.touch(mode=0o600)
        self.admin_properties.write_text(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
            f"sasl.jaas.config={jaas}\nssl.truststore.location={authority.path}\n")
        self._secure_settings = (
            f"ssl.truststore.location={authority.path}\n"
            "sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256\n"
            "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512\n"
            f"sasl.jaas.config={jaas}\n"
            "inter.broker.listener.name=SASL_SSL\n"
            "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n"
            "super.users=User:admin\n"
        )

    def metrics_url(self, broker_id: int) -> str:
        """Where ``broker_id`` serves its Prometheus metrics."""
        return f"http://127.0.0.1:{self.metrics_ports[broker_id]}/metrics"

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,…`` of every broker, in broker-id order."""
        return ",".join(f"127.0.0.1:{self.ports[b]}" for b in sorted(self.ports))

    def log_dirs(self, broker_id: int) -> list[Path]:
        """The log dirs of ``broker_id``, in ``log.dirs`` order."""
        home = self.data_dir / f"broker-{broker_id}"
        return [(home / f"logs-{index}").resolve() for index in range(self.log_dirs_per_broker)]

    def _launcher(self) -> list[str]:
        """The command prefix that runs a broker as ``run_as`` (empty: as the caller)."""
        if self.run_as is None:
            return []
        try:
            user = pwd.getpwnam(self.run_as)
        except KeyError:
            raise CliError(f"no such user: {self.run_as}") from None
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise CliError("--run-as needs setpriv (util-linux)")
        return [setpriv, f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]

    def _give(self, paths: list[Path]) -> None:
        """Hand ``paths`` (not their contents) to ``run_as``."""
        if self.run_as is None:
            return
        user = pwd.getpwnam(self.run_as)
        for path in paths:
            os.chown(path, user.pw_uid, user.pw_gid)

    def _spawn(self, broker_id: int, port: int) -> None:
        if broker_id not in self.metrics_ports:
            self.metrics_ports[broker_id] = find_free_loopback_port()
        home = self.data_dir / f"broker-{broker_id}"
        log_dirs = self.log_dirs(broker_id)
        launcher = self._launcher()
        for log_dir in log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
        self._give([home, *log_dirs])
        config = home / "server.properties"
        protocol = "SASL_SSL" if self.security == "sasl_ssl" else "PLAINTEXT"
        secure = ""
        if self.security == "sasl_ssl":
            keystore = (self.data_dir / "tls" / f"broker-{broker_id}.pem").resolve()
            secure = f"ssl.keystore.location={keystore}\n{self._secure_settings}"
        config.touch(mode=0o600)
        config.write_text(
            f"broker.id={broker_id}\n"
            f"listeners={protocol}://127.0.0.1:{port}\n"
            f"metrics.port={self.metrics_ports[broker_id]}\n"
            f"log.dirs={','.join(str(d.resolve()) for d in log_dirs)}\n"
            f"zookeeper.connect={self.zookeeper_connect}\n" + secure
        )
        # the config holds the inter-broker password under --security sasl_ssl: readable by the
        # broker's user only
        given = [config]
        if self.security == "sasl_ssl":
            given.append(self.data_dir / "tls" / f"broker-{broker_id}.pem")
        self._give(given)
        command = [*launcher, sys.executable, "-m", "impl.cli", "broker", "--config",
                   str(config.resolve())]
        for override in self.overrides:
            command += ["--override", override]
        with (home / "broker.log").open("ab") as log_file:
            self.processes[broker_id] = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=log_file, stdin=subprocess.DEVNULL,
                start_new_session=True,
                # Another user's broker works in its own dir: the caller's may not be writable.
                cwd=None if self.run_as is None else home,
            )

    def _wait_ready(self, broker_id: int, process: subprocess.Popen[bytes],
                    deadline: float) -> None:
        stream: IO[bytes] | None = process.stdout
        assert stream is not None
        line = b""
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CliError(f"broker {broker_id} did not start within "
                               f"{START_TIMEOUT_SECONDS:.0f} s (see its broker.log)")
            ready, _, _ = select.select([stream], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(stream.fileno(), 4096)
            if not chunk:
                log = self.data_dir / f"broker-{broker_id}" / "broker.log"
                tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["?"]
                raise CliError(f"broker {broker_id} exited at start-up: {tail[0]}")
            line += chunk

    def restart(self, broker_id: int) -> None:
        """Start a broker that has exited again, on its port, with its config and log dirs.

        Raises:
            CliError: it did not start.
        """
        old = self.processes[broker_id]
        assert old.poll() is not None, f"broker {broker_id} is still running"
        if old.stdout is not None:
            old.stdout.close()
        self._spawn(broker_id, self.ports[broker_id])
        self._wait_ready(broker_id, self.processes[broker_id],
                         time.monotonic() + START_TIMEOUT_SECONDS)

    def stop(self) -> list[int]:
        """Stop brokers (SIGTERM, bounded wait, SIGKILL) then ZooKeeper; returns exit codes."""
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        codes: list[int] = []
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        for process in self.processes.values():
            try:
                codes.append(process.wait(max(deadline - time.monotonic(), 0.1)))
            except subprocess.TimeoutExpired:
                process.kill()
                codes.append(process.wait())
            if process.stdout is not None:
                process.stdout.close()
        if self.embedded is not None:
            self.embedded.stop()
        return codes


def run(arguments: argparse.Namespace) -> int:
    """Start, print the bootstrap servers, wait for a signal, stop."""
    if arguments.brokers < 1 or arguments.log_dirs_per_broker < 1:
        raise CliError("--brokers and --log-dirs-per-broker must be at least 1")
    if arguments.base_port is not None and not (
        arguments.base_port > 0 and arguments.base_port + arguments.brokers - 1 < 65536
    ):
        raise CliError("--base-port leaves no room for the brokers below 65536")
    temporary = arguments.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="logproof-")) if temporary else arguments.data_dir
    if data_dir.exists() and not data_dir.is_dir():
        raise CliError(f"--data-dir {data_dir} is not a directory")
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CliError(f"--data-dir {data_dir}: {error.strerror or error}") from None
    if temporary and arguments.run_as is not None:
        data_dir.chmod(0o755)  # mkdtemp's 0700 would keep the brokers' user out
    cluster = Cluster(data_dir.resolve(), arguments.brokers, arguments.log_dirs_per_broker,
                      zookeeper=arguments.zookeeper, base_port=arguments.base_port,
                      overrides=arguments.override, run_as=arguments.run_as,
                      security=arguments.security)
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        try:
            bootstrap = cluster.start()
        except ZooKeeperUnavailableError as error:
            raise CliError(str(error)) from None
        print(f"zookeeper: {cluster.zookeeper_connect}")
        for broker_id in sorted(cluster.metrics_ports):
            print(f"broker {broker_id} metrics: {cluster.metrics_url(broker_id)}")
        print(f"bootstrap servers: {bootstrap}", flush=True)
        if cluster.admin_properties is not None:
            print(f"security: SASL_SSL, SCRAM-SHA-512; admin client settings: "
                  f"{cluster.admin_properties}", flush=True)
        try:
            while not stop.wait(0.5):
                for broker_id, process in cluster.processes.items():
                    if process.poll() is not None:
                        raise CliError(f"broker {broker_id} exited with {process.returncode}")
        except KeyboardInterrupt:
            pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        codes = cluster.stop()
        if temporary:
            shutil.rmtree(data_dir, ignore_errors=True)
    print(f"stopped {len(codes)} broker(s)", flush=True)
    return 0 if all(code == 0 for code in codes) else 1
