"""Off-CPU time under the runtime (ingest/views/offcpu.py) and its rule
(ingest/diagnose/offcpu.py), on real recordings: the cpuquota workload
(GOMAXPROCS 4, 8 workers, a 0.25 CPU cgroup quota) and the controls healthy
and timers,
each run with ``-trace`` under the scheduling recorder (tests/support/
sched_recordings.py), stored in SQLite.

Expected values are arithmetic over the same recording: the views' totals
agree with each other (per M, per goroutine, per timeline column), every
Running interval is split exactly between the thread's states, and the quota
bounds the on-CPU time: within the recorded window W the cgroup may run
0.25 x W (+ one 100 ms period of slack), so at least
1 - (0.25 W + 0.1 s) / Running of the Running time was off-CPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine

from ingest.derive.frames import FrameStore
from ingest.diagnose.config import DiagnoseConfig
from ingest.diagnose.runner import run_rules
from ingest.store.db import make_engine
from ingest.views import offcpu
from tests.support.sched_recordings import NEEDS_BPFTRACE, record, stored, workload_bin

# alone: the controls' off-CPU time must be their own. Recorded beside the
# parallel suite, other tests' processes took their CPUs and the rule, rightly,
# saw the timers control run off-CPU (once in CI).
pytestmark = [pytest.mark.slow, pytest.mark.alone, *NEEDS_BPFTRACE]
#: Workloads that must stay clear (their load lasts -duration, so the recorder,
#: attached a few hundred ms after they start, sees most of it).
CONTROLS = ("healthy", "timers")


class Stored:
    def __init__(self, engine: Engine, data: Path, ids: dict[str, int]) -> None:
        self.engine, self.data, self.ids = engine, data, ids

    def report(self, name: str) -> dict[str, Any]:
        frames = FrameStore(self.engine, self.data).get(self.ids[name])
        return run_rules(self.engine, frames, DiagnoseConfig())


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Stored:
    root = tmp_path_factory.mktemp("offcpu")
    engine = make_engine(f"sqlite:///{root / 'db.sqlite'}")
    data = root / "data"
    ids = {
        "quota": stored(engine, record(workload_bin("cpuquota"), ["-duration", "600ms"],
                                       root / "quota", await_stdin=True), data),
        **{name: stored(engine, record(workload_bin(name), ["-duration", "1500ms"],
                                       root / name), data) for name in CONTROLS},
    }
    return Stored(engine, data, ids)


def test_quota_bounds_the_cpu_the_runtime_saw_as_running(db: Stored) -> None:
    s = offcpu.offcpu_summary(db.engine, db.ids["quota"])
    assert s is not None and not s["partial"] and s["method"] == "clock-snapshot"
    window = s["last_ts"] - s["first_ts"]
    # No floor on Running itself: on a loaded machine the throttled cgroup
    # starts fewer Ms and timers fire late, so the runtime sees less of it
    # (0.93 x the window once in CI). The bound needs only enough Running for
    # the quota to leave most of it off-CPU (bound > 0.3 below).
    bound = 1 - (0.25 * window + 100_000_000) / s["running_ns"]
    assert s["share"] >= bound > 0.3, (s["share"], bound)
    # Off-CPU while Running is waiting for a CPU (throttled), not sleep: a
    # thread running Go code does not sleep (the alignment is right).
    assert s["asleep_ns"] < 0.01 * s["running_ns"]
    assert s["waiting_ns"] > 0.9 * s["offcpu_ns"]


def test_totals_agree(db: Stored) -> None:
    tid = db.ids["quota"]
    s = offcpu.offcpu_summary(db.engine, tid, top=1000)
    assert s is not None
    per_m = s["ms"]
    assert sum(r["waiting_ns"] for r in per_m) == s["waiting_ns"]
    assert sum(r["asleep_ns"] for r in per_m) == s["asleep_ns"]
    assert sum(r["running_ns"] for r in per_m) == s["running_ns"]
    # Every Running ns of a recorded M is in exactly one of the thread's states.
    for r in per_m:
        split = r["on_cpu_ns"] + r["waiting_ns"] + r["asleep_ns"] + r["unknown_ns"]
        assert split == r["running_ns"], r
    assert sum(g["offcpu_ns"] for g in s["goroutines"]) == s["offcpu_ns"]
    g = s["goroutines"][0]
    one = offcpu.goroutine_offcpu(db.engine, tid, g["goid"])
    assert one is not None
    assert (one["running_ns"], one["offcpu_ns"]) == (g["running_ns"], g["offcpu_ns"])
    assert one["stretches"] and sum(x["duration_ns"] for x in one["stretches"]) <= one["offcpu_ns"]
    if one["stretches_total"] <= offcpu.MAX_OVERLAPS:
        assert sum(x["duration_ns"] for x in one["stretches"]) == one["offcpu_ns"]


def test_lanes_columns_add_up(db: Stored) -> None:
    tid = db.ids["quota"]
    s = offcpu.offcpu_summary(db.engine, tid)
    assert s is not None
    t1, t2, px = s["first_ts"], s["last_ts"], 97
    lanes = offcpu.offcpu_lanes(db.engine, tid, t1, t2, px)
    # Every recorded thread has a lane (sysmon too, which runs no goroutine).
    assert lanes["px"] == px and {ln["m"] for ln in lanes["lanes"]} >= {r["m"] for r in s["ms"]}
    alive_columns = []
    for ln in lanes["lanes"]:
        cols = ln["columns"]
        assert all(len(cols[k]) == px for k in offcpu.KINDS) and len(ln["running_offcpu"]) == px
        # A thread is in one state at every moment from the window's start (or
        # its creation) until it exits: every column's states add up to its width
        # in between.
        spans = ln["spans"]
        assert spans is not None
        total = np.sum([cols[k] for k in offcpu.KINDS], axis=0)
        edges = t1 + (np.arange(px + 1) * ((t2 - t1) / px)).astype(np.int64)
        edges[-1] = t2
        width = np.diff(edges)
        alive = (edges[:-1] >= min(spans["start"])) & (edges[1:] <= max(spans["end"]))
        alive_columns.append(int(alive.sum()))
        assert np.array_equal(total[alive], width[alive]) and (total <= width).all()
        on = sum(e - b for b, e, k in zip(spans["start"], spans["end"], spans["kind"],
                                         strict=True) if k == "on_cpu")
        assert on == sum(cols["on_cpu"])
    # The threads that lived through the window were checked over most of it (a
    # thread the runtime started late, as one did in CI 85% in, over its own end).
    assert max(alive_columns) >= px // 2, alive_columns
    assert sum(sum(ln["running_offcpu"]) for ln in lanes["lanes"]) == s["offcpu_ns"]
    states = offcpu.thread_states(db.engine, tid, t1, (t1 + t2) // 2)
    assert states["recording"]["partial"] is False
    assert all(max(ln["end"]) <= (t1 + t2) // 2 for ln in states["lanes"])


def test_rule_raised_by_the_quota_workload(db: Stored) -> None:
    rep = db.report("quota")
    found = [f for f in rep["findings"] if f["rule"] == "sched.offcpu"]
    assert len(found) == 1
    f = found[0]
    s = offcpu.offcpu_summary(db.engine, db.ids["quota"])
    assert s is not None
    assert f["measures"]["offcpu_ns"] == s["offcpu_ns"] >= f["thresholds"]["min_offcpu_ns"]
    assert f["measures"]["share"] >= f["thresholds"]["min_share"]
    assert f["threads"] and f["goroutines"] and f["ranges"]
    assert "/timeline?mode=m" in f["link"]


@pytest.mark.parametrize("control", CONTROLS)
def test_controls_stay_clear(db: Stored, control: str) -> None:
    rep = db.report(control)
    status = {r["rule"]: r["status"] for r in rep["rules"]}
    assert status["sched.offcpu"] == "clear"
    s = offcpu.offcpu_summary(db.engine, db.ids[control])
    assert s is not None and s["running_ns"] > 0


def test_no_recording(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    assert offcpu.offcpu_summary(engine, 1) is None
    assert offcpu.goroutine_offcpu(engine, 1, 1) is None
    assert offcpu.offcpu_lanes(engine, 1, 0, 10, 5)["lanes"] == []
