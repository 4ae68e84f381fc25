"""Load a recording's ``sched.parquet`` (the kernel's scheduling of its threads)
into ``os_sched_intervals`` / ``os_sched_recordings`` (docs/offcpu.md).

:func:`store_sched` runs inside the poller loader's transaction
(ingest/load/poller.py calls it once the recording's rows are stored), with the
alignment it measured: trace ns = wall ns - ``offset_ns``. When that alignment
found nothing (``method`` ``none``), the scheduling recording's own clock
reading is used: on Linux, Go 1.22+ trace time is CLOCK_MONOTONIC, and the
recorder read CLOCK_REALTIME - CLOCK_MONOTONIC when it started
(``monotonic-clock``). :func:`attach_sched_dir` attaches a directory holding
only sched.parquet to a stored trace the same way, aligning with the trace's
clock snapshot (Go 1.25+) or that clock reading.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, delete, insert, select

from collectors.poller import sched_parse
from ingest.load.pipeline import IngestError
from ingest.store import models, os_sched_models
from ingest.store.db import write_tx
from ingest.store.traces import row_of_trace

_BATCH = 5000


class BadSchedError(IngestError):
    """sched.parquet is there but cannot be read."""


def read_sched_table(directory: Path) -> Any | None:
    """The directory's sched table (pyarrow), None without one; BadSchedError if unreadable."""
    try:
        return sched_parse.read_sched(directory)
    except sched_parse.BadSchedError as e:
        raise BadSchedError(str(e)) from None


def _sha256(directory: Path, table: Any) -> str:
    h = hashlib.sha256(b"gmpscope sched\0")
    pfile = directory / sched_parse.SCHED_FILE
    if pfile.is_file():
        with open(pfile, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    else:  # a raw recording left by a killed recorder
        h.update(str(table.num_rows).encode())
        h.update(table.column("ts_ns").to_numpy(zero_copy_only=False).tobytes())
    return h.hexdigest()


def clear_sched(conn: Connection, trace_id: int) -> None:
    """Delete a trace's scheduling rows."""
    for table in (os_sched_models.os_sched_intervals, os_sched_models.os_sched_recordings):
        conn.execute(delete(table).where(table.c.trace_id == trace_id))


def _own_alignment(meta: dict[str, Any], trace: Any) -> tuple[str, int | None, bool]:
    """(method, offset, m_is_tid) from the trace's clock snapshot or the recorder's clock."""
    if trace is None or trace.family != "v2":
        return "none", None, False
    if trace.wall_start_ns is not None and trace.first_ts is not None:
        return "clock-snapshot", int(trace.wall_start_ns) - int(trace.first_ts), True
    clock = meta.get("clock") or {}
    off = clock.get("offset_start_ns")
    return ("monotonic-clock", int(off), True) if off is not None else ("none", None, True)


def store_sched(conn: Connection, trace_id: int, directory: Path,
                alignment: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Replace trace ``trace_id``'s scheduling rows with ``directory``'s sched.parquet
    (none stored, and None returned, without one). ``alignment`` is the poller
    loader's (method, offset_ns, m_is_tid); without a usable one the trace's
    clock snapshot or the recorder's own clock reading aligns it."""
    clear_sched(conn, trace_id)
    table = read_sched_table(directory)
    if table is None:
        return None
    meta = sched_parse.table_meta(table)
    al = alignment or {}
    method, offset, m_is_tid = (str(al.get("method") or "none"), al.get("offset_ns"),
                                bool(al.get("m_is_tid")))
    if offset is None or method == "none":
        t = models.traces
        trace = conn.execute(select(t.c.family, t.c.wall_start_ns, t.c.first_ts)
                             .where(t.c.id == trace_id)).first()
        method, offset, m_is_tid = _own_alignment(meta, trace)
    iv = sched_parse.table_intervals(table)
    off = 0 if offset is None else int(offset)
    rows = [{"trace_id": trace_id, "tid": int(iv.tid[i]), "start_ts": int(iv.start[i]) - off,
             "end_ts": int(iv.end[i]) - off, "m": int(iv.tid[i]) if m_is_tid else None,
             "kind": iv.kind[i], "state": iv.state[i] or None, "cpu": int(iv.cpu[i])}
            for i in range(len(iv))]
    if offset is not None:
        for lo in range(0, len(rows), _BATCH):
            conn.execute(insert(os_sched_models.os_sched_intervals), rows[lo:lo + _BATCH])
    started, ended = meta.get("started_ns"), meta.get("ended_ns")
    summary = {
        "trace_id": trace_id, "sha256": _sha256(directory, table), "method": method,
        "offset_ns": None if offset is None else int(offset),
        "partial": bool(meta.get("partial")), "stopped_by": meta.get("stopped_by"),
        "lost_events": int(meta.get("lost_events") or 0), "events": int(table.num_rows),
        "intervals": len(rows) if offset is not None else 0,
        "threads": len(np.unique(iv.tid)),
        "first_ts": None if offset is None or started is None else int(started) - off,
        "last_ts": None if offset is None or ended is None else int(ended) - off,
        "meta": json.dumps(meta, sort_keys=True), "created_at": datetime.now(UTC),
    }
    conn.execute(insert(os_sched_models.os_sched_recordings), [summary])
    return {k: v for k, v in summary.items() if k not in ("meta", "created_at")}


def attach_sched_dir(engine: Engine, trace_id: int, directory: Path) -> dict[str, Any] | None:
    """Attach ``directory``'s sched.parquet to stored trace ``trace_id`` on its own
    (no poller.parquet beside it); LookupError when there is no such trace."""
    with write_tx(engine) as conn:
        t = models.traces
        if conn.execute(select(t.c.id).where(t.c.id == trace_id)).first() is None:
            raise LookupError(f"trace {trace_id}")
        return store_sched(conn, trace_id, directory)


def sched_recording_of(engine: Engine | Connection, trace_id: int) -> dict[str, Any] | None:
    """The os_sched_recordings row of a trace (meta decoded), or None."""
    out = row_of_trace(engine, os_sched_models.os_sched_recordings, trace_id, ("meta",))
    if out is not None:
        out.pop("created_at", None)
    return out
