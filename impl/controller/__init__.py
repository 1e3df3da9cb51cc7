"""The controller side: ZooKeeper (embedded server, adapter), controller logic, placement."""

from ._zookeeper_server import EmbeddedZooKeeper as EmbeddedZooKeeper
from ._zookeeper_server import ZooKeeperUnavailableError as ZooKeeperUnavailableError
from ._zookeeper_server import find_free_loopback_port as find_free_loopback_port
from ._zookeeper_server import four_letter_word as four_letter_word

__all__ = [
    "EmbeddedZooKeeper",
    "ZooKeeperUnavailableError",
    "find_free_loopback_port",
    "four_letter_word",
]
