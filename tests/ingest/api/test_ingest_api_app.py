"""The API as a Flask app in-process: the factory, and the blueprint mounted in a host app."""

from __future__ import annotations

from pathlib import Path

import pytest
from flask import Flask

from ingest.api import blueprint as api
from ingest.api.server import create_app
from ingest.config import Settings
from ingest.store.db import make_engine
from ingest.store.retries import with_retries

TRACE = Path(__file__).resolve().parents[2] / "data" / "traces" / "go1.19-mixed.trace"


def settings(tmp: Path, **kw: object) -> Settings:
    return Settings.from_env({}, data_dir=tmp / "data", db_url=f"sqlite:///{tmp / 'g.db'}",
                             **kw)  # type: ignore[arg-type]


def test_factory_keeps_state_on_the_app(tmp_path: Path) -> None:
    a = create_app(settings(tmp_path / "a"))
    b = create_app(settings(tmp_path / "b", token="t"))
    assert a.extensions[api.EXTENSION].engine is not b.extensions[api.EXTENSION].engine
    ca, cb = a.test_client(), b.test_client()
    assert ca.post("/api/traces", data=TRACE.read_bytes()).status_code == 201
    assert cb.post("/api/traces", data=TRACE.read_bytes()).status_code == 401
    assert cb.get("/api/traces").status_code == 401  # reads need the token too
    listed = cb.get("/api/traces", headers={"Authorization": "Bearer t"}).get_json()
    assert [t["sha256"] for t in listed["traces"]] == []


def test_json_errors_only_on_api_paths_of_a_host_app(tmp_path: Path) -> None:
    host = Flask("host")

    @host.get("/")
    def index() -> str:
        return "<h1>ui</h1>"

    cfg = settings(tmp_path)
    api.init_app(host, cfg, make_engine(cfg.db_url))
    c = host.test_client()
    assert c.get("/").data == b"<h1>ui</h1>"
    page = c.get("/no/such/page")
    assert page.status_code == 404 and page.mimetype == "text/html"
    missing = c.get("/api/traces/12345")
    assert missing.status_code == 404 and missing.get_json() == {
        "error": "no trace with id 12345"}
    assert c.get("/api/nope").get_json()["error"]
    assert c.get("/healthz").get_json() == {"status": "ok"}


@pytest.mark.parametrize("query", ["resource=thread", "format=png"])
def test_stategraph_bad_parameters(tmp_path: Path, query: str) -> None:
    c = create_app(settings(tmp_path)).test_client()
    tid = c.post("/api/traces", data=TRACE.read_bytes()).get_json()["id"]
    r = c.get(f"/api/traces/{tid}/stategraph?{query}")
    assert r.status_code == 400 and r.get_json()["error"]


def test_retries_on_a_locked_database() -> None:
    import sqlite3

    from sqlalchemy.exc import OperationalError

    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise OperationalError("INSERT", {}, sqlite3.OperationalError("database is locked"))
        return "done"

    assert with_retries(flaky) == "done"
    assert len(calls) == 3

    def broken() -> str:
        raise OperationalError("SELECT", {}, sqlite3.OperationalError("no such table: x"))

    with pytest.raises(OperationalError):
        with_retries(broken)
