"""One eBPF recording end to end: tracer -> parse -> poller.parquet, uring.parquet, meta.json.

The rows are the strace backend's (docs/schema.md, ``poller.parquet``), so
every view, join and rule reads them unchanged; ``meta.json`` says
``backend: ebpf``, ``ebpf.transport`` (``ringbuf`` or ``bpftrace``, and
``transport_note``: why not the ring buffer when it fell back) and how the
probes' monotonic clock was mapped to the wall clock. io_uring requests go
to ``uring.parquet`` (one row per request).

:func:`finish` turns what a killed recorder left (the raw output, its notes and
the descriptor snapshots) into a recording marked ``partial``.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from collectors.poller.ebpf_fds import Describer, Snapshot
from collectors.poller.ebpf_parse import EbpfParser, UringRequest, iter_rows
from collectors.poller.ebpf_recorder import FDS_FILE, NOTES_FILE, RAW_FILE, EbpfRun
from collectors.poller.parquet_out import collect_table, write_recording
from collectors.poller.records import COVERED_SYSCALLS

URING_FILE = "uring.parquet"
RAW_KEPT = RAW_FILE + ".gz"
URING_SCHEMA = pa.schema([
    ("tid", pa.int64()), ("submit_ns", pa.int64()), ("complete_ns", pa.int64()),
    ("latency_ns", pa.int64()), ("ring", pa.int64()), ("user_data", pa.int64()),
    ("opcode", pa.string()), ("result", pa.int64()), ("cflags", pa.int64()),
], metadata={b"schema_version": b"1", b"producer": b"gmpscope poller ebpf"})
CLOCK_METHOD = ("the probes' times (bpf_ktime_get_ns) are CLOCK_MONOTONIC; each time is "
                "mapped to CLOCK_REALTIME with realtime-monotonic read back to back when the "
                "probes were attached and when they were stopped, interpolated linearly "
                "between the two")


def wall_mapper(clock: dict[str, int], clock_end: dict[str, int] | None) -> Callable[[int], int]:
    """monotonic ns -> wall ns, from the readings at start and (when known) at end."""
    m0, d0 = clock["monotonic_ns"], clock["realtime_minus_monotonic_ns"]
    if not clock_end or clock_end["monotonic_ns"] <= m0:
        return lambda m: m + d0
    m1, d1 = clock_end["monotonic_ns"], clock_end["realtime_minus_monotonic_ns"]
    span, drift = m1 - m0, d1 - d0
    return lambda m: m + d0 + (drift * (min(max(m, m0), m1) - m0)) // span


def read_snapshots(path: Path) -> list[Snapshot]:
    """The descriptor snapshots the recorder wrote (``fds.jsonl``)."""
    out: list[Snapshot] = []
    if not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            d = json.loads(line)
            out.append(Snapshot(int(d["wall_ns"]), {int(k): str(v) for k, v in d["fds"].items()}))
        except (ValueError, KeyError, TypeError):
            continue  # a line cut by a kill
    return out


def _u64_as_i64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def uring_table(reqs: list[UringRequest]) -> Any:
    """uring.parquet's table, in submission order."""
    reqs = sorted(reqs, key=lambda r: (r.submit_ns, r.tid))
    return pa.table({
        "tid": [r.tid for r in reqs], "submit_ns": [r.submit_ns for r in reqs],
        "complete_ns": [r.complete_ns for r in reqs], "latency_ns": [r.latency_ns for r in reqs],
        "ring": [_u64_as_i64(r.ring) for r in reqs],
        "user_data": [_u64_as_i64(r.user_data) for r in reqs],
        "opcode": [r.opcode for r in reqs], "result": [r.result for r in reqs],
        "cflags": [r.cflags for r in reqs],
    }, schema=URING_SCHEMA)


def build(out_dir: Path, notes: dict[str, Any], clock_end: dict[str, int] | None
          ) -> tuple[Any, Any, EbpfParser]:
    """Parse ``out_dir``'s raw output: (poller table, uring table, parser)."""
    to_wall = wall_mapper(notes["clock"], clock_end)
    parser = EbpfParser(to_wall=to_wall)
    with open(out_dir / RAW_FILE, encoding="utf-8", errors="replace") as fh:
        rows = list(iter_rows(parser, fh))
    rows.sort(key=lambda r: (r.ts_ns, r.tid))
    describer = Describer(rows, read_snapshots(out_dir / FDS_FILE))
    for row in rows:
        describer.feed(row)
    return rows, uring_table(parser.requests), parser


def _keep_raw(out_dir: Path) -> None:
    src = out_dir / RAW_FILE
    with open(src, "rb") as fin, gzip.open(out_dir / RAW_KEPT, "wb", compresslevel=6) as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    src.unlink()


def bpftrace_version(exe: str) -> str:
    """``v0.17.0``."""
    import subprocess

    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.split()[-1] if out else "unknown"


def write(out_dir: Path, notes: dict[str, Any], run: EbpfRun | None,
          baseline: tuple[float, int] | None, extra_meta: dict[str, Any]) -> dict[str, Any]:
    """Parse, describe and write the recording; returns meta.json's content.

    ``run`` is None for a recording whose recorder was killed (:func:`finish`).
    """
    from collectors.poller.collect_meta import ebpf_meta

    clock_end = run.clock_end if run is not None else None
    rows, uring, parser = build(out_dir, notes, clock_end)
    if run is not None:  # bpftrace reports a full perf buffer on stderr (the loader in its output)
        parser.stats.lost += sum(int(m) for m in re.findall(r"Lost (\d+) events", run.stderr))
    table, summary = collect_table(rows)
    del rows
    pq.write_table(uring, out_dir / URING_FILE, compression="zstd")
    meta = ebpf_meta(notes, run, summary, parser, baseline, CLOCK_METHOD)
    meta.update(extra_meta)
    transport = run.transport if run is not None else notes.get("transport", "bpftrace")
    meta["ebpf"]["transport"] = transport
    meta["ebpf"]["transport_note"] = (run.transport_note if run is not None
                                      else notes.get("transport_note"))
    if transport == "ringbuf":
        meta["ebpf"]["tool"] = "libbpf ring buffer (collectors/poller/csrc)"
    meta["ebpf"]["syscalls"] = list(COVERED_SYSCALLS)
    meta["ebpf"]["uring_file"] = URING_FILE
    write_recording(out_dir, table, meta)
    _keep_raw(out_dir)
    (out_dir / NOTES_FILE).unlink(missing_ok=True)
    return meta


def finish(out_dir: Path) -> dict[str, Any] | None:
    """Make a recording of what a killed recorder left in ``out_dir`` (marked
    partial); None when there is nothing to finish."""
    notes_path = out_dir / NOTES_FILE
    if not notes_path.is_file() or not (out_dir / RAW_FILE).is_file():
        return None
    try:
        notes = json.loads(notes_path.read_text(encoding="utf-8"))
    except ValueError:
        return None
    return write(out_dir, notes, None, None, {"partial": True, "stopped_by": "recorder killed"})


def pending(out_dir: Path) -> bool:
    """A killed recorder's leftovers are there, waiting for :func:`finish`."""
    return (out_dir / NOTES_FILE).is_file() and (out_dir / RAW_FILE).is_file() \
        and os.access(out_dir, os.W_OK)
