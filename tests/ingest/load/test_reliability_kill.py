"""Kill -9 the whole server at random points of an ingest, many times.

Each round uploads a real trace (one-shot, or chunked and completed so that a
background job ingests it), waits a seeded random delay spanning the ingest,
and SIGKILLs the server's process group (the delay is drawn up to 1.1 times
the time the same trace's last ingest took, so kills spread over the ingest
whatever the machine's speed). Then, with the server down: SQLite's
integrity check passes (PostgreSQL: nothing to check there), and every stored
trace is whole (tests/support/consistency.py: counts, id blocks, interval
ranges, raw file). The server is started again on the same data, the same
file is uploaded again, and there is exactly one trace of it.

GMPSCOPE_RELIABILITY_KILLS sets the number of kills (8 by default, for CI time; the figure
in docs/reliability.md is of a longer run). With GMPSCOPE_TEST_PG_URL set, the
same runs on PostgreSQL too.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from ingest.store.db import make_engine
from tests.support.consistency import database_problems, integrity_ok
from tests.support.ingest_fixtures import backends, make_db_url
from tests.support.server import Served

REPO = Path(__file__).resolve().parents[3]
KILLS = int(os.environ.get("GMPSCOPE_RELIABILITY_KILLS", "8"))
#: (trace, first longest kill delay in seconds); then 1.1 times its last ingest's time.
TRACES = [
    (REPO / "tests" / "data" / "traces" / "go1.22-workers.trace", 2.0),
    (REPO / "tests" / "data" / "traces" / "go1.21-mixed.trace", 2.0),
    (REPO / "samples" / "go1.27-httpnet.trace", 1.5),
    (REPO / "samples" / "go1.27-httpnet-2MB.trace", 8.0),
]
#: Stored before the first kill: it must come through every kill whole.
KEEP = REPO / "samples" / "go1.27-syscallblock.trace"
ARGS = ("--workers", "1", "--threads", "4")


@pytest.fixture(params=backends())
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from make_db_url(request.param, tmp_path)


def kill(srv: Served) -> None:
    try:
        os.killpg(srv.proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    srv.proc.wait()


def upload_in_background(srv: Served, data: bytes, chunked: bool) -> threading.Thread:
    """Send the trace; the server is killed under it, so any outcome is fine here."""

    def send() -> None:
        try:
            if not chunked:
                srv.post("/api/traces", params={"name": "killed"}, data=data)
                return
            r = srv.post("/api/uploads", params={"name": "killed", "size": len(data)})
            up = r.json()["upload_id"]
            requests.put(f"{srv.url}/api/uploads/{up}", params={"offset": 0}, data=data,
                         timeout=120)
            srv.post(f"/api/uploads/{up}/complete")
        except (requests.RequestException, ValueError, KeyError):
            pass  # killed mid-request

    t = threading.Thread(target=send, daemon=True)
    t.start()
    return t


def work_dirs(data_dir: Path) -> set[Path]:
    tmp = data_dir / "tmp"
    return set(tmp.glob("ingest-*")) if tmp.is_dir() else set()


def killed_in(data_dir: Path, sha: str, work_before: set[Path]) -> str:
    """Where the kill hit, from what it left: an ingest's work directory (decode
    or load under way) or the kept raw file (the load transaction under way)."""
    from ingest.load.raw_copy import raw_path

    raw = raw_path(data_dir, sha).exists()
    work = work_dirs(data_dir) - work_before
    if raw:
        return "killed in the load transaction"
    if work:
        return "killed while decoding"
    return "killed before the ingest began"


def check_stored(data_dir: Path, db_url: str) -> int:
    """The database after a kill: intact, no half trace; the number of traces."""
    engine = make_engine(db_url, migrate_to_head=False)
    try:
        integrity_ok(engine)
        problems = database_problems(engine, data_dir)
        assert problems == [], problems
        with engine.connect() as conn:
            return int(conn.exec_driver_sql("SELECT count(*) FROM traces").scalar_one())
    finally:
        engine.dispose()


def traces_of(srv: Served, sha: str) -> list[dict[str, Any]]:
    return [t for t in srv.get("/api/traces").json()["traces"] if t["sha256"] == sha]


def test_kill_during_ingest(tmp_path: Path, db_url: str) -> None:
    rng = random.Random(f"kill:{KILLS}")
    data_dir = tmp_path / "data"
    srv = Served(data_dir, [KEEP], db_url=db_url, extra_args=ARGS)
    seen: Counter[str] = Counter()
    span = dict(TRACES)
    try:
        for round_ in range(KILLS):
            trace, _ = rng.choice(TRACES)
            longest = span[trace]
            data = trace.read_bytes()
            sha = hashlib.sha256(data).hexdigest()
            chunked = rng.random() < 0.5
            delay = rng.uniform(0.0, longest)
            work_before = work_dirs(data_dir)
            sender = upload_in_background(srv, data, chunked)
            time.sleep(delay)
            kill(srv)
            sender.join(120)
            stage = killed_in(data_dir, sha, work_before)
            check_stored(data_dir, db_url)
            srv = Served(data_dir, db_url=db_url, extra_args=ARGS)
            survived = len(traces_of(srv, sha))
            assert survived <= 1, (round_, trace.name)
            seen["stored before the kill" if survived else stage] += 1
            t0 = time.monotonic()
            r = srv.post("/api/traces", params={"name": trace.name}, data=data)
            assert r.status_code in (200, 201), r.text
            if r.status_code == 201:
                # The next kill of this trace falls within an ingest as long as this one.
                span[trace] = (time.monotonic() - t0) * 1.1
            assert (r.status_code == 200) == bool(survived), (round_, r.status_code, survived)
            assert len(traces_of(srv, sha)) == 1, (round_, trace.name)
            assert srv.get(f"/api/traces/{r.json()['id']}").status_code == 200
            # Deleted again, so that the next round kills a fresh ingest.
            r = requests.delete(f"{srv.url}/api/traces/{r.json()['id']}", timeout=60)
            assert r.status_code == 200, r.text
            assert [t["name"] for t in srv.get("/api/traces").json()["traces"]] == [KEEP.name]
    finally:
        srv.stop()
    print(f"\n{KILLS} kills: {dict(seen)}")
    assert sum(seen.values()) == KILLS
    check_stored(data_dir, db_url)
