"""What keeps the diagnostics fast, checked against the slow way: time inside windows
(TimeInside) equals the per-interval overlaps summed, and the step count's integral;
top_k and nearest_ranks equal a full sort; the report kept with the frames equals the
rules run again, and is not read back once the config changes or an OS recording is
attached to the trace."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ingest.derive.cache import DERIVED_VERSION
from ingest.derive.frames import FrameStore
from ingest.diagnose import diagnose, rule_defaults
from ingest.diagnose.base import StepCount, TimeInside, nearest_rank, nearest_ranks, top_k
from ingest.diagnose.config import parse_config
from ingest.diagnose.runner import report_key, run_rules
from ingest.load.pipeline import ingest_trace_file
from ingest.load.poller import ingest_recording_dir
from ingest.store.db import make_engine
from tests.support.poller_recordings import DATA, make_recording

REPO = Path(__file__).resolve().parents[3]


def _overlaps(start: np.ndarray, end: np.ndarray, a: np.ndarray, b: np.ndarray) -> list[int]:
    """Per window, the overlaps summed one interval at a time (Python ints)."""
    return [sum(max(0, min(e, y) - max(s, x)) for s, e in zip(start.tolist(), end.tolist(),
                                                               strict=True))
            for x, y in zip(a.tolist(), b.tolist(), strict=True)]


@pytest.mark.parametrize(("n", "span", "seed"), [(1, 10, 0), (7, 5, 1), (300, 1000, 2),
                                                 (2000, 10**6, 3), (2000, 2**40, 4)])
def test_time_inside_equals_overlaps(n: int, span: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    base = 1_700_000_000_000
    start = base + rng.integers(0, span, n)
    end = start + rng.integers(0, max(2, span // 10), n)  # zero-length ones too
    a = base + rng.integers(-span // 4 - 2, span + span // 4 + 2, 60)
    b = a + rng.integers(0, span // 3 + 2, 60)
    # Windows on the intervals' own ends, before and after all of them, empty ones.
    a = np.concatenate([a, start[:5], [base - 100, end.max(), base]])
    b = np.concatenate([b, end[:5], [base - 1, end.max() + 7, base]])
    got = TimeInside(start, end).integral(a, b)
    assert got.dtype == np.int64
    assert got.tolist() == _overlaps(start, end, a, b)
    step = StepCount(start, end, rows=np.arange(n)).integral(a, b)
    assert got.tolist() == step.tolist()


def test_time_inside_without_intervals_or_windows() -> None:
    none = np.zeros(0, np.int64)
    assert TimeInside(none, none).integral(np.array([1]), np.array([5])).tolist() == [0]
    one = np.array([3], np.int64)
    assert TimeInside(one, one + 4).integral(none, none).tolist() == []


def test_top_k_and_ranks_equal_a_sort() -> None:
    rng = np.random.default_rng(7)
    for n in (1, 3, 10, 41, 5000):
        key = rng.integers(0, 20, n)  # many ties
        tie = rng.integers(0, 5, n)
        for k in (1, 3, 10):
            assert top_k(key, tie, k).tolist() == np.lexsort((tie, -key))[:k].tolist()
        srt = np.sort(key)
        want = [nearest_rank(srt, 0.5), nearest_rank(srt, 0.9), nearest_rank(srt, 0.99),
                int(srt[-1])]
        assert nearest_ranks(key, (0.5, 0.9, 0.99)) == want


def test_kept_report_equals_the_rules_and_follows_config_and_recording(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    go = ingest_trace_file(engine, DATA / "connleak-emfile-go1.27.trace", "connleak-emfile",
                           data_dir=data)
    store = FrameStore(engine, data)
    frames = store.get(go.id)
    default = parse_config({}, rule_defaults())
    first = diagnose(engine, frames, default)
    key = report_key(engine, frames, default)
    assert frames.directory is not None
    assert (frames.directory / f"derived-v{DERIVED_VERSION}" / f"{key}.json").is_file()
    assert first == run_rules(engine, frames, default)
    # Read back, by another process say: the same report.
    assert diagnose(engine, FrameStore(engine, data).get(go.id), default) == first
    skipped = {r["rule"] for r in first["rules"] if r["status"] == "skipped"}
    assert "fd.emfile" in skipped
    # Another config: another report.
    other = parse_config({"disabled": ["sync.contention"]}, rule_defaults())
    assert report_key(engine, frames, other) != key
    status = {r["rule"]: r["status"] for r in diagnose(engine, frames, other)["rules"]}
    assert status["sync.contention"] == "disabled"
    # The OS recording of the same run attached: the poller rules run now.
    res = ingest_recording_dir(engine, make_recording("connleak-emfile", tmp_path / "rec"),
                               data_dir=data, attach=go.id)
    assert res.attached is not None
    assert report_key(engine, frames, default) != key
    after = diagnose(engine, frames, default)
    assert after == run_rules(engine, frames, default)
    # (sched.offcpu needs the kernel's scheduling, sched.parquet, which a strace recording lacks.)
    assert not {r["rule"] for r in after["rules"] if r["status"] == "skipped"} & (
        skipped - {"sched.offcpu"})
    assert any(f["rule"] == "fd.emfile" for f in after["findings"])


@pytest.mark.parametrize(("sample", "raised"), [
    ("go1.27-syscallblock", {"syscall.blocking", "sched.latency"}),
    ("go1.27-mutex", {"sync.contention"}), ("go1.27-gcpressure", {"gc.pressure"})])
def test_rules_read_part_by_part_give_the_same_report(tmp_path: Path, sample: str,
                                                      raised: set[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules' scans, a few rows at a time (the Runnable intervals, the
    syscalls, the sync waits, the proc runs, the gathers), give the report
    of whole reads; the Runnable intervals' rows are found again exactly."""
    from ingest.derive import frame_layout
    from ingest.diagnose import base
    from ingest.store import models

    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    res = ingest_trace_file(engine, REPO / "samples" / f"{sample}.trace",
                            data_dir=tmp_path / "data")
    frames = FrameStore(engine, tmp_path / "data").get(res.id)
    config = parse_config({}, rule_defaults())
    whole = run_rules(engine, frames, config)
    assert {f["rule"] for f in whole["findings"]} >= raised
    ctx = base.Context(engine, frames)
    everything = np.arange(len(ctx.runnable.start))
    monkeypatch.setattr(base, "PART_ROWS", 7)
    monkeypatch.setattr(frame_layout, "GATHER_ROWS", 5)
    monkeypatch.setattr(frame_layout, "GATHER_SPAN", 64)
    assert run_rules(engine, frames, config) == whole
    rows = np.flatnonzero(frames.state[:ctx.goroutine_rows] == models.STATE_CODE["Runnable"])
    small = base.Context(engine, frames)
    np.testing.assert_array_equal(small.runnable.start, frames.intervals["start_ts"][rows])
    np.testing.assert_array_equal(small.runnable.end, frames.intervals["end_ts"][rows])
    pick = np.random.default_rng(5).permutation(everything)[:40]
    np.testing.assert_array_equal(small.runnable_rows(pick), rows[pick])
    np.testing.assert_array_equal(small.runnable_rows(everything), rows)
