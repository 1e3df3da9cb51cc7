"""The embedded ZooKeeper is the real server: kazoo creates, reads, watches and deletes."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.protocol.states import WatchedEvent

from impl.controller import EmbeddedZooKeeper, ZooKeeperUnavailableError, four_letter_word

pytestmark = pytest.mark.integration


def _client(connect_string: str) -> KazooClient:
    client = KazooClient(hosts=connect_string, timeout=10.0)
    client.start(timeout=10.0)
    return client


def test_server_is_real_zookeeper(zookeeper: EmbeddedZooKeeper) -> None:
    assert zookeeper.is_running()
    status = four_letter_word(zookeeper.host, zookeeper.port, "srvr")
    assert "Zookeeper version: 3." in status
    assert "Mode: standalone" in status


def test_create_read_set_delete(zk_chroot: str) -> None:
    client = _client(zk_chroot)
    try:
        client.create("/brokers/ids/1", b'{"host":"127.0.0.1"}', makepath=True)
        data, stat = client.get("/brokers/ids/1")
        assert data == b'{"host":"127.0.0.1"}'
        assert stat.version == 0
        client.set("/brokers/ids/1", b"v2", version=0)
        assert client.get("/brokers/ids/1")[1].version == 1
        with pytest.raises(NodeExistsError):
            client.create("/brokers/ids/1", b"again")
        client.delete("/brokers/ids/1")
        with pytest.raises(NoNodeError):
            client.get("/brokers/ids/1")
    finally:
        client.stop()
        client.close()


def test_watch_fires_once_on_change(zk_chroot: str) -> None:
    client = _client(zk_chroot)
    try:
        client.create("/controller_epoch", b"0", makepath=True)
        fired: list[WatchedEvent] = []
        changed = threading.Event()

        def watcher(event: WatchedEvent) -> None:
            fired.append(event)
            changed.set()

        client.get("/controller_epoch", watch=watcher)
        client.set("/controller_epoch", b"1")
        assert changed.wait(10.0)
        client.set("/controller_epoch", b"2")
        client.sync("/controller_epoch")
        assert [event.type for event in fired] == ["CHANGED"]
    finally:
        client.stop()
        client.close()


def test_multi_is_atomic(zk_chroot: str) -> None:
    client = _client(zk_chroot)
    try:
        client.create("/controller_epoch", b"0", makepath=True)
        transaction = client.transaction()
        transaction.check("/controller_epoch", 7)
        transaction.create("/controller", b"zombie")
        results = transaction.commit()
        assert any(isinstance(result, Exception) for result in results)
        assert client.exists("/controller") is None
    finally:
        client.stop()
        client.close()


def test_ephemeral_node_vanishes_when_session_closes(zk_chroot: str) -> None:
    owner = _client(zk_chroot)
    observer = _client(zk_chroot)
    try:
        owner.create("/controller", b'{"brokerid":1}', ephemeral=True, makepath=True)
        assert observer.exists("/controller") is not None
        gone = threading.Event()

        def watcher(event: WatchedEvent) -> None:
            if event.type == "DELETED":
                gone.set()

        observer.exists("/controller", watch=watcher)
        owner.stop()
        owner.close()
        assert gone.wait(10.0)
        assert observer.exists("/controller") is None
    finally:
        observer.stop()
        observer.close()


def test_missing_jar_gives_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import impl.controller._zookeeper_server as server_module

    monkeypatch.setattr(server_module, "ZOOKEEPER_JAR_PATH", tmp_path / "absent.jar")
    with pytest.raises(ZooKeeperUnavailableError, match="apt-get install zookeeper"):
        EmbeddedZooKeeper(data_dir=tmp_path / "zk").start()


def test_stop_removes_temporary_data_dir() -> None:
    server = EmbeddedZooKeeper().start()
    data_dir = server.data_dir
    assert data_dir.is_dir()
    server.stop()
    assert not server.is_running()
    assert not data_dir.exists()
