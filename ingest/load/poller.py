"""Load an OS-side recording (``gmpscope record``: poller.parquet + meta.json).

A recording either attaches to a stored Go trace of the same run
(:func:`attach_recording`) or becomes a trace of its own
(:func:`ingest_recording`: ``traces.source = "poller"``, family ``"os"``).
:func:`ingest_recording_dir` is what ``gmpscope ingest DIR`` and the HTTP API
call. The alignment of trace time with the recording's wall clock is measured
again at attach time against the stored trace (its clock snapshot and its
``syscalls`` rows, :mod:`collectors.poller.align`), so a recording made
without ``--go-trace`` attaches just as well. docs/poller.md, docs/schema.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, and_, delete, insert, select

from ingest.load import os_sched as _sched  # issue 26: sched.parquet (the hook in _store)
from ingest.load.pipeline import IngestError, IngestResult, find_by_sha, ingest_trace_file
from ingest.store import models, poller_models
from ingest.store.db import write_tx
from ingest.store.traces import row_of_trace

POLLER_FILE = "poller.parquet"
META_FILE = "meta.json"
URING_FILE = "uring.parquet"
SOURCE = "poller"
FAMILY = "os"
GO_VERSION = "n/a"
#: Method of a standalone recording: its trace time is the wall clock itself.
WALL_CLOCK = "wall-clock"
_REQUIRED = ("ts_ns", "tid", "kind", "name", "duration_ns", "result", "errno")
_BATCH = 5000
#: poller.parquet column -> poller_events column, where the names differ.
_RENAMED = {"name": "syscall", "ts_ns": "wall_ns"}
_COPIED = ("tid", "kind", "name", "ts_ns", "fd", "fd_path", "new_fd", "new_fd_path", "epfd",
           "op", "events", "timeout_ns", "maxevents", "count", "to_submit", "min_complete",
           "flags", "path", "addr", "args", "partial", "result", "errno", "duration_ns",
           "ready_fds")


class BadRecordingError(IngestError):
    """The directory is not a readable poller recording."""


@dataclass(frozen=True)
class Recording:
    """A recording read from its directory."""

    directory: Path
    table: Any  # pyarrow Table in poller.parquet's schema
    meta: dict[str, Any]
    sha256: str  # of poller.parquet (with a prefix: never equal to a Go trace's hash)
    uring: Any = None  # uring.parquet's table (eBPF recordings), or None

    @property
    def rows(self) -> int:
        return int(self.table.num_rows)


@dataclass(frozen=True)
class AttachResult:
    """What attaching did: the trace, the alignment found, the rows stored."""

    trace_id: int
    rows: int
    method: str
    offset_ns: int | None
    quality: float | None
    slack_ns: int | None
    created: bool  # False: the same recording was already attached
    replaced: bool  # another recording was attached before and was replaced

    def as_dict(self) -> dict[str, Any]:
        return {"trace_id": self.trace_id, "rows": self.rows, "method": self.method,
                "offset_ns": self.offset_ns, "quality": self.quality,
                "slack_ns": self.slack_ns, "created": self.created, "replaced": self.replaced}


def is_recording_dir(path: Path) -> bool:
    """True for a directory holding poller.parquet, or what a killed eBPF recorder left."""
    from collectors.poller.collect_ebpf import pending

    return path.is_dir() and ((path / POLLER_FILE).is_file() or pending(path))


def read_recording(directory: Path) -> Recording:
    """Read and check a recording directory; BadRecordingError says what is wrong.

    A directory a killed eBPF recorder left (its raw output and notes, no
    poller.parquet) is first made into a recording marked partial.
    """
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    from collectors.poller.collect_ebpf import finish, pending

    pfile = directory / POLLER_FILE
    if not pfile.is_file() and pending(directory):
        try:
            finish(directory)
        except (OSError, ValueError, KeyError) as e:
            raise BadRecordingError(f"{directory.name}: the partial eBPF recording could not "
                                    f"be read: {e}") from None
    if not pfile.is_file():
        raise BadRecordingError(f"{directory.name}: no {POLLER_FILE} (not a gmpscope recording)")
    try:
        table = pq.read_table(pfile)
    except Exception as e:  # noqa: BLE001 - pyarrow raises many types for bad files
        raise BadRecordingError(f"{POLLER_FILE}: not a readable Parquet file: {e}") from None
    missing = [c for c in _REQUIRED if c not in table.column_names]
    if missing:
        raise BadRecordingError(f"{POLLER_FILE}: missing columns {', '.join(missing)}")
    meta: dict[str, Any] = {}
    mfile = directory / META_FILE
    if mfile.is_file():
        try:
            meta = json.loads(mfile.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise BadRecordingError(f"{META_FILE}: not JSON: {e}") from None
        if not isinstance(meta, dict):
            raise BadRecordingError(f"{META_FILE}: not a JSON object")
    h = hashlib.sha256(b"gmpscope poller\0")
    with open(pfile, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    uring = None
    ufile = directory / URING_FILE
    if ufile.is_file():
        try:
            uring = pq.read_table(ufile)
        except Exception as e:  # noqa: BLE001 - pyarrow raises many types for bad files
            raise BadRecordingError(f"{URING_FILE}: not a readable Parquet file: {e}") from None
        if "submit_ns" not in uring.column_names or "opcode" not in uring.column_names:
            raise BadRecordingError(f"{URING_FILE}: missing columns submit_ns, opcode")
    return Recording(directory, table, meta, h.hexdigest(), uring)


def fd_kind(path: str | None) -> str | None:
    """What a strace ``-yy`` description names: tcp, udp, unix, eventpoll, io_uring, ..."""
    if not path:
        return None
    for prefix, kind in (("TCP", "tcp"), ("UDP", "udp"), ("UNIX", "unix"),
                         ("NETLINK", "netlink"), ("socket:", "socket"), ("pipe:", "pipe"),
                         ("anon_inode:[eventpoll]", "eventpoll"),
                         ("anon_inode:[io_uring]", "io_uring"), ("anon_inode:", "anon"),
                         ("/dev/", "device"), ("/proc/", "proc"), ("/sys/", "sys"),
                         ("/", "file")):
        if path.startswith(prefix):
            return kind
    return "other"


# --------------------------------------------------------------------------
# alignment against a stored trace


def _go_calls(conn: Connection, trace_id: int) -> Any:
    """The trace's Go syscall intervals (M, start, end) from the syscalls table."""
    from collectors.poller.align import Calls

    sc, rr = models.syscalls, models.row_ranges
    rng = conn.execute(select(rr.c.first_id, rr.c.last_id).where(
        rr.c.trace_id == trace_id, rr.c.table_name == "syscalls")).first()
    if rng is None:
        return Calls.of([], [], [])
    rows = conn.execute(select(sc.c.m, sc.c.start_ts, sc.c.end_ts).where(and_(
        sc.c.id.between(rng.first_id, rng.last_id), sc.c.trace_id == trace_id,
        sc.c.m >= 0, sc.c.start_known.is_(True)))).all()
    arr = np.array([tuple(r) for r in rows], dtype=np.int64).reshape(-1, 3)
    return Calls(arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy())


def _os_calls(table: Any) -> Any:
    from collectors.poller.gojoin import os_calls

    return os_calls(table)


def measure_alignment(conn: Connection, trace_id: int, rec: Recording) -> dict[str, Any]:
    """How the stored trace's time maps to the recording's wall clock (align.Alignment)."""
    from collectors.poller.align import align, match_offset

    t = models.traces
    tr = conn.execute(select(t.c.family, t.c.go_version, t.c.first_ts, t.c.wall_start_ns)
                      .where(t.c.id == trace_id)).first()
    if tr is None:
        raise LookupError(f"trace {trace_id}")
    if tr.family != "v2":
        return {"method": "none", "offset_ns": None, "go_syscalls": 0, "matched": 0,
                "quality": None, "slack_ns": None, "m_is_tid": False,
                "note": f"Go {tr.go_version} trace: its M ids are not OS thread ids and "
                        "it has no clock to align with"}
    wall_clock = (None if tr.wall_start_ns is None or tr.first_ts is None
                  else {"wall_ns": int(tr.wall_start_ns), "trace_ns": int(tr.first_ts)})
    clock = rec.meta.get("clock") or {}
    coarse = clock.get("realtime_minus_monotonic_ns")
    go, osc = _go_calls(conn, trace_id), _os_calls(rec.table)
    found = align(go, osc, wall_clock, None if coarse is None else int(coarse))
    out = {**found.as_dict(), "m_is_tid": True}
    if found.method == "clock-snapshot" and found.offset_ns is not None:
        # An independent check of the snapshot: the offsets the syscall pairs allow.
        pairs = match_offset(go, osc, found.offset_ns)
        if pairs is not None:
            low, high, n = pairs
            out["slack_ns"] = high - low
            inside = "contains" if low <= found.offset_ns <= high else "does NOT contain"
            out["note"] = (f"{found.note}; the offsets {n} syscall pairs allow span "
                           f"{high - low} ns and {inside} it")
    return out


# --------------------------------------------------------------------------
# storing


def _event_rows(trace_id: int, table: Any, offset_ns: int | None,
                m_is_tid: bool) -> Any:
    """poller_events rows, in batches of dicts."""
    cols = {c: table.column(c).to_pylist() for c in _COPIED if c in table.column_names}
    n = table.num_rows
    for lo in range(0, n, _BATCH):
        batch = []
        for i in range(lo, min(n, lo + _BATCH)):
            row: dict[str, Any] = {"trace_id": trace_id, "seq": i}
            for c, values in cols.items():
                row[_RENAMED.get(c, c)] = values[i]
            for c in _COPIED:
                row.setdefault(_RENAMED.get(c, c), None)
            row["partial"] = bool(row["partial"])
            wall = int(row["wall_ns"])
            row["ts"] = None if offset_ns is None else wall - offset_ns
            row["m"] = int(row["tid"]) if m_is_tid else None
            row["fd_kind"] = fd_kind(row["fd_path"]) or fd_kind(row["new_fd_path"])
            batch.append(row)
        yield batch


def _recording_row(trace_id: int, rec: Recording, name: str, standalone: bool,
                   al: dict[str, Any]) -> dict[str, Any]:
    meta, t = rec.meta, rec.table
    parse = meta.get("parse") or {}
    kinds = t.column("kind").to_pylist()
    ts = t.column("ts_ns").to_numpy(zero_copy_only=False)
    dur = t.column("duration_ns").to_numpy(zero_copy_only=False)
    ends = np.where(np.isnan(dur.astype(float)), ts, ts + np.nan_to_num(dur).astype(np.int64))
    over = meta.get("overhead") or {}
    strace = meta.get("strace") or {}
    command = meta.get("command") or []
    return {
        "trace_id": trace_id, "sha256": rec.sha256, "name": name, "standalone": standalone,
        "method": str(al.get("method") or "none"), "offset_ns": al.get("offset_ns"),
        "quality": al.get("quality"), "slack_ns": al.get("slack_ns"),
        "go_syscalls": al.get("go_syscalls"), "matched": al.get("matched"),
        "note": str(al.get("note") or ""), "rows": rec.rows,
        "syscalls": sum(1 for k in kinds if k == "syscall"),
        "signals": sum(1 for k in kinds if k == "signal"),
        "exits": sum(1 for k in kinds if k == "exit"),
        "unknown_lines": int(parse.get("unknown") or 0),
        "threads": len(set(t.column("tid").to_pylist())),
        "mode": meta.get("mode"), "command": json.dumps(command),
        "stopped_by": meta.get("stopped_by"),
        "first_wall_ns": int(ts.min()) if len(ts) else None,
        "last_wall_ns": int(ends.max()) if len(ts) else None,
        "traced_wall_s": over.get("traced_wall_s"), "baseline_wall_s": over.get("baseline_wall_s"),
        "slowdown": over.get("slowdown"), "strace_cpu_s": over.get("strace_cpu_s"),
        "strace_version": strace.get("version"),
        "meta": json.dumps(meta, sort_keys=True), "created_at": datetime.now(UTC),
    }


def _store(conn: Connection, trace_id: int, rec: Recording, name: str, standalone: bool,
           al: dict[str, Any]) -> None:
    offset = al.get("offset_ns")
    for batch in _event_rows(trace_id, rec.table, None if offset is None else int(offset),
                             bool(al.get("m_is_tid"))):
        conn.execute(insert(poller_models.poller_events), batch)
    conn.execute(insert(poller_models.poller_recordings),
                 [_recording_row(trace_id, rec, name, standalone, al)])
    rows = _uring_rows(trace_id, rec.uring, None if offset is None else int(offset))
    if rows:
        conn.execute(insert(poller_models.poller_uring), rows)
    _sched.store_sched(conn, trace_id, rec.directory, al)  # issue 26: sched.parquet, if any


def _uring_rows(trace_id: int, table: Any, offset_ns: int | None) -> list[dict[str, Any]]:
    """poller_uring rows from uring.parquet's table (none without one)."""
    if table is None or table.num_rows == 0:
        return []
    cols = {c: table.column(c).to_pylist() for c in table.column_names}
    out = []
    for i in range(table.num_rows):
        def get(c: str, i: int = i) -> Any:
            return cols[c][i] if c in cols else None

        submit = int(get("submit_ns"))
        out.append({"trace_id": trace_id, "seq": i, "tid": int(get("tid") or 0),
                    "submit_wall_ns": submit, "complete_wall_ns": get("complete_ns"),
                    "ts": None if offset_ns is None else submit - offset_ns,
                    "latency_ns": get("latency_ns"), "ring": get("ring"),
                    "user_data": get("user_data"), "opcode": str(get("opcode")),
                    "result": get("result"), "cflags": get("cflags")})
    return out


def _clear(conn: Connection, trace_id: int) -> None:
    for table in (poller_models.poller_events, poller_models.poller_recordings,
                  poller_models.poller_uring):
        conn.execute(delete(table).where(table.c.trace_id == trace_id))


def attach_recording(engine: Engine, trace_id: int, rec: Recording,
                     name: str | None = None) -> AttachResult:
    """Attach ``rec`` to stored trace ``trace_id`` (replacing a recording attached
    before); LookupError when there is no such trace."""
    pr = poller_models.poller_recordings
    with write_tx(engine) as conn:
        t = models.traces
        src = conn.execute(select(t.c.source).where(t.c.id == trace_id)).scalar_one_or_none()
        if src is None:
            raise LookupError(f"trace {trace_id}")
        if src == SOURCE:
            raise BadRecordingError(f"trace {trace_id} is itself an OS recording; attach "
                                    "recordings to a Go trace")
        old = conn.execute(select(pr.c.sha256, pr.c.method, pr.c.offset_ns, pr.c.quality,
                                  pr.c.slack_ns, pr.c.rows)
                           .where(pr.c.trace_id == trace_id)).first()
        if old is not None and old.sha256 == rec.sha256:
            return AttachResult(trace_id, int(old.rows), old.method, old.offset_ns,
                                old.quality, old.slack_ns, created=False, replaced=False)
        al = measure_alignment(conn, trace_id, rec)
        _clear(conn, trace_id)
        _store(conn, trace_id, rec, name or rec.directory.name, False, al)
    return AttachResult(trace_id, rec.rows, str(al["method"]), al.get("offset_ns"),
                        al.get("quality"), al.get("slack_ns"), created=True,
                        replaced=old is not None)


def ingest_recording(engine: Engine, rec: Recording, name: str | None = None) -> IngestResult:
    """Store ``rec`` as a trace of its own (source "poller"): its trace time is the
    wall clock (ns since the epoch), it has no goroutines, Ps or Go events."""
    found = find_by_sha(engine, rec.sha256)
    if found is not None:
        return found
    t = rec.table
    if rec.rows == 0:
        raise BadRecordingError("the recording has no rows: nothing to show")
    ts = t.column("ts_ns").to_numpy(zero_copy_only=False)
    dur = np.nan_to_num(t.column("duration_ns").to_numpy(zero_copy_only=False).astype(float))
    first, last = int(ts.min()), int((ts + dur.astype(np.int64)).max())
    by_name: dict[str, int] = {}
    for n in t.column("name").to_pylist():
        by_name[n] = by_name.get(n, 0) + 1
    label = name or rec.directory.name
    row = {
        "sha256": rec.sha256, "name": label, "source": SOURCE, "size_bytes":
            (rec.directory / POLLER_FILE).stat().st_size, "go_version": GO_VERSION,
        "family": FAMILY, "ticks_per_sec": None, "generations": None,
        "first_ts": first, "last_ts": last, "wall_start_ns": first, "events": rec.rows,
        "transitions": 0, "goroutines": 0, "procs": 0,
        "threads": len(set(t.column("tid").to_pylist())), "stacks": 0,
        "event_counts": json.dumps(by_name, sort_keys=True), "status": "complete",
        "bytes_lost": 0, "generations_lost": 0, "loss_offset": -1, "loss_error": "",
        "created_at": datetime.now(UTC),
    }
    al = {"method": WALL_CLOCK, "offset_ns": 0, "m_is_tid": False,
          "note": "an OS recording without a Go trace: its time is the wall clock"}
    with write_tx(engine) as conn:
        trace_id = int(conn.execute(insert(models.traces).values(**row)
                                    .returning(models.traces.c.id)).scalar_one())
        _store(conn, trace_id, rec, label, True, al)
    return IngestResult(id=trace_id, sha256=rec.sha256, go_version=GO_VERSION,
                        events=rec.rows, goroutines=0, created=True)


@dataclass(frozen=True)
class DirResult:
    """``gmpscope ingest DIR`` on a recording: the trace it belongs to and how."""

    trace: IngestResult  # the Go trace it was attached to, or the standalone recording
    attached: AttachResult | None  # None: stored as a trace of its own

    def as_dict(self) -> dict[str, Any]:
        out = {**self.trace.as_dict(), "created": self.trace.created,
               "recording": "standalone" if self.attached is None else "attached"}
        if self.attached is not None:
            out["attach"] = self.attached.as_dict()
        return out


def default_name(rec: Recording) -> str:
    """A recording's name when none is given: the program it recorded."""
    cmd = rec.meta.get("command") or []
    if isinstance(cmd, list) and cmd:
        return f"{Path(str(cmd[0])).name} (OS recording)"
    return f"recording-{rec.sha256[:12]}"


def go_trace_of(rec: Recording) -> Path | None:
    """The Go trace file meta.json names, when it is there (beside the recording
    first: a copied directory keeps its trace next to it)."""
    gt = rec.meta.get("go_trace") or {}
    if not isinstance(gt, dict):
        return None
    candidates = []
    if gt.get("name"):
        candidates.append(rec.directory / Path(str(gt["name"])).name)
        candidates.append(rec.directory.parent / Path(str(gt["name"])).name)
    if gt.get("path"):
        candidates.append(Path(str(gt["path"])))
    return next((c for c in candidates if c.is_file()), None)


def ingest_recording_dir(engine: Engine, directory: Path, *, data_dir: Path,
                         attach: int | None = None, name: str | None = None,
                         go_trace_ok: Callable[[Path], bool] | None = None) -> DirResult:
    """Attach a recording to trace ``attach``, or to the Go trace meta.json names
    (ingested first, or found by hash), or store it on its own."""
    rec = read_recording(directory)
    if attach is not None:
        from ingest.store.traces import get_trace

        trace = get_trace(engine, attach)
        if trace is None:
            raise LookupError(f"trace {attach}")
        res = attach_recording(engine, attach, rec, name)
        return DirResult(IngestResult(attach, str(trace["sha256"]), str(trace["go_version"]),
                                      int(trace["events"]), int(trace["goroutines"]), False),
                         res)
    go_file = go_trace_of(rec)
    if go_file is not None and (go_trace_ok is None or go_trace_ok(go_file)):
        trace_res = ingest_trace_file(engine, go_file, go_file.name, data_dir=data_dir)
        return DirResult(trace_res, attach_recording(engine, trace_res.id, rec, name))
    return DirResult(ingest_recording(engine, rec, name), None)


def recording_of(engine: Engine | Connection, trace_id: int) -> dict[str, Any] | None:
    """The poller_recordings row of a trace (meta and command decoded), or None."""
    return row_of_trace(engine, poller_models.poller_recordings, trace_id, ("meta", "command"))


def is_os_recording(engine: Engine, trace_id: int) -> bool:
    """True when the trace is an OS recording without a Go trace."""
    t = models.traces
    with engine.connect() as conn:
        src = conn.execute(select(t.c.source).where(t.c.id == trace_id)).scalar_one_or_none()
    return src == SOURCE
