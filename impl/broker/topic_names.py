"""Kafka's topic-name rules (``org.apache.kafka.common.internals.Topic.validate``).

A name is 1 to 249 characters from ``[a-zA-Z0-9._-]`` and is neither ``.`` nor ``..``. Because the
name becomes a directory (``<topic>-<partition>``) under a log dir, this check is what keeps a
request from naming a path: a bad name is answered with INVALID_TOPIC_EXCEPTION (17) and never
reaches the storage engine.

This module is a sans-IO core.
"""

from __future__ import annotations

import re
from typing import Final

__sans_io__ = True

MAX_NAME_LENGTH: Final = 249
_LEGAL: Final = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_error(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name, or None if it is.

    Args:
        name: the name from a request (None when the request carried a null string).

    Returns:
        A one-line reason, or None.
    """
    if name is None or name == "":
        return "topic name is empty"
    if name in {".", ".."}:
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is longer than {MAX_NAME_LENGTH} characters"
    if _LEGAL.fullmatch(name) is None:
        return f"topic name {name!r} has characters outside [a-zA-Z0-9._-]"
    return None


def is_valid_topic_name(name: str | None) -> bool:
    """Whether ``name`` passes :func:`topic_name_error`."""
    return topic_name_error(name) is None
