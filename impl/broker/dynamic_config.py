"""Per-broker settings changed live through ZooKeeper, as Kafka's dynamic broker configs.

``/config/brokers/<id>`` holds ``{"version":1,"config":{key: value}}``. The broker watches its
node and applies, without a restart:

* ``replica.alter.log.dirs.io.max.bytes.per.second`` (KIP-113's ``intra.broker.throttled.rate``,
  either name accepted): the bytes per second all log-dir movers share;
* ``num.replica.alter.log.dirs.threads``: how many replicas move at once.

A key removed from the node reverts to the static configuration. The reassignment tool writes
the throttle (``--replica-alter-log-dirs-throttle``) and removes it once every move is complete.

This module is a sans-IO core: it parses and encodes the node's JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__sans_io__ = True

THROTTLE_KEY: Final = "replica.alter.log.dirs.io.max.bytes.per.second"
THROTTLE_KEY_KIP: Final = "intra.broker.throttled.rate"
MOVER_THREADS_KEY: Final = "num.replica.alter.log.dirs.threads"
_THROTTLE_MAX: Final = 2**63 - 1


def config_path(broker_id: int) -> str:
    """The broker's dynamic-config znode."""
    return f"/config/brokers/{broker_id}"


class DynamicConfigError(ValueError):
    """The node holds something the broker cannot use (one line)."""


@dataclass(frozen=True, slots=True)
class DynamicSettings:
    """The dynamic settings present in the node (None: use the static configuration)."""

    throttle_bytes_per_second: int | None = None
    mover_threads: int | None = None


def _positive(key: str, value: object, maximum: int) -> int:
    try:
        number = int(str(value))
    except ValueError:
        raise DynamicConfigError(f"{key}: expected an integer, got {value!r}") from None
    if not 1 <= number <= maximum:
        raise DynamicConfigError(f"{key}: must be in 1..{maximum}, got {number}")
    return number


def parse_config_node(data: bytes) -> dict[str, str]:
    """The ``config`` map of a ``/config/brokers/<id>`` node.

    Raises:
        DynamicConfigError: not JSON, or no ``config`` object.
    """
    try:
        value = json.loads(data.decode() or "{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DynamicConfigError(f"dynamic config is not JSON: {error}") from None
    config = value.get("config", {}) if isinstance(value, dict) else None
    if not isinstance(config, dict):
        raise DynamicConfigError("dynamic config has no 'config' object")
    return {str(key): str(item) for key, item in config.items()}


def settings_of(config: Mapping[str, str]) -> DynamicSettings:
    """The settings this broker applies from a ``config`` map (other keys are ignored).

    Raises:
        DynamicConfigError: a bad value.
    """
    throttle_text = config.get(THROTTLE_KEY, config.get(THROTTLE_KEY_KIP))
    threads_text = config.get(MOVER_THREADS_KEY)
    return DynamicSettings(
        throttle_bytes_per_second=(
            None if throttle_text is None
            else _positive(THROTTLE_KEY, throttle_text, _THROTTLE_MAX)
        ),
        mover_threads=(
            None if threads_text is None else _positive(MOVER_THREADS_KEY, threads_text, 1024)
        ),
    )


def encode_config_node(config: Mapping[str, str]) -> bytes:
    """Kafka's JSON for ``/config/brokers/<id>``."""
    return json.dumps({"version": 1, "config": dict(sorted(config.items()))}).encode()
