"""`gmpscope ingest` builds a big trace's whole-trace reports before it returns
(ingest.api.warm): above WARM_MIN_EVENTS (lowered here to take a small real
trace) they are on disk beside the frames, and the pages' data read them."""

from __future__ import annotations

from pathlib import Path

import pytest

from gmpscope.commands import ingest as cli_ingest
from ingest.config import sqlite_url
from ingest.derive.frames import FrameStore
from ingest.store.db import make_engine

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "go1.27-httpnet-2MB.trace"
#: The report caches every page opens with (ingest/derive/cache.py's keys).
REPORTS = {"goroutine_groups_summary.json", "latency_report-worst50.json",
           "netpoll_summary-top10.json", "syscall_summary-top10.json",
           "states_goroutine_split.json", "flame-sync.json"}


#: The timeline's lane sets (ingest/derive/precompute.py), built after every load.
LANE_SETS = {"p_lanes", "m_lanes", "goroutines", "ranges"}


def _reports(tmp_path: Path, engine: object, tid: int) -> set[str]:
    frames = FrameStore(engine, tmp_path).get(tid)  # type: ignore[arg-type]
    assert frames.directory is not None
    derived = next(frames.directory.glob("derived-v*"))
    lanes = {p.name for p in derived.iterdir() if p.is_dir()}
    assert LANE_SETS <= lanes, LANE_SETS - lanes
    return {p.name for p in derived.glob("*.json")}


@pytest.mark.parametrize("threshold, warmed", [(0, True), (10**12, False)])
def test_reports_built_at_ingest_above_the_threshold(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threshold: int, warmed: bool) -> None:
    monkeypatch.setattr(cli_ingest, "WARM_MIN_EVENTS", threshold)
    engine = make_engine(sqlite_url(tmp_path / "t.db"))
    heard: list[tuple[str, int, int]] = []
    res = cli_ingest.ingest_path(engine, SAMPLE, SAMPLE.name, tmp_path,
                                 progress=lambda *a: heard.append(a))
    have = _reports(tmp_path, engine, res.id)
    reports = [(done, total) for stage, done, total in heard if stage == "reports"]
    if warmed:
        # One step per report, the last one done: what the terminal's bar shows.
        assert reports[0] == (0, reports[-1][1]) and reports[-1][0] == reports[-1][1] > 1
        assert REPORTS <= have, REPORTS - have
        assert any(n.startswith("overview-") for n in have)
        assert any(n.startswith("findings-") for n in have)
        assert {f"warm {s}" for s in ("overview", "findings", "flame")} <= set(res.timings)
    else:
        assert not REPORTS & have and not reports
    engine.dispose()


def test_reports_built_two_at_a_time_are_the_ones_built_one_at_a_time(
        tmp_path: Path) -> None:
    from ingest.api.warm import warm_reports

    files: list[dict[str, bytes]] = []
    for threads in (1, 2):
        data = tmp_path / str(threads)
        engine = make_engine(sqlite_url(data / "t.db"))
        res = cli_ingest.ingest_path(engine, SAMPLE, SAMPLE.name, data, warm=False)
        warm_reports(engine, data, res.id, threads=threads)
        frames = FrameStore(engine, data).get(res.id)
        assert frames.directory is not None
        derived = next(frames.directory.glob("derived-v*"))
        files.append({p.name: p.read_bytes() for p in derived.glob("*.json")})
        engine.dispose()
    one, two = files
    assert REPORTS <= set(one)
    assert one == two
