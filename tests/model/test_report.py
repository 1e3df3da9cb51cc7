"""Reports round-trip through JSON, and the HTML timeline draws what the trace changed."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from model import Report, ReportFormatError, Status, check_definitions
from model._html import report_html, timeline_svg

from ._lockserv import LOCKSERV

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def report() -> Report:
    return check_definitions([LOCKSERV], variant="no_free_check")


def test_json_round_trip_keeps_everything(report: Report) -> None:
    again = Report.loads(report.dumps())
    assert again == report
    assert again.results[0].result("MUTEX").status is Status.VIOLATED
    with pytest.raises(ReportFormatError):
        Report.loads('{"tool": "logproof check", "format": 99}')


def test_timeline_has_a_column_per_step_and_a_band_per_index(report: Report) -> None:
    trace = report.results[0].result("MUTEX").counterexample
    assert trace is not None
    root = ET.fromstring(timeline_svg(trace))
    texts = [element.text or "" for element in root.iter(f"{SVG}text")]
    assert [t for t in texts if t.startswith("step ")] == ["step 0", "step 1", "step 2"]
    assert {"state", "[0]", "[1]"} <= set(texts)
    assert "held[0]" in texts
    assert "held[1]" in texts
    highlighted = [r for r in root.iter(f"{SVG}rect") if r.get("fill") == "#ffd9a8"]
    changed = sum(len(step.changes) for step in trace.steps)
    assert len(highlighted) == changed
    assert any("MUTEX" in t for t in texts)


def test_html_page_is_self_contained(report: Report) -> None:
    page = report_html(report)
    assert "<svg" in page
    assert "<link" not in page
    assert "<script" not in page
    assert "src=" not in page
    assert "MUTEX violated after 2 steps" in page
