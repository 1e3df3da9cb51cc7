"""A public module without ``MODELS``: ignored."""

from __future__ import annotations

VALUE = 1
