"""A page of a coded table's rows in key order, on either database.

On PostgreSQL the coded tables are chunk rows of arrays behind views
(:mod:`ingest.store.pg_coded`); ``ORDER BY`` key with ``OFFSET`` over such a
view makes and sorts every row of the trace (0.49 s for the first 1000 of the
200 MB trace's 1.46 M logs), so a page is read from the chunks that hold it.
Elsewhere the rows are read in key order. Its own module: it needs both the
coded tables (:mod:`ingest.store.coded_models`) and their chunks, which are
made from them.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, text

from ingest.store.coded_models import CODED, PG_CHUNKED
from ingest.store.pg_coded import page_sql


def page_rows(view: str, trace_id: int, offset: int, limit: int, dialect: str) -> Any:
    """A FROM item with the columns of ``CODED[view].rows`` holding trace
    ``trace_id``'s rows ``offset`` to ``offset + limit - 1`` in key order."""
    if dialect == "postgresql" and view in PG_CHUNKED:
        sql, params = page_sql(view, trace_id, offset, limit)
        return text(sql).bindparams(**params).columns(*CODED[view].rows.columns).subquery("t")
    rows = CODED[view].rows
    return (select(rows).where(rows.c.trace_id == trace_id).order_by(rows.c[CODED[view].key])
            .limit(max(0, limit)).offset(max(0, offset)).subquery("t"))
