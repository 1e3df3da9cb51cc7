"""Printing rich renderables (tables) on standard output, whole when it is not a terminal.

rich sizes a console to the terminal, and to 80 columns when standard output is a pipe or a
file, so a table printed into a log or CI output had its cells cut (``replica_mo…``). On a
terminal the console keeps the terminal's width (rich wraps to it); elsewhere each renderable
is printed at its own natural width, measured first, so nothing is cut or wrapped.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TextIO

from rich.console import Console, RenderableType
from rich.measure import Measurement

#: the narrowest width used off a terminal (text lines wrap here, as in a plain log)
PLAIN_MIN_WIDTH = 120
#: a width no table reaches, used only to measure natural widths
_UNBOUNDED_WIDTH = 1 << 16


def print_renderables(renderables: Iterable[RenderableType], file: TextIO | None = None) -> None:
    """Print each renderable: wrapped to the terminal, or at full width when piped."""
    out = file if file is not None else sys.stdout
    terminal = Console(file=out)
    if terminal.is_terminal:
        for renderable in renderables:
            terminal.print(renderable)
        return
    measuring = Console(file=out, width=_UNBOUNDED_WIDTH)
    for renderable in renderables:
        natural = Measurement.get(measuring, measuring.options, renderable).maximum
        width = max(PLAIN_MIN_WIDTH, natural)
        Console(file=out, width=width, no_color=True, soft_wrap=False).print(renderable)
