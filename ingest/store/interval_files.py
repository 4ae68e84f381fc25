"""A trace's intervals kept in column files on SQLite, and SQL's view of them.

The intervals are most of a trace (19.5 M rows of a 200 MB trace). The views
read them as memory-mapped columns (ingest.derive.frames); as SQL rows too
they took 815 MB more. On SQLite, when the C extension
``ingest.store._intervalfiles`` is built, a trace's intervals are kept only
as the frames' column files, under ``DATA/intervals/<id>-<sha16>/`` (one
``intervals.<column>.npy`` per column, hard-linked into the trace's frames),
and ``interval_files`` says where: SQL reads them through the extension's
virtual table ``gmpscope_intervals``, and the view ``intervals`` is
``interval_rows`` UNION ALL that table, so users' SQL and the views' queries
see one table with the same rows either way. PostgreSQL keeps every interval
as rows (its servers may not share our disk).

The extension registers with the SQLite library itself (an automatic
extension, as ``_sqlitebulk`` does), so every connection this process opens
afterwards reads the files; :func:`register` is called where SQLite engines
are made. ``GMPSCOPE_PURE=1`` still reads them (reading stored data is not a
compute path with a numpy form) but stores new traces as rows.
"""

from __future__ import annotations

import importlib
import os
import shutil
import time
from pathlib import Path

from sqlalchemy import Connection, Engine, select

from ingest.extensions import pure
from ingest.store import models

#: The extension's module.
EXTENSION = "ingest.store._intervalfiles"
#: Where the files live under the data directory.
ROOT = "intervals"


class IntervalFilesError(RuntimeError):
    """A trace's interval files cannot be read (the message says which and why)."""


def register() -> bool:
    """Have every SQLite connection opened from now on, in this process, read
    the interval files; False when the extension is not built. Idempotent."""
    try:
        ext = importlib.import_module(EXTENSION)
    except ImportError:
        return False
    ext.register()
    return True


def store_in_files(engine: Engine) -> bool:
    """Whether a trace loaded now keeps its intervals in files: SQLite in a
    file, the extension built, and ``GMPSCOPE_PURE`` not set."""
    return (engine.dialect.name == "sqlite" and bool(db_file(engine))
            and not pure() and register())


def db_file(engine: Engine) -> Path | None:
    """The SQLite database file (None: in memory, or not SQLite)."""
    if engine.dialect.name != "sqlite":
        return None
    name = engine.url.database
    return None if name in (None, "", ":memory:") else Path(str(name)).expanduser().resolve()


def home_dir(data_dir: Path, trace_id: int, sha256: str) -> Path:
    """Where trace ``trace_id``'s interval files are kept."""
    return data_dir / ROOT / f"{trace_id}-{sha256[:16]}"


def stored_directory(db: Path, home: Path) -> str:
    """``interval_files.directory`` for ``home``: relative to the database
    file's directory when under it (the data directory moves as a whole),
    else absolute."""
    home = home.resolve()
    try:
        return str(home.relative_to(db.parent))
    except ValueError:
        return str(home)


def resolve(db: Path, directory: str) -> Path:
    """The directory ``interval_files.directory`` names."""
    return Path(directory) if os.path.isabs(directory) else db.parent / directory


def trace_home(conn: Connection, db: Path | None, trace_id: int) -> Path | None:
    """Where trace ``trace_id``'s intervals are kept in files; None when they
    are rows."""
    if db is None:
        return None
    f = models.interval_files
    d = conn.execute(select(f.c.directory).where(f.c.trace_id == trace_id)).scalar()
    return None if d is None else resolve(db, str(d))


def remove_home(home: Path | None) -> None:
    """Delete a trace's interval files (after its rows' delete is committed)."""
    if home is not None:
        shutil.rmtree(home, ignore_errors=True)


def remove_orphans(engine: Engine, data_dir: Path, min_age_s: float = 3600.0) -> int:
    """Delete interval directories no stored trace owns: a load killed between
    publishing its files and its commit leaves one. Only those older than
    ``min_age_s`` (another process may be about to commit one). Returns how
    many went."""
    root = data_dir / ROOT
    db = db_file(engine)
    if db is None or not root.is_dir():
        return 0
    f = models.interval_files
    with engine.connect() as conn:
        owned = {resolve(db, str(d)).resolve()
                 for d in conn.execute(select(f.c.directory)).scalars()}
    cutoff = time.time() - min_age_s
    removed = 0
    for d in root.iterdir():
        try:
            if d.is_dir() and d.resolve() not in owned and d.stat().st_mtime < cutoff:
                shutil.rmtree(d, ignore_errors=True)
                removed += 1
        except OSError:
            continue
    return removed
