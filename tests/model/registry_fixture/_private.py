"""A private module: never scanned, even with ``MODELS``."""

from __future__ import annotations

MODELS = ("not a definition",)
