"""A pre-1.22 trace cannot show what a syscall already running when tracing
began did with its P: syscall.blocking must not say the P was held (issue 27's
first defect). go1.21-mixed.trace (real, Go 1.21.13) has one: G17 is in a
129 ms syscall from the start while other goroutines are runnable."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ingest.config import sqlite_url
from ingest.derive.frames import FrameStore
from ingest.diagnose.config import DiagnoseConfig
from ingest.diagnose.runner import RULES, run_rules
from ingest.load.pipeline import ingest_trace_file
from ingest.store.db import make_engine

REPO = Path(__file__).resolve().parents[3]
OLD = REPO / "tests" / "data" / "traces" / "go1.21-mixed.trace"


def test_a_syscall_running_before_an_old_trace_began_is_not_blamed(tmp_path: Path) -> None:
    engine = make_engine(sqlite_url(tmp_path / "t.db"))
    tid = ingest_trace_file(engine, OLD, data_dir=tmp_path).id
    with sqlite3.connect(tmp_path / "t.db") as conn:
        family, = conn.execute("SELECT family FROM traces WHERE id = ?", (tid,)).fetchone()
        unknown = conn.execute(
            "SELECT count(*) FROM syscalls WHERE trace_id = ? AND start_known = 0 "
            "AND duration_ns >= 10000000", (tid,)).fetchone()[0]
    assert family == "v1" and unknown == 1, "the trace has the case"
    rules = tuple(r for r in RULES if r.id == "syscall.blocking")
    report = run_rules(engine, FrameStore(engine, tmp_path).get(tid), DiagnoseConfig(), rules)
    assert [r["status"] for r in report["rules"]] == ["clear"], report["findings"]
    engine.dispose()
