"""PostgreSQL: the chunk views read without a row-by-row join

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-05

PostgreSQL only (SQLite is unchanged). The views over the chunk tables of
0015 are made again (ingest/store/pg_chunks.py): ``interval_rows``,
``proc_run_index`` and ``syscall_outcomes`` take each chunk's arrays
decompressed once and a row per position (generate_series, estimated 1000 a
chunk) instead of ``unnest ... WITH ORDINALITY`` (estimated 10, through a
tuplestore), and ``proc_runs`` and ``syscalls`` zip their chunks with the
interval chunks they point into instead of joining ``intervals`` by id; the
range functions read the same way. The rows are the same. Downgrade makes
0015's definitions again.
"""

from __future__ import annotations

from alembic import op

from ingest.store import models, pg_chunks

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

#: The views over the chunks, readers first, dropped and made again.
_DEPENDENT = ("transitions", "interval_view", "thread_intervals", "proc_runs", "syscalls",
              "intervals")

_NEG = str(pg_chunks.NULL_VALUE)

#: 0015's views over the chunk tables.
_ROW_VIEWS_0015 = {
    "interval_rows": (
        "SELECT c.first_id + u.o - 1 AS id, c.trace_id, u.rid, u.start_ts, u.seq, u.end_ts, "
        "u.kind, u.m, u.p, u.g, u.stack_id FROM interval_chunks c, "
        "unnest(c.rid, c.start_ts, c.seq, c.end_ts, c.kind, c.m, c.p, c.g, c.stack_id) "
        "WITH ORDINALITY AS u(rid, start_ts, seq, end_ts, kind, m, p, g, stack_id, o)"),
    "proc_run_index": (
        "SELECT c.first_id + u.o - 1 AS id, c.trace_id, u.interval_id FROM proc_run_chunks c, "
        "unnest(c.interval_id) WITH ORDINALITY AS u(interval_id, o)"),
    "syscall_outcomes": (
        "SELECT c.first_id + u.o - 1 AS id, c.trace_id, u.interval_id, u.start_known, "
        "(ARRAY['returned', 'blocked', 'exited', 'unfinished', 'other']::varchar(16)[])"
        "[u.outcome + 1] AS outcome, u.p_lost, "
        f"NULLIF(u.stolen_ts, {_NEG}) AS stolen_ts, "
        f"NULLIF(u.stolen_by_m, {_NEG}) AS stolen_by_m FROM syscall_chunks c, "
        "unnest(c.interval_id, c.start_known, c.outcome, c.p_lost, c.stolen_ts, "
        "c.stolen_by_m) WITH ORDINALITY AS u(interval_id, start_known, outcome, p_lost, "
        "stolen_ts, stolen_by_m, o)"),
}


def _functions_0015() -> list[str]:
    def rng(view: str) -> str:
        n = pg_chunks.CHUNK
        return (_ROW_VIEWS_0015[view] + f" WHERE c.first_id BETWEEN ((($1) - 1) / {n}) * "
                f"{n} + 1 AND $2 AND c.first_id + u.o - 1 BETWEEN $1 AND $2")

    def at(x: str, cols: tuple[tuple[str, str], ...]) -> str:
        sel = ", ".join(f"ic.{s}[{x} - ic.first_id + 1] AS {n}" for s, n in cols)
        return (f"CROSS JOIN LATERAL (SELECT {sel} FROM interval_chunks ic WHERE ic.first_id "
                f"BETWEEN ((({x}) - 1) / {pg_chunks.CHUNK}) * {pg_chunks.CHUNK} + 1 AND {x} "
                "ORDER BY ic.first_id DESC LIMIT 1) i")

    bodies = {
        "intervals": rng("interval_rows"),
        "proc_runs": ("SELECT r.id, r.trace_id, i.p, i.start_ts, i.end_ts, i.g, i.m, i.seq "
                      f"FROM ({rng('proc_run_index')}) r "
                      + at("r.interval_id", pg_chunks.RUN_COLUMNS)),
        "syscalls": ("SELECT s.id, s.trace_id, i.goid, i.start_ts, i.seq, i.end_ts, "
                     "i.end_ts - i.start_ts AS duration_ns, i.m, i.p, s.start_known, s.outcome, "
                     "s.p_lost, s.stolen_ts, s.stolen_by_m, i.stack_id "
                     f"FROM ({rng('syscall_outcomes')}) s "
                     + at("s.interval_id", pg_chunks.SYSCALL_COLUMNS)),
    }
    return [pg_chunks.function_sql(name, body) for name, body in bodies.items()]


def _drop() -> None:
    for c in pg_chunks.CHUNKED.values():
        op.execute(f"DROP FUNCTION {c.function}(bigint, bigint)")
    for view in _DEPENDENT:
        op.execute(f"DROP VIEW {view}")
    for c in pg_chunks.CHUNKED.values():
        op.execute(f"DROP VIEW {c.view}")


def _make(row_views: dict[str, str], views: dict[str, str], functions: list[str]) -> None:
    for c in pg_chunks.CHUNKED.values():
        op.execute(f"CREATE VIEW {c.view} AS {row_views[c.view]}")
        op.execute(pg_chunks.delete_rule(c))
    order = ("intervals", "proc_runs", "syscalls", "transitions", "interval_view",
             "thread_intervals")
    for name in order:
        op.execute(f"CREATE VIEW {name} AS {views[name]}")
    for statement in functions:
        op.execute(statement)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _drop()
    # As the chunks keep their arrays until 0019 (absolute).
    views = {**models.dialect_views("postgresql"), **models.file_views(False),
             **pg_chunks.pg_views(relative=False, scalars=False)}
    _make({c.view: pg_chunks.view_sql(c, relative=False, scalars=False)
           for c in pg_chunks.CHUNKED.values()},
          views, [pg_chunks.function_sql(name, relative=False, scalars=False)
                  for name in pg_chunks.CHUNKED])


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _drop()
    _make(_ROW_VIEWS_0015, {**models.VIEWS, **models.file_views(False)}, _functions_0015())
