"""The overview page shows the findings at once when the report is already kept
(built at ingest or by an earlier request), with no callback round trip for
them (not even one that answers nothing); before that, the panel asks for them
behind a loading indicator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.components_findings import findings_panel, findings_view
from ingest.config import sqlite_url
from ingest.derive.frames import FrameStore
from ingest.diagnose import diagnose
from ingest.diagnose.runner import kept_report
from ingest.load.pipeline import ingest_trace_file
from ingest.store.db import make_engine

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "go1.27-httpnet-2MB.trace"


def _find(node: Any, id_: str) -> Any:
    if getattr(node, "id", None) == id_:
        return node
    children = getattr(node, "children", None)
    for child in children if isinstance(children, list) else [children]:
        if child is not None and not isinstance(child, str):
            found = _find(child, id_)
            if found is not None:
                return found
    return None


def test_kept_report_fills_the_panel(tmp_path: Path) -> None:
    engine = make_engine(sqlite_url(tmp_path / "t.db"))
    tid = ingest_trace_file(engine, SAMPLE, data_dir=tmp_path).id
    frames = FrameStore(engine, tmp_path).get(tid)
    assert kept_report(engine, frames) is None  # nothing computed by asking
    before = findings_panel(tid, None)
    assert _find(before, "findings-trace").data == tid  # the callback will fill it
    report = diagnose(engine, frames)
    assert kept_report(engine, frames) == report
    after = findings_panel(tid, report)
    assert _find(after, "findings-trace") is None  # nothing for the callback to fire on
    assert str(_find(after, "findings-body").children) == str(findings_view(report))
    engine.dispose()
