"""Hostile strings from a real trace survive ingest on every backend.

The annotations workload writes task, region and log strings with NUL bytes,
invalid UTF-8, quotes, control characters and emoji. PostgreSQL text cannot
hold NUL, so there it is stored as U+FFFD; SQLite keeps it. Everything else
is as Go reports it (bytes that are not UTF-8 as U+FFFD, as in the Parquet).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from collectors.gotrace.parquet_out import utf8_text
from ingest.load.pipeline import ingest_trace_file
from ingest.store import models
from tests.support.goparsed import go_parsed
from tests.support.ingest_fixtures import db_url, engine  # noqa: F401 - fixtures
from tests.support.workload_traces import workload_trace

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("go_version", ["1.19", "1.27.3"])
def test_log_messages_as_go_reports_them(engine: Engine, go_version: str,  # noqa: F811
                                         tmp_path: Path) -> None:
    path = workload_trace(go_version, "annotations")
    go, err = go_parsed(path)
    assert err is None
    want = [(utf8_text(e.category), utf8_text(e.message)) for e in go if e.kind == "Log"]
    assert any("\x00" in m for _, m in want), "the workload writes a NUL byte"
    res = ingest_trace_file(engine, path, "annotations", data_dir=tmp_path)
    with engine.connect() as conn:
        got = conn.execute(select(models.logs.c.category, models.logs.c.message)
                           .where(models.logs.c.trace_id == res.id)
                           .order_by(models.logs.c.seq)).all()
    if engine.dialect.name == "postgresql":
        want = [(c.replace("\x00", "\ufffd"), m.replace("\x00", "\ufffd")) for c, m in want]
    assert [tuple(r) for r in got] == want
