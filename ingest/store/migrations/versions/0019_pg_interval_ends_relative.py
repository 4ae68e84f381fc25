"""PostgreSQL: the interval chunks keep end times and seqs relative

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06

PostgreSQL only (SQLite is unchanged). ``interval_chunks.end_ts`` keeps each
interval's end less the next position's start in its chunk (none after the
last): an interval ends where its resource's next begins, so all but a
resource's last are 0, which lz4 all but drops. ``interval_chunks.seq`` keeps
the seq less the id. The views and range functions over the chunks add them
back (ingest/store/pg_chunks.py, ``RELATIVE``), so every view shows the same
rows as before. Downgrade makes the arrays absolute again.
"""

from __future__ import annotations

from alembic import op

from ingest.store import pg_chunks

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def _rewrite(encode: bool) -> None:
    """Each chunk's end_ts and seq made relative (``encode``) or absolute."""
    sign = "-" if encode else "+"
    op.execute(
        "UPDATE interval_chunks c SET end_ts = r.end_ts, seq = r.seq FROM ("
        f"SELECT first_id, array_agg(e {sign} coalesce(s_next, 0) ORDER BY o) AS end_ts, "
        f"array_agg(q {sign} (first_id + o - 1) ORDER BY o) AS seq FROM ("
        "SELECT c.first_id, u.o, u.e, u.q, "
        "lead(u.s) OVER (PARTITION BY c.first_id ORDER BY u.o) AS s_next "
        "FROM interval_chunks c, unnest(c.start_ts, c.end_ts, c.seq) "
        "WITH ORDINALITY AS u(s, e, q, o)) x GROUP BY first_id) r "
        "WHERE c.first_id = r.first_id")


def _views(relative: bool) -> None:
    """The views and functions over the chunks as they read the arrays (the
    same columns: made again in place, their dependents untouched)."""
    ivc = pg_chunks.CHUNKED["intervals"]
    op.execute(f"CREATE OR REPLACE VIEW {ivc.view} AS "
               f"{pg_chunks.view_sql(ivc, relative, scalars=False)}")
    for name, sql in pg_chunks.pg_views(relative, scalars=False).items():
        op.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
    for name in pg_chunks.CHUNKED:
        op.execute(pg_chunks.function_sql(name, relative=relative, replace=True,
                                          scalars=False))


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _rewrite(encode=True)
    _views(relative=True)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _rewrite(encode=False)
    _views(relative=False)
