"""A new database made in one step (ingest.store.schema_new) has the schema the
Alembic migrations make, on SQLite and PostgreSQL: every table's columns,
types, nullability, defaults, keys, foreign keys, indexes and unique
constraints, every view's columns and query, the triggers (and on
PostgreSQL their functions' source), and the recorded revision."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, inspect, text

from ingest.store import db
from tests.support.ingest_fixtures import backends, make_db_url


@pytest.fixture(params=backends())
def two_urls(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for a in make_db_url(request.param, tmp_path / "a"):
        for b in make_db_url(request.param, tmp_path / "b"):
            yield a, b


def _norm_sql(sql: Any) -> str:
    return re.sub(r"\s+", " ", str(sql or "")).strip().lower()


def describe(engine: Engine) -> dict[str, Any]:
    """Everything the inspector says of the database's schema."""
    with engine.connect() as conn:
        insp = inspect(conn)
        out: dict[str, Any] = {}
        for t in sorted(insp.get_table_names()):
            out[t] = {
                "columns": [(c["name"], str(c["type"]), c["nullable"], _norm_sql(c["default"]),
                             c.get("autoincrement")) for c in insp.get_columns(t)],
                "pk": insp.get_pk_constraint(t)["constrained_columns"],
                "fks": sorted((tuple(f["constrained_columns"]), f["referred_table"],
                               tuple(f["referred_columns"]),
                               str(f.get("options", {}).get("ondelete")))
                              for f in insp.get_foreign_keys(t)),
                "indexes": sorted((i["name"], tuple(i["column_names"]), bool(i["unique"]))
                                  for i in insp.get_indexes(t)),
                "unique": sorted(tuple(u["column_names"]) for u in insp.get_unique_constraints(t)),
            }
        for v in sorted(insp.get_view_names()):
            out[f"view {v}"] = {
                "columns": [(c["name"], str(c["type"])) for c in insp.get_columns(v)],
                "sql": _norm_sql(insp.get_view_definition(v)),
            }
        if conn.dialect.name == "sqlite":
            out["without rowid"] = sorted(
                name for name, sql in conn.execute(text(
                    "SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
                if _norm_sql(sql).endswith("without rowid"))
            out["triggers"] = conn.execute(text(
                "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' ORDER BY name")).all()
        else:
            out["triggers"] = conn.execute(text(
                "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger "
                "WHERE NOT tgisinternal ORDER BY tgname")).all()
            out["functions"] = [(name, _norm_sql(src)) for name, src in conn.execute(text(
                "SELECT proname, prosrc FROM pg_proc "
                "WHERE pronamespace = 'public'::regnamespace ORDER BY proname"))]
        out["revision"] = conn.execute(text("SELECT version_num FROM alembic_version")).all()
    return out


def test_a_new_database_made_in_one_step_equals_the_migrated_one(
        two_urls: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    migrated_url, made_url = two_urls
    with monkeypatch.context() as m:
        m.setattr(db, "_create_if_new", lambda engine, revision: False)
        migrated = db.make_engine(migrated_url)
    assert "alembic" in sys.modules  # that one went through Alembic
    made = db.make_engine(made_url)
    try:
        a, b = describe(migrated), describe(made)
        assert a.keys() == b.keys()
        for name in a:
            assert a[name] == b[name], name
        assert a["revision"] == [(db.newest_revision(),)]
    finally:
        migrated.dispose()
        made.dispose()


def test_a_database_with_anything_in_it_goes_through_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    engine = db.make_engine(url, migrate_to_head=False)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE mine (x INTEGER)"))  # a user's table, no revision
    with engine.connect() as conn:
        assert not db._create_if_new(engine, "9999")
        assert inspect(conn).get_table_names() == ["mine"]
    engine.dispose()
