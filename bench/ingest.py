"""Ingest benchmark: `gmpscope ingest` against `go tool trace`, side by side in one run.

    python bench/ingest.py [--trace FILE] [--size-mb 20] [--db URL] [--queries 50]
                           [--repeat N]

Uses the same trace as bench/decode.py (generated once and cached when --trace is
not given) and the same way of measuring `go tool trace` (wall time until its
viewer is ready, peak RSS then). gmpscope is measured as a user runs it: the whole
`python -m gmpscope ingest TRACE` process (decode, load, derived intervals,
the views' lane sets), wall time until exit and its peak memory: the larger of
the peak RSS from wait4 (the process's, or its forked warm worker's) and the
most the process and its children held together (the sum of their
proportional set sizes, sampled every 250 ms while it has children). The database
is a fresh SQLite file unless --db names another (it must be empty).

With --repeat N (SQLite only), the two tools run N times each, alternately, each
gmpscope run on a fresh database; it prints every run and the medians, and the
ratios of the medians: on a shared machine one pair of runs can be 30% off.

Then it times the queries the views need, on the ingested trace, in this process:
one goroutine's intervals in a 10 ms window (the busiest goroutine), every proc in
a 10 ms window (with the goroutines on each), which goroutine ran on a P at an
instant, the trace summary and the goroutine state graph. Each is run --queries
times; the median and the worst are printed, in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.decode import make_large_trace, run_go_tool_trace  # noqa: E402


def run_gmpscope_ingest(trace: Path, db_url: str, data_dir: Path,
                        root: Path = ROOT) -> dict[str, Any]:
    """One `python -m gmpscope ingest` process run from the source tree ``root``."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gmpscope", "ingest", str(trace), "--db", db_url,
         "--data-dir", str(data_dir), "--json", "--no-progress"],
        cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    tree = TreeMemory(proc.pid)
    out, err = proc.stdout.read(), proc.stderr.read()
    tree.stop()
    # wait4 reaps this child alone and reports the largest peak RSS of it
    # and the children it waited for (not their sum: the sampler's).
    _, status, rusage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"gmpscope ingest failed: {err.decode(errors='replace')}")
    res = json.loads(out.splitlines()[-1])
    if not res["created"]:
        raise SystemExit("the database already held this trace: use an empty one")
    peak_kb = max(rusage.ru_maxrss, tree.peak_kb)
    return {"seconds": elapsed, "peak_mb": peak_kb / 1024,
            "user_s": rusage.ru_utime, "system_s": rusage.ru_stime, **res}


class TreeMemory:
    """Samples, on a thread, the summed proportional set size (Pss: a page
    shared by n processes counts 1/n in each) of process ``pid`` and its
    descendants while it has any (a forked warm worker); ``peak_kb`` is the
    most seen. Alone, its own peak RSS (wait4) says it: reading smaps_rollup
    walks the process's mappings under its memory map's lock, and sampled
    throughout it slowed the 200 MB trace's ingest by 0.3-1.7 s."""

    def __init__(self, pid: int, every_s: float = 0.25) -> None:
        self.pid = pid
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every_s,), daemon=True)
        self._thread.start()

    def _run(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            tree = _tree(self.pid)
            if len(tree) > 1:
                self.peak_kb = max(self.peak_kb, sum(_pss_kb(p) for p in tree))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux: /proc/PID/task/TID/children)."""
    out = [pid]
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                for child in fh.read().split():
                    out += _tree(int(child))
    except OSError:
        pass  # ended meanwhile
    return out


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _time(fn: Callable[[], object], n: int) -> tuple[float, float]:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), max(times)


def query_latencies(db_url: str, trace_id: int, n: int) -> list[tuple[str, float, float]]:
    from sqlalchemy import func, select

    from ingest.store import models, traces
    from ingest.store.db import make_engine
    from ingest.views import intervals
    from ingest.views import states as stategraph

    engine = make_engine(db_url)
    g = models.goroutines
    with engine.connect() as conn:
        busiest = conn.execute(select(g.c.goid).where(g.c.trace_id == trace_id)
                               .order_by(g.c.transitions.desc()).limit(1)).scalar_one()
        pid = conn.execute(select(func.min(models.procs.c.pid))
                           .where(models.procs.c.trace_id == trace_id)).scalar_one()
    info = traces.get_trace(engine, trace_id)
    assert info is not None
    mid = (info["first_ts"] + info["last_ts"]) // 2
    window = 10_000_000
    out = [
        (f"goroutine {busiest} intervals, 10 ms",
         *_time(lambda: intervals.goroutine_intervals(engine, trace_id, busiest, mid,
                                                    mid + window), n)),
        ("all procs' intervals, 10 ms",
         *_time(lambda: intervals.proc_intervals(engine, trace_id, mid, mid + window), n)),
        (f"who ran on P{pid} at t",
         *_time(lambda: intervals.who_ran_on_proc(engine, trace_id, pid, mid), n)),
        ("trace summary", *_time(lambda: traces.trace_summary(engine, trace_id), n)),
        ("goroutine state graph",
         *_time(lambda: stategraph.state_graph(engine, trace_id, "goroutine"), n)),
    ]
    got = intervals.goroutine_intervals(engine, trace_id, busiest, mid, mid + window)
    procs = intervals.proc_intervals(engine, trace_id, mid, mid + window)
    print(f"  (the windows held {len(got)} intervals of goroutine {busiest} and "
          f"{len(procs)} proc intervals with "
          f"{sum(len(p['goroutines']) for p in procs)} goroutine runs)")
    engine.dispose()
    return out


def repeated(trace: Path, tmp: Path, n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both tools ``n`` times, alternately; the last gmpscope run (its database
    is left at tmp/bench.db for the queries) and go's, with the medians of
    seconds and peak MB in place of that run's."""
    import shutil

    runs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for i in range(n):
        shutil.rmtree(tmp / "data", ignore_errors=True)  # a fresh database each run
        for f in tmp.glob("bench.db*"):
            f.unlink()
        ours = run_gmpscope_ingest(trace, f"sqlite:///{tmp / 'bench.db'}", tmp / "data")
        go = run_go_tool_trace(trace)
        runs.append((ours, go))
        print(f"run {i + 1}: gmpscope {ours['seconds']:.2f} s {ours['peak_mb']:.0f} MB, "
              f"go tool trace {go['seconds']:.2f} s {go['peak_mb']:.0f} MB "
              f"(time ratio {go['seconds'] / ours['seconds']:.2f}x)", flush=True)
    ours, go = dict(runs[-1][0]), dict(runs[-1][1])
    for key in ("seconds", "peak_mb", "user_s", "system_s"):
        ours[key] = statistics.median(r[0][key] for r in runs)
    for key in ("seconds", "peak_mb"):
        go[key] = statistics.median(r[1][key] for r in runs)
    print(f"medians of {n} runs each:")
    return ours, go


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--trace", type=Path, help="trace to ingest (default: generate one)")
    ap.add_argument("--size-mb", type=float, default=20.0)
    ap.add_argument("--db", help="database URL (default: a fresh SQLite file)")
    ap.add_argument("--queries", type=int, default=50, help="runs of each query")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs of each tool, alternately (SQLite only); medians printed")
    args = ap.parse_args()
    if args.repeat < 1 or (args.repeat > 1 and args.db):
        raise SystemExit("--repeat needs a positive count and the default SQLite database")
    trace = args.trace or make_large_trace(args.size_mb)
    size_mb = trace.stat().st_size / 1e6
    print(f"trace: {trace} ({size_mb:.1f} MB)")
    with tempfile.TemporaryDirectory(prefix="gmpscope-bench-") as tmp:
        db_url = args.db or f"sqlite:///{Path(tmp) / 'bench.db'}"
        if args.repeat > 1:
            ours, go = repeated(trace, Path(tmp), args.repeat)
        else:
            ours = run_gmpscope_ingest(trace, db_url, Path(tmp) / "data")
            go = run_go_tool_trace(trace)
        print(f"{'tool':<28}{'seconds':>10}{'peak MB':>10}{'MB/s':>10}")
        for name, r in (("gmpscope ingest (SQLite)" if not args.db else "gmpscope ingest",
                         ours), ("go tool trace (ready)", go)):
            print(f"{name:<28}{r['seconds']:>10.2f}{r['peak_mb']:>10.0f}"
                  f"{size_mb / r['seconds']:>10.1f}")
        print(f"events: {ours['events']:,}, goroutines: {ours['goroutines']:,}")
        # Two cores: CPU seconds over wall seconds says how far moving work
        # between threads can still go (docs/ingest.md).
        print(f"gmpscope CPU, s: user {ours['user_s']:.2f}, system {ours['system_s']:.2f} "
              f"({(ours['user_s'] + ours['system_s']) / ours['seconds']:.2f} cores busy "
              "on average)")
        # The loader's own phases (the inserts overlap the derivations: they
        # run on the insert worker), so the parts add up to more than "load".
        phases = ours.get("timings") or {}
        inserts = sum(v for k, v in phases.items() if k.startswith("insert "))
        shown = {k: v for k, v in phases.items() if not k.startswith("insert ")
                 or k == "insert intervals"}
        print("gmpscope phases, s: " + ", ".join(f"{k} {v:.2f}" for k, v in shown.items())
              + f"; all inserts {inserts:.2f}")
        print(f"time ratio go/gmpscope: {go['seconds'] / ours['seconds']:.2f}x; "
              f"memory ratio go/gmpscope: {go['peak_mb'] / max(ours['peak_mb'], 1):.2f}x")
        if not args.db:
            print(f"database size: {(Path(tmp) / 'bench.db').stat().st_size / 1e6:.0f} MB")
        print(f"queries ({args.queries} runs each): median / worst, ms")
        for name, med, worst in query_latencies(db_url, ours["id"], args.queries):
            print(f"  {name:<36}{med:>9.2f}{worst:>9.2f}")


if __name__ == "__main__":
    main()
