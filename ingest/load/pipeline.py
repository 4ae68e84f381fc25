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
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, select, text
from sqlalchemy.exc import IntegrityError

from ingest.columns import (
    ParquetDirError,
    iter_table,
    read_meta,
    read_table,
)
from ingest.config import Settings
from ingest.derive.frame_writer import FrameWriter
from ingest.derive.lanesets import LaneSetKey
from ingest.load.decoded import Decoded, decode_file_in_memory
from ingest.load.derived import DerivedTables, derived_tables
from ingest.load.event_split import split_events
from ingest.load.insert_tables import IN_FILES, Staged, ahead_bytes, fork_events, insert_tables
from ingest.load.raw_copy import RawCopy, kept_path, raw_path
from ingest.load.tables import next_id
from ingest.load.transition_spill import read_transitions_spill, spill_dir
from ingest.memory import give_back_if_big
from ingest.store import interval_files, models
from ingest.store.coded_files import CodedFiles
from ingest.store.coded_models import coded_files
from ingest.store.db import checkpoint_meanwhile, first_row, write_tx
from ingest.timings import Timings

if TYPE_CHECKING:
    from ingest.load.decode_ahead import DecodeAhead

log = logging.getLogger(__name__)

#: progress(stage, done, total): called as work advances (rows for "load").
Progress = Callable[[str, int, int], None]

#: Arbitrary key of the PostgreSQL advisory lock that serialises loads.
_PG_LOAD_LOCK = 0x676D7074


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
    #: Seconds per phase of this load (ingest.timings); empty when it found
    #: the trace already stored.
    timings: dict[str, float] = field(default_factory=dict)

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
    row = first_row(engine, stmt)
    if row is None:
        return None
    return IngestResult(id=row.id, sha256=sha256, go_version=row.go_version,
                        events=row.events, goroutines=row.goroutines, created=False)


def ingest_trace_file(engine: Engine, path: Path, name: str | None = None, *,
                      data_dir: Path | None = None, sha256: str | None = None,
                      progress: Progress | None = None,
                      ahead: DecodeAhead | None = None, lanes: bool = True) -> IngestResult:
    """Decode and load a raw trace file; keep a copy named by its sha256.

    ``data_dir`` defaults to the configured one ($GMPSCOPE_DATA). Raises
    BadTraceError for a file that is not a trace (the database is untouched).
    ``ahead``: this file's decode, started earlier (the CLI starts it before
    it opens the database). ``lanes=False``: the timeline's lane sets not
    staged before the commit are left to the caller (ingest.api.warm builds
    them beside the reports).
    """
    from collectors.gotrace.errors import TraceFormatError
    from collectors.gotrace.todir import decode_file_to_dir

    path = Path(path)
    ddir = data_dir if data_dir is not None else Settings.from_env().data_dir
    if ahead is not None and ahead.path != path:
        ahead.cancel()
        ahead = None
    if not path.is_file():
        raise BadTraceError(f"{path}: no such file")
    sha = (ahead.sha256() if ahead is not None else None) or sha256 or file_sha256(path)
    found = find_by_sha(engine, sha)
    if found is not None:
        if ahead is not None:
            ahead.cancel()
        return found
    tmp_root = ddir / "tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ingest-", dir=tmp_root))
    timings = Timings()
    keep = raw_path(ddir, sha)
    copying: RawCopy | None = None
    placed = False

    def place_raw() -> None:
        # In the load's transaction, before its commit: a stored trace always
        # has its raw copy.
        nonlocal placed
        if copying is None:
            return
        with timings.phase("raw copy wait"):
            copying.wait()
        keep.parent.mkdir(parents=True, exist_ok=True)
        os.replace(copying.dest, keep)
        placed = True

    try:
        if progress:
            progress("decode", 0, 1)
        try:
            if ahead is not None:
                # Only the wait counts here; the decode itself ran meanwhile.
                with timings.phase("decode wait"):
                    decoded = ahead.result()
                timings.add("decode", ahead.seconds)
            else:
                with timings.phase("decode"):
                    decoded = decode_file_in_memory(path, ddir)
            if decoded is None:
                with timings.phase("decode"):
                    decode_file_to_dir(path, work / "parquet")
        except TraceFormatError as e:
            raise BadTraceError(f"{name or path.name}: not a readable Go trace: {e}") from None
        except ParquetDirError as e:
            raise BadParquetError(f"{name or path.name}: inconsistent decoder output: {e}") \
                from None
        if progress:
            progress("decode", 1, 1)
        give_back_if_big()  # the decoder's buffers, before the load's peak

        def start_copy() -> None:
            # Compressed on a thread while the tables are derived and stored:
            # the decode keeps both cores busy (the C decoder, and this thread
            # taking its rows), the load leaves one of them idle much of the
            # time. Started once the load has forked (ingest.load.event_side).
            nonlocal copying
            if copying is None and kept_path(ddir, sha) is None:
                copying = RawCopy(path, work / "raw.part")

        try:
            if decoded is not None:
                return _store_decoded(engine, decoded, sha=sha, name=name or path.name,
                                      source="trace", size_bytes=path.stat().st_size,
                                      progress=progress, data_dir=ddir, timings=timings,
                                      where=str(path), before_commit=place_raw,
                                      lanes=lanes, forked=start_copy)
            start_copy()
            return load_parquet_dir(engine, work / "parquet", name or path.name, sha256=sha,
                                    source="trace", size_bytes=path.stat().st_size,
                                    progress=progress, data_dir=ddir, timings=timings,
                                    before_commit=place_raw, lanes=lanes)
        except BaseException:
            if placed and find_by_sha(engine, sha) is None:
                keep.unlink(missing_ok=True)
            raise
    finally:
        if copying is not None:
            try:
                copying.wait()  # before its file's directory goes
            except OSError:
                pass  # raised above already, or the load failed first
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
                     progress: Progress | None = None,
                     data_dir: Path | None = None,
                     timings: Timings | None = None,
                     before_commit: Callable[[], None] | None = None,
                     lanes: bool = True) -> IngestResult:
    """Load a decoded trace directory (docs/schema.md) in one transaction;
    ``before_commit`` runs in it, after every row is written; ``lanes`` as
    for :func:`ingest_trace_file`.

    With ``data_dir``, the views' frame cache (:mod:`ingest.derive.frames`) is
    written on the way, so the first page view needs no rebuild.

    The same content again returns the existing trace (``created=False``).
    Raises BadParquetError for a directory that breaks the contract, leaving
    the database as it was.
    """
    started = time.perf_counter()
    timings = timings if timings is not None else Timings()
    directory = Path(directory)
    try:
        meta = read_meta(directory)
        sha = sha256 or dir_sha256(directory, meta)
        found = find_by_sha(engine, sha)
        if found is not None:
            return found
        with timings.phase("read"):
            rows = int(meta["transitions"])
            spill_to = spill_dir(data_dir, rows=rows)
            tr = read_transitions_spill(directory, rows, spill_to)
            events = split_events(iter_table(directory, "events"), spill_to)
            tstacks = read_table(directory, "transition_stacks")
            stacks = read_table(directory, "stacks")
    except ParquetDirError as e:
        raise BadParquetError(str(e)) from None
    except (KeyError, TypeError, ValueError) as e:
        raise BadParquetError(f"{directory}: malformed decoded trace: {e}") from None
    src = meta.get("source") or {}
    default_name = (src.get("name") if isinstance(src, dict) else None) or directory.name
    decoded = Decoded(meta, tr, events, tstacks, stacks)
    del tr, events, tstacks, stacks  # the loader drops them as it goes
    return _store_decoded(engine, decoded, sha=sha, name=name or default_name,
                          source=source, size_bytes=size_bytes, progress=progress,
                          data_dir=data_dir, timings=timings, where=str(directory),
                          started=started, before_commit=before_commit, lanes=lanes)


def _store_decoded(engine: Engine, decoded: Decoded, *, sha: str, name: str, source: str,
                   size_bytes: int | None, progress: Progress | None, data_dir: Path | None,
                   timings: Timings, where: str, started: float | None = None,
                   before_commit: Callable[[], None] | None = None,
                   lanes: bool = True,
                   forked: Callable[[], None] | None = None) -> IngestResult:
    """Store a decoded trace in one transaction (see load_parquet_dir);
    ``where`` names the input in error messages; ``forked`` is called once the
    events' side was forked (or not): the caller's threads start then."""
    started = time.perf_counter() if started is None else started
    meta, spill, events, tstacks, stacks = decoded.take()
    if spill.last_ts is not None:
        # The trace's end: the last event (meta.json), never before a transition.
        meta["last_ts"] = max(int(meta["last_ts"]), spill.last_ts)
    trace_row = _trace_row(meta, sha, name, source, size_bytes)
    # Derived tables are computed one at a time inside the transaction and
    # dropped once written, so memory holds one of them at a time.
    try:
        tables = derived_tables(spill, meta, events, tstacks, stacks, timings)
    except (KeyError, IndexError, ValueError) as e:
        spill.close()
        events.close()
        raise BadParquetError(f"{where}: inconsistent decoded trace: {e}") from None
    del events, tstacks, stacks
    total = spill.rows * 2
    advance = _load_progress(progress, total)
    files = data_dir is not None and interval_files.store_in_files(engine)
    staged = Staged(FrameWriter(data_dir, background=True,
                                 durable=IN_FILES if files else frozenset())
                     if data_dir is not None else None, files=files,
                     coded=CodedFiles.under(data_dir, interval_files.ROOT)
                     if files and data_dir is not None else None)
    try:
        fork_events(tables, staged, trace_row)
        if staged.frames is not None:
            staged.frames.start_background()
        if forked is not None:
            forked()
        stored = _write_trace(engine, sha, trace_row, tables, staged, timings, started, advance,
                              before_commit)
    except (KeyError, IndexError, ValueError) as e:
        # Raised while deriving a table (the transaction is rolled back):
        # columns that do not fit together.
        staged.abandon()
        raise BadParquetError(f"{where}: inconsistent decoded trace: {e!r}") from None
    except IntegrityError:
        # Another writer stored the same content first (PostgreSQL: no
        # up-front write lock); answer with its trace.
        staged.abandon()
        found = find_by_sha(engine, sha)
        if found is None:
            raise
        return found
    except BaseException:
        staged.abandon()
        raise
    finally:
        spill.close()
    if isinstance(stored, IngestResult):
        staged.abandon()  # the frame writer's thread goes with the staging
        return stored  # the same content, stored meanwhile: nothing written
    trace_id, counts = stored
    del spill, tables  # the loader's arrays go before the views' are built
    _finish_views(engine, staged, trace_id, sha, trace_row, timings, lanes)
    if progress:
        progress("load", total, total)
    timings.add("load", time.perf_counter() - started)
    return IngestResult(id=trace_id, sha256=sha, go_version=meta["go_version"],
                        events=int(meta["events"]), goroutines=counts["goroutines"],
                        created=True, timings=timings.as_dict())


def _load_progress(progress: Progress | None, total: int) -> Callable[[int], None]:
    """advance(rows): reports the load's progress as the inserts go."""
    done = [0]

    def advance(k: int) -> None:
        done[0] = min(total, done[0] + k)
        if progress:
            progress("load", done[0], total)

    return advance


def _write_trace(engine: Engine, sha: str, trace_row: dict[str, Any], tables: DerivedTables,
                 staged: Staged, timings: Timings, started: float,
                 advance: Callable[[int], None],
                 before_commit: Callable[[], None] | None = None,
                 ) -> tuple[int, dict[str, int]] | IngestResult:
    """The write transaction: the trace's row, every derived table, and the
    trace's counts; (trace id, rows per table), or the trace with this
    content when another load stored it first (then nothing is written)."""
    with write_tx(engine, bulk=True) as conn:
        if conn.dialect.name == "postgresql":
            # One loader at a time, as SQLite's write lock gives: row ids
            # are allocated as blocks after the current maximum.
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOAD_LOCK})
        found = find_by_sha(conn, sha)
        if found is not None:
            return found
        trace_id = conn.execute(models.traces.insert().values(**trace_row)
                                .returning(models.traces.c.id)).scalar_one()
        tables.bases = {name: next_id(conn, t) for name, t in models.RANGED.items()}
        counts = insert_tables(conn, trace_id, tables, staged, trace_row, timings, advance,
                               ahead_bytes(int(trace_row["transitions"])))
        if staged.files and (counts.get("intervals") or (staged.coded and staged.coded.parts)):
            _publish_intervals(conn, trace_id, sha, tables.bases, counts, staged, timings)
        conn.execute(models.traces.update().where(models.traces.c.id == trace_id).values(
            goroutines=counts["goroutines"], procs=counts["procs"],
            threads=counts["threads"], ingest_seconds=time.perf_counter() - started))
        if before_commit is not None:
            before_commit()
        commit_started = time.perf_counter()
    timings.add("commit", time.perf_counter() - commit_started)
    return trace_id, counts


def _publish_intervals(conn: Connection, trace_id: int, sha: str, bases: dict[str, int],
                       counts: dict[str, int], staged: Staged, timings: Timings) -> None:
    """The intervals', proc runs', syscalls' and coded rows' files made their
    home, and the rows saying where, in the load's transaction: durable on
    the disk before the commit that names them."""
    frames = staged.frames
    db = interval_files.db_file(conn.engine)
    if frames is None or db is None:
        raise OSError("the intervals' files were not written")
    home = interval_files.home_dir(frames.data_dir, trace_id, sha)
    tables = tuple(t for t in ("intervals", "proc_runs", "syscalls") if counts.get(t))
    coded = staged.coded
    with timings.phase("interval files"):
        staged.home = home
        frames.publish(tables, home, coded.files() if coded is not None else ())
        if coded is not None:
            coded.remove()  # its files are linked into the home
    first, n = bases["intervals"], counts.get("intervals", 0)
    directory = interval_files.stored_directory(db, home)
    conn.execute(models.interval_files.insert().values(
        trace_id=trace_id, first_id=first, last_id=first + n - 1, directory=directory))
    if coded is not None and coded.parts:
        conn.execute(coded_files.insert(), coded.listing(trace_id, directory))
    for table, listing in (("proc_runs", models.proc_run_files),
                           ("syscalls", models.syscall_files)):
        if table in tables:
            conn.execute(listing.insert().values(
                trace_id=trace_id, first_id=bases[table],
                last_id=bases[table] + counts[table] - 1))


def _finish_views(engine: Engine, staged: Staged, trace_id: int, sha: str,
                  trace_row: dict[str, Any], timings: Timings, lanes: bool = True) -> None:
    """After the commit: the staged frames named after the trace, and (with
    ``lanes``) the lane sets not staged before the commit built from them."""
    if not lanes:
        # The caller builds the lane sets (and copies the log into the
        # database meanwhile): ingest.api.warm.
        if staged.frames is not None:
            with timings.phase("after commit"), timings.phase("frames"):
                staged.frames.finish(trace_id, sha, int(trace_row["first_ts"] or 0),
                                     int(trace_row["last_ts"] or 0), staged.kinds)
        return
    with timings.phase("after commit"), checkpoint_meanwhile(engine):
        if staged.frames is not None:
            with timings.phase("frames"):  # what is left to write after the commit
                frame_dir = staged.frames.finish(trace_id, sha, int(trace_row["first_ts"] or 0),
                                                 int(trace_row["last_ts"] or 0), staged.kinds)
            if frame_dir is not None:
                with timings.phase("lanes"):
                    _precompute_views(engine, frame_dir, skip=staged.early)


def _precompute_views(engine: Engine, frame_dir: Path,
                      skip: Collection[LaneSetKey] = ()) -> None:
    """Build the timeline's lane sets of a trace just stored (a cache: when
    this fails the first view builds them); ``skip``: those already built."""
    from ingest.derive.frames import read_frames
    from ingest.derive.precompute import precompute_steps

    # Each lane set from freshly mapped frames, dropped after: the columns a
    # step reads stay mapped (and counted in the process's memory) only
    # while it runs.
    for key, step in precompute_steps(engine).items():
        if key in skip:
            continue
        give_back_if_big()
        frames = read_frames(frame_dir)
        if frames is None:
            return
        try:
            step(frames)
        except OSError:
            return
        del frames


def _trace_row(meta: dict[str, Any], sha: str, name: str, source: str,
               size_bytes: int | None) -> dict[str, Any]:
    src = meta.get("source") or {}
    size = size_bytes if size_bytes is not None else (src.get("size") if src else None)
    loss = meta["loss"]
    wall = meta.get("wall_clock")
    return {
        "sha256": sha, "name": name, "source": source, "size_bytes": size,
        "go_version": meta["go_version"], "family": meta["family"],
        "ticks_per_sec": meta.get("ticks_per_sec"), "generations": meta.get("generations"),
        "first_ts": meta["first_ts"], "last_ts": meta["last_ts"],
        "wall_start_ns": (wall["wall_ns"] - (wall["trace_ns"] - meta["first_ts"])
                          if wall else None),
        "events": meta["events"], "transitions": meta["transitions"],
        "goroutines": 0, "procs": 0, "threads": 0,  # set once derived
        "stacks": meta.get("stacks", 0),
        "event_counts": json.dumps(meta.get("event_counts", {}), sort_keys=True),
        "status": "damaged" if loss.get("error") else "complete",
        "bytes_lost": loss.get("bytes_lost", 0),
        "generations_lost": loss.get("generations_lost", 0),
        "loss_offset": loss.get("offset", -1), "loss_error": loss.get("error", ""),
        "created_at": datetime.now(UTC),
    }
