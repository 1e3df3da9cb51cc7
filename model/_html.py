"""An invariant report as one self-contained HTML page (inline CSS and SVG, no external assets).

Each counterexample is drawn as a timeline: one column per step (headed by the action taken),
one band per array index (per dir, per replica …) holding that index's variables, and one band
for the scalar variables; a cell is highlighted where the step changed it, and the last column
names the broken invariant. Only variables that change somewhere in the trace are drawn; the
complete initial state is listed under the drawing.
"""

from __future__ import annotations

import html
import re

from ._dsl import Status
from ._report import InvariantResult, Report, Trace, VariantResult

__sans_io__ = True

_CELL_WIDTH = 118
_CELL_HEIGHT = 22
_LABEL_WIDTH = 190
_HEADER_HEIGHT = 66
_BAND_GAP = 10
_KEY = re.compile(r"^(?P<name>[^\[]+)\[(?P<key>[^\]]+)\]$")

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#1d2330}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px}
h3{font-size:15px;margin:18px 0 6px}
.meta{color:#5a6272;font-size:13px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
td,th{border:1px solid #d9dde5;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f1f3f7}
.proved{color:#17753a;font-weight:600}.holds{color:#9a6a00}
.violated{color:#b3261e;font-weight:600}.unknown{color:#7b3fa0}
.ok{color:#17753a;font-weight:700}.bad{color:#b3261e;font-weight:700}
.problem{color:#b3261e}
details{margin:4px 0 10px}summary{cursor:pointer;color:#33507a}
svg text{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:11px}
.state{font-family:ui-monospace,monospace;font-size:12px;color:#3b4250}
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _status_class(status: Status) -> str:
    return status.value


def _lanes(trace: Trace) -> list[tuple[str, list[str]]]:
    """Bands of variables: scalars first, then one band per array key, changed ones only."""
    changed: list[str] = []
    for step in trace.steps[1:]:
        for name, _before, _after in step.changes:
            if name not in changed:
                changed.append(name)
    order = list(trace.steps[0].state)
    changed.sort(key=order.index)
    scalars = [name for name in changed if _KEY.match(name) is None]
    bands: dict[str, list[str]] = {}
    for name in changed:
        match = _KEY.match(name)
        if match is not None:
            bands.setdefault(match.group("key"), []).append(name)
    lanes: list[tuple[str, list[str]]] = []
    if scalars:
        lanes.append(("state", scalars))
    lanes.extend((f"[{key}]", names) for key, names in sorted(bands.items()))
    return lanes


def timeline_svg(trace: Trace) -> str:
    """The trace as an SVG timeline (see the module docstring)."""
    lanes = _lanes(trace)
    columns = len(trace.steps)
    rows = sum(len(names) for _, names in lanes)
    width = _LABEL_WIDTH + columns * _CELL_WIDTH + 10
    height = _HEADER_HEIGHT + rows * _CELL_HEIGHT + len(lanes) * (_BAND_GAP + 16) + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img">']
    for column, step in enumerate(trace.steps):
        x = _LABEL_WIDTH + column * _CELL_WIDTH
        label = "initial" if step.action is None else step.action
        name = "initial" if step.action_name is None else step.action_name
        args = ", ".join(f"{key}={value}" for key, value in step.args.items())
        parts.append(f'<text x="{x + 4}" y="14" fill="#5a6272">step {step.index}</text>')
        parts.append(f'<text x="{x + 4}" y="30" font-weight="bold" fill="#1d2330">'
                     f'{_e(_clip(name, 17))}<title>{_e(label)}</title></text>')
        if args:
            parts.append(f'<text x="{x + 4}" y="44" fill="#1d2330">{_e(_clip(args, 17))}'
                         f'<title>{_e(label)}</title></text>')
    last_x = _LABEL_WIDTH + (columns - 1) * _CELL_WIDTH
    parts.append(f'<text x="{last_x + 4}" y="58" fill="#b3261e" font-weight="bold">'
                 f'{_e(_clip("⇒ " + trace.target, 17))}<title>{_e(trace.target)}</title></text>')
    y = _HEADER_HEIGHT
    changed_at = {(step.index, name) for step in trace.steps for name, _, _ in step.changes}
    for lane, names in lanes:
        parts.append(f'<text x="4" y="{y + 12}" font-weight="bold" fill="#33507a">'
                     f'{_e(lane)}</text>')
        parts.append(f'<line x1="0" y1="{y + 16}" x2="{width}" y2="{y + 16}" '
                     'stroke="#c5ccd8"/>')
        y += 16
        for name in names:
            parts.append(f'<text x="12" y="{y + 15}" fill="#3b4250">{_e(name)}</text>')
            for column, step in enumerate(trace.steps):
                x = _LABEL_WIDTH + column * _CELL_WIDTH
                value = step.state.get(name, "")
                changed = (step.index, name) in changed_at
                fill = "#ffd9a8" if changed else ("#f6f7fa" if column % 2 else "#ffffff")
                parts.append(f'<rect x="{x}" y="{y}" width="{_CELL_WIDTH - 2}" '
                             f'height="{_CELL_HEIGHT - 2}" rx="3" fill="{fill}" '
                             'stroke="#e1e5ec"/>')
                weight = ' font-weight="bold"' if changed else ""
                parts.append(f'<text x="{x + 5}" y="{y + 15}"{weight}>'
                             f'{_e(_clip(value, 16))}<title>{_e(name)} = {_e(value)}</title>'
                             '</text>')
            y += _CELL_HEIGHT
        y += _BAND_GAP
    parts.append("</svg>")
    return "".join(parts)


def _clip(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


def _trace_section(title: str, trace: Trace) -> str:
    rows = "".join(
        f"<tr><td>{step.index}</td><td>{_e(step.action or 'initial state')}</td><td>"
        + _e(", ".join(f"{n}: {b} → {a}" for n, b, a in step.changes)) + "</td></tr>"
        for step in trace.steps
    )
    initial = ", ".join(f"{name}={value}" for name, value in trace.steps[0].state.items())
    replay = ("" if trace.replayed else
              '<p class="problem">The concrete model does not replay this trace.</p>')
    return (f"<h3>{_e(title)}</h3>{timeline_svg(trace)}{replay}"
            f"<details><summary>steps as a table, and the initial state</summary>"
            f"<table><tr><th>step</th><th>action</th><th>changed</th></tr>{rows}</table>"
            f'<p class="state">{_e(initial)}</p></details>')


def _summary(report: Report) -> str:
    rows: list[str] = []
    for variant in report.results:
        label = variant.variant if variant.shipped else f"{variant.variant} (known-bad)"
        for index, result in enumerate(variant.invariants):
            rows.append(_summary_row(variant, label, index, result))
    header = ("<tr><th>model</th><th>variant</th><th>invariant</th><th>status</th>"
              "<th>expected</th><th>depth</th><th>time</th><th>note</th></tr>")
    return f"<table>{header}{''.join(rows)}</table>"


def _summary_row(variant: VariantResult, label: str, index: int, result: InvariantResult) -> str:
    kind = "" if result.kind == "safety" else " <small>(lemma)</small>"
    expected = "" if result.expected is None else result.expected.value
    return (f"<tr><td>{_e(variant.model) if index == 0 else ''}</td>"
            f"<td>{_e(label) if index == 0 else ''}</td><td>{_e(result.name)}{kind}</td>"
            f'<td class="{_status_class(result.status)}">{_e(result.status_text)}</td>'
            f"<td>{_e(expected)}</td><td>{result.depth}</td><td>{result.seconds:.2f}s</td>"
            f"<td>{_e(result.note)}</td></tr>")


def report_html(report: Report) -> str:
    """The whole report as one HTML document.

    Args:
        report: the report.

    Returns:
        The page's text (UTF-8, no external references).
    """
    verdict = ('<span class="ok">OK</span>' if report.ok
               else '<span class="bad">FAILED</span>')
    sections: list[str] = []
    for variant in report.results:
        traces = [result for result in variant.invariants
                  if result.counterexample is not None and result.kind == "safety"]
        problems = variant.problems()
        if not traces and not problems:
            continue
        kind = "shipped" if variant.shipped else "known-bad"
        parts = [f"<h2>{_e(variant.model)} / {_e(variant.variant)} <small>({kind})</small>"
                 f"</h2><p>{_e(variant.doc)}</p>"]
        parts.extend(f'<p class="problem">{_e(problem)}</p>' for problem in problems)
        for result in traces:
            assert result.counterexample is not None
            parts.append(_trace_section(
                f"{result.name} violated after {result.counterexample.length} steps",
                result.counterexample))
        sections.append("".join(parts))
    witnesses: list[str] = []
    for variant in report.results:
        for witness in variant.witnesses:
            if witness.trace is not None and variant.shipped:
                witnesses.append(_trace_section(
                    f"{variant.model}/{variant.variant}: witness {witness.name} reached at "
                    f"depth {witness.depth}", witness.trace))
    witness_block = ("<h2>Reachability witnesses (shipped variants)</h2>"
                     "<details><summary>show the witness traces</summary>"
                     + "".join(witnesses) + "</details>") if witnesses else ""
    return (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<title>logproof check report</title>"
        f"<style>{_CSS}</style></head><body>"
        f"<h1>logproof check: {verdict}</h1>"
        f'<p class="meta">{len(report.results)} variants, {_e(report.solver)}, seed '
        f"{report.seed}, {report.seconds:.1f}s</p>"
        f"<h2>Invariants</h2>{_summary(report)}"
        + "".join(sections) + witness_block + "</body></html>\n"
    )
