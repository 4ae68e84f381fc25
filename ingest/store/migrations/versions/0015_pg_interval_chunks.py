"""PostgreSQL: intervals, proc runs and syscalls kept as chunk rows of arrays

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05

PostgreSQL only (SQLite is unchanged). The rows of ``interval_rows``,
``proc_run_index`` and ``syscall_outcomes`` move into ``interval_chunks``,
``proc_run_chunks`` and ``syscall_chunks``: one row per run of up to 1024
consecutive ids, the columns as arrays (ingest/store/pg_chunks.py). The three
tables become views of the same names and columns that unnest the chunks, so
``intervals``, ``proc_runs``, ``syscalls`` and the views over them show the
same rows as before; ``gmpscope_intervals(lo, hi)``, ``gmpscope_proc_runs``
and ``gmpscope_syscalls`` read an id range through the chunks' key. The delete
trigger deletes a trace's chunks. Downgrade moves the rows back.
"""

from __future__ import annotations

from alembic import op

from ingest.store import models, pg_chunks

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

#: The views that read the three tables, directly or not, dropped and made again.
_DEPENDENT = ("transitions", "interval_view", "thread_intervals", "proc_runs", "syscalls",
              "intervals")

_ROWS_0014 = {
    "interval_rows": ("id BIGINT NOT NULL, trace_id INTEGER NOT NULL, rid BIGINT NOT NULL, "
                      "start_ts BIGINT NOT NULL, seq BIGINT NOT NULL, end_ts BIGINT NOT NULL, "
                      "kind SMALLINT NOT NULL, m BIGINT NOT NULL, p BIGINT NOT NULL, "
                      "g BIGINT NOT NULL, stack_id BIGINT NOT NULL, "
                      "CONSTRAINT interval_rows_pkey PRIMARY KEY (id)"),
    "proc_run_index": ("id BIGINT NOT NULL, trace_id INTEGER NOT NULL, "
                       "interval_id BIGINT NOT NULL, "
                       "CONSTRAINT proc_run_index_pkey PRIMARY KEY (id)"),
    "syscall_outcomes": ("id BIGINT NOT NULL, trace_id INTEGER NOT NULL, "
                         "interval_id BIGINT NOT NULL, start_known BOOLEAN NOT NULL, "
                         "outcome VARCHAR(16) NOT NULL, p_lost BOOLEAN NOT NULL, "
                         "stolen_ts BIGINT, stolen_by_m BIGINT, "
                         "CONSTRAINT syscall_outcomes_pkey PRIMARY KEY (id)"),
}


def _aggregate(name: str, column: str) -> str:
    """array_agg of a former table's column, as the chunks keep it."""
    if column == "outcome":
        codes = " ".join(f"WHEN '{o}' THEN {i}" for i, o in enumerate(pg_chunks.OUTCOMES))
        value = f"CASE outcome {codes} ELSE {len(pg_chunks.OUTCOMES) - 1} END"
    elif column.startswith("stolen_"):
        value = f"COALESCE({column}, {pg_chunks.NULL_VALUE})"
    else:
        value = column
    return f"array_agg({value} ORDER BY id)"


def _views() -> list[str]:
    views = {**models.file_views(False),
             **{k: models.VIEWS[k] for k in ("transitions", "interval_view",
                                             "thread_intervals")}}
    return [f"CREATE VIEW {name} AS {select}" for name, select in views.items()]


def _trigger(function: str) -> None:
    op.execute("DROP TRIGGER traces_delete_rows ON traces")
    op.execute("DROP FUNCTION gmpscope_delete_trace_rows()")
    op.execute(function)
    op.execute(models.PG_DELETE_ROWS[1])


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in pg_chunks.create_tables():
        op.execute(statement)
    for c in pg_chunks.CHUNKED.values():
        cols = ", ".join(c.names)
        aggs = ", ".join(_aggregate(c.view, x) for x in c.names)
        op.execute(f"INSERT INTO {c.chunks} (first_id, trace_id, {cols}) "
                   f"SELECT min(id), trace_id, {aggs} FROM {c.view} "
                   f"GROUP BY trace_id, (id - 1) / {pg_chunks.CHUNK}")
    for view in _DEPENDENT:
        op.execute(f"DROP VIEW {view}")
    for c in pg_chunks.CHUNKED.values():
        op.execute(f"DROP TABLE {c.view}")
    for statement in [*pg_chunks.create_row_views(scalars=False), *_views(),
                      *pg_chunks.create_functions(scalars=False)]:
        op.execute(statement)
    # 0017 chunks the coded tables; 0018 lists coded_files.
    _trigger(models.pg_delete_rows(coded_chunks=(), listed=False)[0])


# The delete function at 0014, where the rows were the tables'.
_PG_FUNCTION_0014 = """CREATE FUNCTION gmpscope_delete_trace_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT table_name, first_id, last_id FROM row_ranges
             WHERE trace_id = OLD.id LOOP
        IF r.table_name = 'intervals' THEN
            DELETE FROM interval_rows
            WHERE id BETWEEN r.first_id AND r.last_id AND trace_id = OLD.id;
        ELSIF r.table_name = 'proc_runs' THEN
            DELETE FROM proc_run_index
            WHERE id BETWEEN r.first_id AND r.last_id AND trace_id = OLD.id;
        ELSIF r.table_name = 'syscalls' THEN
            DELETE FROM syscall_outcomes
            WHERE id BETWEEN r.first_id AND r.last_id AND trace_id = OLD.id;
        END IF;
    END LOOP;
{rest}
    RETURN OLD;
END
$$"""


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for c in pg_chunks.CHUNKED.values():
        op.execute(f"DROP FUNCTION {c.function}(bigint, bigint)")
    for view in _DEPENDENT:
        op.execute(f"DROP VIEW {view}")
    for c in pg_chunks.CHUNKED.values():
        op.execute(f"ALTER VIEW {c.view} RENAME TO {c.view}_chunked")
        op.execute(f"CREATE TABLE {c.view} ({_ROWS_0014[c.view]})")
        op.execute(f"INSERT INTO {c.view} SELECT * FROM {c.view}_chunked")
        op.execute(f"DROP VIEW {c.view}_chunked")
        op.execute(f"DROP TABLE {c.chunks}")
    for statement in _views():
        op.execute(statement)
    big = {c.view for c in pg_chunks.CHUNKED.values()}
    rest = "\n".join(f"    DELETE FROM {t.name} WHERE trace_id = OLD.id;"
                     for t in models.TRACE_TABLES if t.name not in big)
    _trigger(_PG_FUNCTION_0014.replace("{rest}", rest))
