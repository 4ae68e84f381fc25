"""Deleting a stored trace: its rows, everything derived from it, its raw file,
its interval files and its frames."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, and_, delete, select

from ingest.derive.frames import remove_frames
from ingest.load.raw_copy import remove_raw
from ingest.store import interval_files, models
from ingest.store.db import write_tx


def delete_trace(engine: Engine, trace_id: int, data_dir: Path | None = None) -> bool:
    """Delete a trace and everything derived from it (and its raw file, when
    ``data_dir`` is given); False when there was no such trace."""
    t = models.traces
    rr = models.row_ranges
    with write_tx(engine) as conn:
        sha = conn.execute(select(t.c.sha256).where(t.c.id == trace_id)).scalar_one_or_none()
        if sha is None:
            return False
        home = interval_files.trace_home(conn, interval_files.db_file(engine), trace_id)
        ranges = {r.table_name: (r.first_id, r.last_id) for r in conn.execute(
            select(rr.c.table_name, rr.c.first_id, rr.c.last_id)
            .where(rr.c.trace_id == trace_id))}
        # Explicit deletes, children first: the same result as the ON DELETE
        # CASCADE, but through the id ranges (the big tables have no trace_id
        # index) and also where foreign keys are not enforced.
        for table in models.TRACE_TABLES:
            cond = table.c.trace_id == trace_id
            ranged = models.RANGE_NAME.get(table.name)
            if ranged in ranges:
                lo, hi = ranges[ranged]
                cond = and_(table.c.id.between(lo, hi), cond)
            elif ranged is not None:
                continue  # this trace has no rows there
            conn.execute(delete(table).where(cond))
        conn.execute(delete(t).where(t.c.id == trace_id))
    # The intervals' files go with their rows whether or not a data
    # directory is given: the database says where they are.
    interval_files.remove_home(home)
    if data_dir is not None:
        remove_raw(data_dir, sha)
        remove_frames(data_dir, trace_id)
    return True
