"""The Go side of the alignment: a Go trace's syscall intervals, by thread.

Decodes the trace with :mod:`collectors.gotrace` into a temporary directory
and pairs each goroutine's ``Running -> Syscall`` transition (on the M it
entered on) with its next transition out of ``Syscall``. Only Go 1.22+
traces name Ms by OS thread id; older ones cannot be joined by thread.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow.compute as pc  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from collectors.poller.align import Alignment, Calls, align

_COLUMNS = ["ts", "resource", "id", "from_state", "to_state", "m"]


def syscall_intervals(transitions: Any) -> Calls:
    """Go syscall intervals (M, start, end) from a transitions table (pyarrow)."""
    t = transitions.select(_COLUMNS)
    is_g = pc.equal(t.column("resource"), "goroutine")
    touches = pc.or_(pc.equal(t.column("to_state"), "Syscall"),
                     pc.equal(t.column("from_state"), "Syscall"))
    rows = t.filter(pc.and_(is_g, touches)).to_pydict()
    open_at: dict[int, tuple[int, int]] = {}
    ms: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    for ts, gid, frm, to, m in zip(rows["ts"], rows["id"], rows["from_state"],
                                   rows["to_state"], rows["m"], strict=True):
        if frm == "Syscall" and gid in open_at:
            start, entered_on = open_at.pop(gid)
            if entered_on >= 0:
                ms.append(entered_on)
                starts.append(start)
                ends.append(ts)
        if to == "Syscall":
            open_at[gid] = (ts, m)
    return Calls.of(ms, starts, ends)


def os_calls(poller: Any) -> Calls:
    """The recording's completed system calls (tid, start, end) from poller.parquet rows."""
    t = poller.filter(pc.and_(pc.equal(poller.column("kind"), "syscall"),
                              pc.is_valid(poller.column("duration_ns"))))
    tid = t.column("tid").to_numpy()
    start = t.column("ts_ns").to_numpy()
    end = start + t.column("duration_ns").to_numpy()
    return Calls(tid, start, end)


def align_with_trace(
    go_trace: Path, poller: Any, clock: Mapping[str, int] | None
) -> tuple[Alignment, dict[str, Any]]:
    """Decode ``go_trace`` and align it with the poller table; (alignment, decoder meta)."""
    from collectors.gotrace.todir import decode_file_to_dir

    with tempfile.TemporaryDirectory(prefix="gmpscope-join-") as work:
        meta = decode_file_to_dir(go_trace, Path(work) / "decoded")
        if meta["family"] != "v2":
            return (
                Alignment("none", None, 0, 0, None,
                          f"Go {meta['go_version']} trace: its M ids are not OS thread ids"),
                meta,
            )
        table = pq.read_table(Path(work) / "decoded" / "transitions.parquet", columns=_COLUMNS)
    go = syscall_intervals(table)
    coarse = None if clock is None else int(clock["realtime_minus_monotonic_ns"])
    return align(go, os_calls(poller), meta.get("wall_clock"), coarse), meta
