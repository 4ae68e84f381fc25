"""JSON API of the SQL page: one read-only query over the served database (docs/sql.md).

- ``GET /api/sql?sql=SELECT...[&limit=N][&format=json|csv]``: ``{"columns",
  "rows", "truncated", "row_count", "limit", "elapsed_ms", "database"}``, or the
  rows as CSV (``X-Truncated`` says whether the row cap cut them);
- ``GET /api/sql/examples[?trace_id=N]``: the example queries for a trace (the
  newest by default).

A statement the page never runs (a write, ATTACH, a PRAGMA that changes
state...) answers 403; one the database rejects, or that ran past the time
limit (``GMPSCOPE_SQL_TIMEOUT_MS``), 400; each with one line in ``error``.
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify, request

from ingest.api.blueprint import error, ingest_state
from ingest.api.files import attachment
from ingest.api.params import BadParam, checked, int_param
from ingest.views.sql import SQLError, SQLRefused, run_query
from ingest.views.sql_examples import examples, newest_trace_id

bp = checked(Blueprint("gmpscope_api_sql", __name__))


@bp.get("/api/sql")
def sql_api() -> Response:
    state = ingest_state(current_app)
    cfg = state.config
    sql = request.args.get("sql")
    if sql is None:
        raise BadParam("sql is required: /api/sql?sql=SELECT ...")
    limit = int_param("limit", cfg.sql_max_rows, 1, cfg.sql_max_rows) or cfg.sql_max_rows
    fmt = request.args.get("format", "json")
    if fmt not in ("json", "csv"):
        raise BadParam(f"format must be json or csv, not {fmt!r}")
    try:
        result = run_query(state.engine, sql, limit=limit, timeout_ms=cfg.sql_timeout_ms)
    except SQLRefused as e:
        return error(403, str(e))
    except SQLError as e:
        return error(400, str(e))
    if fmt == "csv":
        resp = Response(result.csv_text(), mimetype="text/csv")
        resp.headers["X-Truncated"] = "true" if result.truncated else "false"
        return attachment(resp, "gmpscope-sql.csv")
    return jsonify(result.as_dict())


@bp.get("/api/sql/examples")
def sql_examples_api() -> Response:
    engine = ingest_state(current_app).engine
    trace_id = int_param("trace_id", None, 1)
    if trace_id is None:
        trace_id = newest_trace_id(engine)
        if trace_id is None:
            return error(404, "no trace is stored yet: the examples query one")
    return jsonify({"trace_id": trace_id, "database": engine.dialect.name,
                    "examples": [e.as_dict() for e in examples(engine.dialect.name, trace_id)]})
