"""Readable renderings of an invariant report for the terminal (rich).

:func:`report_renderables` yields, in order: the summary table (one row per model, variant and
invariant with status, expectation, depth, time and solver statistics), one step-by-step table per
counterexample (the actions and the variables each one changed, the broken invariant named at the
last step), the witnesses, and what does not meet its expectations; the commands print them.
"""

from __future__ import annotations

from collections.abc import Iterator

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ._dsl import Status
from ._report import InvariantResult, Report, Trace, VariantResult

__sans_io__ = True

_STYLE = {
    Status.PROVED: "bold green",
    Status.HOLDS: "yellow",
    Status.VIOLATED: "bold red",
    Status.UNKNOWN: "magenta",
}


def _statistics_text(result: InvariantResult) -> str:
    statistics = result.statistics
    conflicts = statistics.get("sat conflicts", statistics.get("conflicts", 0.0))
    decisions = statistics.get("sat decisions", statistics.get("decisions", 0.0))
    queries = statistics.get("queries", 0.0)
    return f"{queries:.0f} q, {conflicts:.0f} confl, {decisions:.0f} dec"


def summary_table(report: Report) -> Table:
    """One row per (model, variant, invariant)."""
    table = Table(title="logproof check: invariants", title_justify="left", show_lines=False)
    for column in ("model", "variant", "invariant", "status", "expected", "depth", "time",
                   "solver"):
        if column in ("depth", "time"):
            table.add_column(column, justify="right", no_wrap=True)
        else:
            table.add_column(column, justify="left", no_wrap=column != "solver")
    for variant in report.results:
        label = variant.variant if variant.shipped else f"{variant.variant} (known-bad)"
        for index, result in enumerate(variant.invariants):
            expected = "" if result.expected is None else result.expected.value
            marker = "" if result.kind == "safety" else " (lemma)"
            table.add_row(
                variant.model if index == 0 else "",
                label if index == 0 else "",
                result.name + marker,
                Text(result.status_text, style=_STYLE[result.status]),
                expected,
                str(result.depth),
                f"{result.seconds:.2f}s",
                _statistics_text(result),
            )
        if not variant.invariants:
            table.add_row(variant.model, label, "-", Text("error", style="bold red"), "", "",
                          "", "")
        table.add_section()
    return table


def trace_table(trace: Trace, title: str) -> Table:
    """A trace as a step-by-step table: the action and what it changed."""
    table = Table(title=title, title_justify="left")
    table.add_column("step", justify="right")
    table.add_column("action")
    table.add_column("changed (before → after)")
    first = trace.steps[0]
    table.add_row("0", Text("initial state", style="dim"),
                  ", ".join(f"{name}={value}" for name, value in first.state.items()))
    for step in trace.steps[1:]:
        changes = ", ".join(f"{name}: {before} → {after}"
                            for name, before, after in step.changes) or "(nothing)"
        action = Text(step.action or "")
        if step.index == trace.length:
            action.append(f"   ⇒ {trace.target}", style="bold red")
        table.add_row(str(step.index), action, changes)
    if not trace.replayed:
        table.caption = "the concrete model does NOT replay this trace"
    return table


def _counterexamples(variant: VariantResult) -> Iterator[RenderableType]:
    for result in variant.invariants:
        if result.counterexample is None or result.kind != "safety":
            continue
        title = (f"{variant.model}/{variant.variant}: invariant {result.name} is violated "
                 f"after {result.counterexample.length} steps")
        yield trace_table(result.counterexample, title)


def _witnesses(report: Report) -> Table:
    table = Table(title="reachability witnesses", title_justify="left")
    table.add_column("model")
    table.add_column("variant")
    table.add_column("witness")
    table.add_column("reached")
    for variant in report.results:
        for witness in variant.witnesses:
            reached = (Text(f"at depth {witness.depth}", style="green") if witness.reached
                       else Text(f"not within depth {witness.depth}", style="bold red"))
            table.add_row(variant.model, variant.variant, witness.name, reached)
    return table


def report_renderables(report: Report, traces: bool = True) -> Iterator[RenderableType]:
    """Everything to print for a report, in order.

    Args:
        report: the report.
        traces: include the counterexample tables.

    Returns:
        An iterator of rich renderables.
    """
    yield summary_table(report)
    if traces:
        for variant in report.results:
            yield from _counterexamples(variant)
    yield _witnesses(report)
    problems = [f"{variant.model}/{variant.variant}: {problem}"
                for variant in report.results for problem in variant.problems()]
    lines = [Text(problem, style="bold red") for problem in problems]
    shipped = sum(1 for variant in report.results if variant.shipped)
    refuted = sum(1 for variant in report.results if not variant.shipped and variant.ok)
    bad = sum(1 for variant in report.results if not variant.shipped)
    verdict = "OK" if report.ok else "FAILED"
    lines.append(Text(
        f"{verdict}: {len(report.results)} variants ({shipped} shipped, {refuted}/{bad} "
        f"known-bad refuted as expected) in {report.seconds:.1f}s, {report.solver}, "
        f"seed {report.seed}",
        style="bold green" if report.ok else "bold red",
    ))
    yield Group(*lines)
