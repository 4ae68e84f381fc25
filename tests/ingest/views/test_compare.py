"""The compare page's data: each side from the reports kept with its trace
equals the same figures computed directly from its frames."""

from __future__ import annotations

from pathlib import Path

from ingest.config import sqlite_url
from ingest.derive.frames import FrameStore
from ingest.load.pipeline import ingest_trace_file
from ingest.store.db import make_engine
from ingest.views.compare import compare
from ingest.views.overview import DEFAULT_BINS, overview
from ingest.views.states import to_json
from ingest.views.states_frames import resource_graph

REPO = Path(__file__).resolve().parents[3]
A = REPO / "samples" / "go1.27-httpnet-2MB.trace"
B = REPO / "samples" / "go1.27-annotations.trace"


def test_sides_equal_a_direct_computation(tmp_path: Path) -> None:
    engine = make_engine(sqlite_url(tmp_path / "t.db"))
    a = ingest_trace_file(engine, A, data_dir=tmp_path).id
    b = ingest_trace_file(engine, B, data_dir=tmp_path).id
    store = FrameStore(engine, tmp_path)
    got = compare(engine, store, a, b)
    for label, tid in (("a", a), ("b", b)):
        fr = store.get(tid)
        side = got[label]
        assert side["states"] == to_json(resource_graph(fr, "goroutine", split_reasons=True))
        ov = overview(engine, fr, tid, bins=DEFAULT_BINS)
        assert side["bins"] == ov["bins"] and len(side["bins"]["edges"]) == DEFAULT_BINS + 1
        assert side["goroutine_states"] == ov["goroutine_states"]
    engine.dispose()
