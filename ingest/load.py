"""Load decoded traces into the database: the one door every trace enters by.

:func:`ingest_trace_file` decodes a raw trace into a temporary Parquet
directory (the same code as ``gmpscope decode``) and loads that directory with
:func:`load_parquet_dir`. Each trace is written in one transaction: a failure
or a kill part-way leaves no trace of it. Everything is read and derived
before the write transaction starts, so the write lock is held only while
rows are inserted.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, select
from sqlalchemy.exc import IntegrityError

from ingest import derive, eventrows, models
from ingest.bulk import Col, insert_columns, insert_int_arrays
from ingest.columns import (
    Gather,
    Nullable,
    ParquetDirError,
    Transitions,
    read_meta,
    read_table,
    read_transitions,
)
from ingest.config import Settings
from ingest.db import write_tx

#: progress(stage, done, total): called as work advances (rows for "load").
Progress = Callable[[str, int, int], None]

INTERVAL_COLUMNS = ("trace_id", "resource", "rid", "start_ts", "seq", "end_ts", "from_state",
                    "state", "reason", "m", "p", "g", "stack_id")


class IngestError(Exception):
    """The input cannot be ingested; the message says why in one line."""


class BadTraceError(IngestError):
    """The file is not a readable Go execution trace."""


class BadParquetError(IngestError):
    """The directory is not a decoded trace (docs/schema.md)."""


@dataclass(frozen=True)
class IngestResult:
    """What the API answers: the trace's id and a few facts; ``created`` is
    False when the same content was already there."""

    id: int
    sha256: str
    go_version: str
    events: int
    goroutines: int
    created: bool

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "sha256": self.sha256, "go_version": self.go_version,
                "events": self.events, "goroutines": self.goroutines}


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def find_by_sha(engine: Engine | Connection, sha256: str) -> IngestResult | None:
    """The stored trace with this content hash, if any."""
    t = models.traces
    stmt = select(t.c.id, t.c.go_version, t.c.events, t.c.goroutines).where(
        t.c.sha256 == sha256)
    if isinstance(engine, Connection):
        row = engine.execute(stmt).first()
    else:
        with engine.connect() as conn:
            row = conn.execute(stmt).first()
    if row is None:
        return None
    return IngestResult(id=row.id, sha256=sha256, go_version=row.go_version,
                        events=row.events, goroutines=row.goroutines, created=False)


def raw_path(data_dir: Path, sha256: str) -> Path:
    """Where the raw trace with this hash is kept."""
    return data_dir / "traces" / f"{sha256}.trace"


def ingest_trace_file(engine: Engine, path: Path, name: str | None = None, *,
                      data_dir: Path | None = None, sha256: str | None = None,
                      progress: Progress | None = None) -> IngestResult:
    """Decode and load a raw trace file; keep a copy named by its sha256.

    ``data_dir`` defaults to the configured one ($GMPSCOPE_DATA). Raises
    BadTraceError for a file that is not a trace (the database is untouched).
    """
    from collectors.gotrace.errors import TraceFormatError
    from collectors.gotrace.todir import decode_file_to_dir

    path = Path(path)
    ddir = data_dir if data_dir is not None else Settings.from_env().data_dir
    if not path.is_file():
        raise BadTraceError(f"{path}: no such file")
    sha = sha256 or file_sha256(path)
    found = find_by_sha(engine, sha)
    if found is not None:
        return found
    tmp_root = ddir / "tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ingest-", dir=tmp_root))
    try:
        if progress:
            progress("decode", 0, 1)
        try:
            decode_file_to_dir(path, work / "parquet")
        except TraceFormatError as e:
            raise BadTraceError(f"{name or path.name}: not a readable Go trace: {e}") from None
        if progress:
            progress("decode", 1, 1)
        keep = raw_path(ddir, sha)
        made_copy = False
        if not keep.exists():
            keep.parent.mkdir(parents=True, exist_ok=True)
            part = work / "raw.part"
            shutil.copyfile(path, part)
            os.replace(part, keep)
            made_copy = True
        try:
            return load_parquet_dir(engine, work / "parquet", name or path.name, sha256=sha,
                                    source="trace", size_bytes=path.stat().st_size,
                                    progress=progress)
        except BaseException:
            if made_copy and find_by_sha(engine, sha) is None:
                keep.unlink(missing_ok=True)
            raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def dir_sha256(directory: Path, meta: dict[str, Any]) -> str:
    """The raw trace's sha256 from meta.json (so a trace and its decoded
    directory are the same trace), else a hash of the directory's files."""
    src = meta.get("source") or {}
    sha = src.get("sha256") if isinstance(src, dict) else None
    if isinstance(sha, str) and len(sha) == 64:
        return sha
    h = hashlib.sha256()
    for f in sorted(columns_files(directory)):
        h.update(f.name.encode() + b"\0")
        h.update(file_sha256(f).encode())
    return h.hexdigest()


def columns_files(directory: Path) -> list[Path]:
    from ingest.columns import FILES

    return [directory / f for f in FILES]


def load_parquet_dir(engine: Engine, directory: Path, name: str | None = None, *,
                     sha256: str | None = None, source: str = "parquet",
                     size_bytes: int | None = None,
                     progress: Progress | None = None) -> IngestResult:
    """Load a decoded trace directory (docs/schema.md) in one transaction.

    The same content again returns the existing trace (``created=False``).
    Raises BadParquetError for a directory that breaks the contract, leaving
    the database as it was.
    """
    started = time.perf_counter()
    directory = Path(directory)
    try:
        meta = read_meta(directory)
        sha = sha256 or dir_sha256(directory, meta)
        found = find_by_sha(engine, sha)
        if found is not None:
            return found
        tr = read_transitions(directory, expected_rows=int(meta["transitions"]))
        events = read_table(directory, "events")
        tstacks = read_table(directory, "transition_stacks")
        stacks = read_table(directory, "stacks")
    except ParquetDirError as e:
        raise BadParquetError(str(e)) from None
    except (KeyError, TypeError, ValueError) as e:
        raise BadParquetError(f"{directory}: malformed decoded trace: {e}") from None
    if progress:
        progress("derive", 0, 1)
    d, ordered = _derive(tr, meta, events, tstacks, stacks)
    del events, tstacks, stacks
    if progress:
        progress("derive", 1, 1)
    src = meta.get("source") or {}
    size = size_bytes if size_bytes is not None else (src.get("size") if src else None)
    loss = meta["loss"]
    wall = meta.get("wall_clock")
    trace_row = {
        "sha256": sha, "name": name or (src.get("name") if src else None) or directory.name,
        "source": source, "size_bytes": size, "go_version": meta["go_version"],
        "family": meta["family"], "ticks_per_sec": meta.get("ticks_per_sec"),
        "generations": meta.get("generations"), "first_ts": meta["first_ts"],
        "last_ts": meta["last_ts"],
        "wall_start_ns": (wall["wall_ns"] - (wall["trace_ns"] - meta["first_ts"])
                          if wall else None),
        "events": meta["events"], "transitions": meta["transitions"],
        "goroutines": _nrows(d["goroutines"]), "procs": _nrows(d["procs"]),
        "threads": _nrows(d["threads"]),
        "stacks": meta.get("stacks", 0),
        "event_counts": json.dumps(meta.get("event_counts", {}), sort_keys=True),
        "status": "damaged" if loss.get("error") else "complete",
        "bytes_lost": loss.get("bytes_lost", 0),
        "generations_lost": loss.get("generations_lost", 0),
        "loss_offset": loss.get("offset", -1), "loss_error": loss.get("error", ""),
        "created_at": datetime.now(UTC),
    }
    total = len(tr) + sum(_nrows(c) for c in d.values())
    done = [0]

    def advance(k: int) -> None:
        done[0] += k
        if progress:
            progress("load", done[0], total)

    try:
        with write_tx(engine) as conn:
            found = find_by_sha(conn, sha)
            if found is not None:
                return found
            trace_id = conn.execute(models.traces.insert().values(**trace_row)
                                    .returning(models.traces.c.id)).scalar_one()
            _insert_all(conn, trace_id, tr, d, ordered, advance)
            conn.execute(models.traces.update().where(models.traces.c.id == trace_id)
                         .values(ingest_seconds=time.perf_counter() - started))
    except IntegrityError:
        # Another writer stored the same content first (PostgreSQL: no
        # up-front write lock); answer with its trace.
        found = find_by_sha(engine, sha)
        if found is None:
            raise
        return found
    return IngestResult(id=trace_id, sha256=sha, go_version=meta["go_version"],
                        events=int(meta["events"]), goroutines=trace_row["goroutines"],
                        created=True)


def _derive(tr: Transitions, meta: dict[str, Any], events: Any, tstacks: Any,
            stacks: Any) -> tuple[dict[str, derive.Columns], derive.Ordered]:
    """Every derived table's columns keyed by table name, and the interval order."""
    last_ts = int(meta["last_ts"])
    if len(tr):
        last_ts = max(last_ts, int(tr.ts.max()))
    o = derive.order_intervals(tr, last_ts)
    tstack_of = dict(zip(tstacks.column("row").to_pylist(),
                         tstacks.column("stack_id").to_pylist(), strict=True))
    sid = stacks.column("stack_id").to_numpy()
    depth = stacks.column("depth").to_numpy()
    top = np.flatnonzero(depth == 0)
    funcs = stacks.column("function").take(top).to_pylist()
    stack_functions = dict(zip(sid[top].tolist(), funcs, strict=True))
    gor, prc = derive.resource_summaries(tr, o, stack_functions, tstack_of)
    ev_m = events.column("m").to_numpy()
    ev_ts = events.column("ts").to_numpy()
    pcs = stacks.column("pc").to_numpy().astype(np.int64)  # wraps like task ids
    out: dict[str, derive.Columns] = {
        "goroutines": gor,
        "procs": prc,
        "threads": derive.thread_summaries(tr, o, ev_m, ev_ts),
        "syscalls": derive.syscalls(tr, o),
        "proc_runs": derive.proc_runs(tr, o),
        "transition_counts": _cols(("resource", "from_state", "to_state", "reason", "count"),
                                   derive.transition_counts(tr)),
        "state_edges": _cols(("resource", "from_state", "to_state", "count", "dwell_count",
                              "dwell_mean_ns", "dwell_p50_ns", "dwell_p99_ns",
                              "dwell_max_ns"), derive.state_edges(tr, o)),
        "reasons": {"code": list(range(len(tr.reasons))), "reason": list(tr.reasons)},
        "transition_stacks": {"seq": list(tstack_of), "stack_id": list(tstack_of.values())},
        "stacks": {"stack_id": sid.tolist(), "depth": depth.tolist(),
                   "function": stacks.column("function").to_pylist(),
                   "file": stacks.column("file").to_pylist(),
                   "line": stacks.column("line").to_pylist(), "pc": pcs.tolist()},
        "ranges": eventrows.ranges(events),
        "tasks": eventrows.tasks(events),
        "regions": eventrows.regions(events),
        "logs": eventrows.logs(events),
        "metrics": eventrows.metrics(events),
        "other_events": eventrows.other_events(events),
    }
    return out, o


def _cols(names: tuple[str, ...], rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    return {n: [r[i] for r in rows] for i, n in enumerate(names)}


def _nrows(cols: derive.Columns) -> int:
    if not cols:
        return 0
    first = next(iter(cols.values()))
    if isinstance(first, Nullable):
        return len(first.values)
    if isinstance(first, Gather):
        return len(first.index)
    return len(first)


def _insert_all(conn: Connection, trace_id: int, tr: Transitions,
                d: dict[str, derive.Columns], o: derive.Ordered,
                advance: Callable[[int], None]) -> None:
    const = {"trace_id": trace_id}
    for name, cols in d.items():
        if _nrows(cols):
            insert_columns(conn, models.metadata.tables[name], cols, const, advance)
    order = o.order
    # Interval rows in primary-key order, so that SQLite appends to its B-tree;
    # columns are gathered chunk by chunk (no reordered copy of the trace).
    icols: list[Col] = [
            trace_id, Gather(tr.res, order), Gather(tr.rid, order), Gather(tr.ts, order),
            order, o.end, Gather(tr.frm, order), Gather(tr.to, order),
            Gather(tr.reason, order), Gather(tr.m, order), Gather(tr.p, order),
            Gather(tr.g, order), Gather(tr.stack, order)]
    insert_int_arrays(conn, models.intervals, INTERVAL_COLUMNS, icols, len(order), advance)
