"""Many clients at once against a real ``gmpscope serve`` with two workers.

A smaller run of tools/load_test.py (16 clients, a few operations each):
one-shot and chunked uploads of real traces (several clients sending the same
content, all of them the same file at the same moment first), trace lists,
summaries and page APIs, all at once. Correctness only, no timing: no 5xx, no
"database is locked", every content stored exactly once under one id, every
summary whole and the same on every read; afterwards the database passes
SQLite's integrity check and every stored trace is whole. The figures of the
full run are in docs/reliability.md.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from ingest.store.db import make_engine
from tests.support.consistency import database_problems, integrity_ok
from tests.support.server import Served
from tools import load_test

CLIENTS = 16
OPS = 6


def test_load(tmp_path: Path) -> None:
    with Served(tmp_path / "data", extra_args=("--workers", "2", "--threads", "8")) as srv:
        t0 = time.perf_counter()
        stats = load_test.run(srv.url, clients=CLIENTS, ops=OPS, seed=7)
        print("\n" + load_test.report(stats, CLIENTS, time.perf_counter() - t0))
        assert stats.errors == []
        kinds = {k for k, v in stats.latencies.items() if v}
        assert {"upload", "chunked", "chunk", "job", "list", "summary"} <= kinds
        assert stats.requests >= CLIENTS * (OPS + 1)
        # The first upload: every client sent the same bytes at once, one trace came of it.
        first_shas = {hashlib.sha256(p.read_bytes()).hexdigest() for p in load_test.TRACES}
        assert set(stats.stored) <= first_shas and all(
            len(ids) == 1 for ids in stats.stored.values())
        assert len(stats.summaries) >= 1
        log = srv.log.read_text()
    assert "Traceback" not in log
    engine = make_engine(f"sqlite:///{tmp_path / 'data' / 'gmpscope.db'}")
    try:
        integrity_ok(engine)
        assert database_problems(engine, tmp_path / "data") == []
    finally:
        engine.dispose()
