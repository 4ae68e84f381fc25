"""Where an ingest's memory peaks: `gmpscope ingest` run in this process with its
resident memory sampled every 20 ms, one line per step.

    python bench/ingest_phases.py TRACE [gmpscope ingest options...]

Prints, as the load goes, a line for each table (or part of one) the load derives
(`DerivedTables` yields it) and for each main-thread phase of the command (decode
wait, goroutine table, frames, lanes, each warm report): seconds since the start,
RSS then, the highest RSS sampled since the line before (anonymous and file-backed
memory then, and the VmHWM so far: where it jumps is where a spike too short to be
sampled was), and at the end the process's VmHWM. Without --db/--data-dir it
ingests into a fresh temporary directory, removed after. The sampling can miss a
spike shorter than 20 ms: VmHWM is the figure to quote, the lines say where.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# Before this directory: its ingest.py would be found before the package.
sys.path.insert(0, str(ROOT))

_START = time.monotonic()
_PEAK = [0]
_PHASES = ("decode wait", "goroutine table", "frames", "lanes", "commit", "warm")


def _status(key: str) -> int:
    text = Path("/proc/self/status").read_text()
    m = re.search(key + r":\s+(\d+)", text)
    return int(m.group(1)) >> 10 if m else 0


def _rss() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 >> 20


def _sample() -> None:
    while True:
        _PEAK[0] = max(_PEAK[0], _rss())
        time.sleep(0.02)


def _line(what: str) -> None:
    print(f"{time.monotonic() - _START:7.2f} s  rss {_rss():5d} MB  peak since last "
          f"{_PEAK[0]:5d} MB  (anon {_status('RssAnon')}, file {_status('RssFile')}, "
          f"VmHWM {_status('VmHWM')})  {what}", flush=True)
    _PEAK[0] = 0


def _instrument() -> None:
    import ingest.load.derived as derived
    import ingest.timings as timings

    tables = derived.DerivedTables.__iter__

    def each(self: Any) -> Iterator[Any]:
        for name, cols in tables(self):
            _line(f"derived {name}")
            yield name, cols

    derived.DerivedTables.__iter__ = each  # type: ignore[method-assign]
    phase = timings.Timings.phase

    @contextmanager
    def timed(self: Any, name: str) -> Iterator[None]:
        with phase(self, name):
            yield
        if name.startswith(_PHASES) and threading.current_thread() is threading.main_thread():
            _line(f"end of {name}")

    timings.Timings.phase = timed  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    threading.Thread(target=_sample, daemon=True).start()
    _instrument()
    from gmpscope.cli import main as gmpscope

    scratch = None
    if not any(a.startswith(("--db", "--data-dir")) for a in argv[1:]):
        scratch = Path(tempfile.mkdtemp(prefix="ingest-phases-"))
        argv = [*argv, "--db", f"sqlite:///{scratch}/g.db", "--data-dir", str(scratch)]
    try:
        code = gmpscope(["ingest", "--no-progress", *argv])
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    _line("done")
    print(f"VmHWM {_status('VmHWM')} MB")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
