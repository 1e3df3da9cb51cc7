"""A public module with ``MODELS``: discovered."""

from __future__ import annotations

from tests.model._lockserv import LOCKSERV

MODELS = (LOCKSERV,)
