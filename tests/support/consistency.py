"""Whole-database checks for the reliability tests: no half-stored trace.

A trace is whole when its ``traces`` row agrees with the rows stored for it:
the goroutine/proc/thread counts match their tables, every ranged table's id
block (``row_ranges``) holds exactly the trace's rows, the intervals are the
transitions (one row each, counted per kind in ``transition_counts``) and the
goroutine/proc interval ranges tile the interval block. A damaged trace says so
(status "damaged" with bytes_lost > 0). Nothing belongs to a trace that is not
there.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, Float, func, select, text

from ingest.store import models


def row_counts(engine: Engine) -> dict[str, int]:
    """Rows in every table of the schema (the 'database unchanged' fingerprint)."""
    with engine.connect() as conn:
        return {t.name: int(conn.execute(select(func.count()).select_from(t)).scalar_one())
                for t in models.metadata.sorted_tables}


def integrity_ok(engine: Engine) -> None:
    """SQLite's integrity and foreign-key checks pass (nothing to check elsewhere)."""
    if engine.dialect.name != "sqlite":
        return
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA integrity_check")).scalar_one() == "ok"
        assert conn.execute(text("PRAGMA foreign_key_check")).fetchall() == []


def trace_problems(engine: Engine, trace_id: int, data_dir: Path | None = None) -> list[str]:
    """What is inconsistent about one stored trace (empty: it is whole)."""
    t = models.traces
    out: list[str] = []
    with engine.connect() as conn:
        tr = conn.execute(select(t).where(t.c.id == trace_id)).one()

        def count(table: object, *cond: object) -> int:
            tbl = models.relation(str(table))
            stmt = select(func.count()).select_from(tbl).where(tbl.c.trace_id == trace_id, *cond)
            return int(conn.execute(stmt).scalar_one())

        if tr.status not in ("complete", "damaged"):
            out.append(f"status {tr.status!r}")
        if (tr.status == "damaged") != (tr.bytes_lost > 0 or tr.generations_lost > 0):
            out.append(f"status {tr.status} with bytes_lost {tr.bytes_lost}")
        for name in ("goroutines", "procs", "threads"):
            n = count(name)
            if n != getattr(tr, name):
                out.append(f"{name}: {n} rows, traces.{name} = {getattr(tr, name)}")
        ranges = {r.table_name: (r.first_id, r.last_id) for r in conn.execute(
            select(models.row_ranges).where(models.row_ranges.c.trace_id == trace_id))}
        for table in models.RANGED_TABLES:
            n = count(table.name)
            if table.name in ranges:
                lo, hi = ranges[table.name]
                inside = count(table.name, table.c.id.between(lo, hi))
                if not (n == inside == hi - lo + 1):
                    out.append(f"{table.name}: {n} rows, {inside} in block {lo}..{hi}")
            elif n:
                out.append(f"{table.name}: {n} rows without a row_ranges block")
        intervals = count("intervals")
        if intervals != tr.transitions:
            out.append(f"intervals {intervals} != transitions {tr.transitions}")
        tc = models.transition_counts
        kinds_total = conn.execute(select(func.coalesce(func.sum(tc.c.count), 0))
                                   .where(tc.c.trace_id == trace_id)).scalar_one()
        if int(kinds_total) != intervals:
            out.append(f"transition_counts sum {kinds_total} != intervals {intervals}")
        tiled = 0
        for res in (models.goroutines, models.procs):
            tiled += int(conn.execute(
                select(func.coalesce(func.sum(res.c.last_interval - res.c.first_interval + 1), 0))
                .where(res.c.trace_id == trace_id)).scalar_one())
        if tiled != intervals:
            out.append(f"goroutine+proc interval ranges cover {tiled} of {intervals}")
    if data_dir is not None:
        from ingest.load.raw_copy import kept_path, raw_path, read_raw

        raw = kept_path(data_dir, tr.sha256)
        if raw is None:
            out.append(f"raw file {raw_path(data_dir, tr.sha256).name} missing")
        elif hashlib.sha256(b"".join(read_raw(raw))).hexdigest() != tr.sha256:
            out.append(f"raw file {raw.name} does not hash to its name")
    return out


def database_problems(engine: Engine, data_dir: Path | None = None) -> list[str]:
    """Every stored trace's problems, plus rows that belong to no trace."""
    out: list[str] = []
    with engine.connect() as conn:
        ids = [r[0] for r in conn.execute(select(models.traces.c.id))]
        for table in models.TRACE_TABLES:
            orphans = conn.execute(select(func.count()).select_from(table).where(
                table.c.trace_id.not_in(select(models.traces.c.id)))).scalar_one()
            if orphans:
                out.append(f"{table.name}: {orphans} rows of no trace")
    for tid in ids:
        out += [f"trace {tid}: {p}" for p in trace_problems(engine, tid, data_dir)]
    return out


#: Columns that differ between two loads of the same file by design (and
#: the traces table's float columns: how long the load took).
_WALL_CLOCK = {"created_at", "started_at", "finished_at", "updated_at", "stats"}


def dump_tables(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every trace table's rows, in a stable order, without wall-clock columns."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with engine.connect() as conn:
        for table in models.TRACE_TABLES + (models.traces,):
            cols = [c.name for c in table.columns if c.name not in _WALL_CLOCK
                    and not (table is models.traces and isinstance(c.type, Float))]
            rows = conn.execute(text(
                f"SELECT {', '.join(cols)} FROM {table.name} ORDER BY {', '.join(cols)}")).all()
            out[table.name] = [tuple(r) for r in rows]
    return out


def assert_same_database(ours: dict[str, list[Any]], theirs: dict[str, list[Any]]) -> None:
    """Two :func:`dump_tables` hold the same rows, table by table."""
    assert ours.keys() == theirs.keys()
    for name in ours:
        assert len(ours[name]) == len(theirs[name]), name
        assert ours[name] == theirs[name], f"{name} differs"


#: Columns that say how and when a trace was stored, not what it holds.
STORED_HOW: dict[str, frozenset[str]] = {
    "traces": frozenset({"source", "ingest_seconds", "created_at", "name"})}


def db_content(engine: Engine,
               skip: dict[str, frozenset[str]] | None = None) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows (but alembic's), sorted, without the columns ``skip``
    names per table (default: STORED_HOW): two databases that hold the same
    traces compare equal. The coded tables SQLite may keep in files are read
    with those rows (``<table>_all``); how they were cut into files
    (``coded_files``) is how they were stored, not what."""
    from sqlalchemy import inspect

    from ingest.store.coded_models import FILE_TABLES

    skip = STORED_HOW if skip is None else skip
    out = {}
    with engine.connect() as conn:
        for table in sorted(inspect(conn).get_table_names()):
            if table in ("alembic_version", "coded_files"):
                continue
            cols = [c["name"] for c in inspect(conn).get_columns(table)
                    if c["name"] not in skip.get(table, frozenset())]
            source = f"{table}_all" if table in FILE_TABLES else table
            rows = conn.execute(text(f'SELECT {", ".join(cols)} FROM "{source}"')).all()
            out[table] = sorted((tuple(r) for r in rows), key=repr)
    return out
