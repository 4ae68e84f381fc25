"""The ingest HTTP API's limits, tokens, concurrency and crashes, through real
server processes on SQLite and PostgreSQL.

Each test talks HTTP (requests) to ``python -m gmpscope ingest-server`` started on a
free port against a real database: an SQLite file, or a fresh database in the
private PostgreSQL cluster of ``tools/postgres.py``. Uploads are the committed real
traces; expected counts come from the server's own answers, from the database,
or from Go's reference parser (``go tool trace -d=parsed``, tests marked slow).
"""

from __future__ import annotations

import collections
import concurrent.futures
import io
import json
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import requests
import sqlalchemy as sa

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.support.ingest_service import (  # noqa: E402
    SMALL,
    TRACE,
    TRACES,
    Database,
    IngestServer,
    post_archive,
    post_multipart,
    post_raw,
    sha256,
)
from tests.support.server import Served  # noqa: E402

# --------------------------------------------------------------------------
# limits and tokens (servers of their own)


def test_size_limit(own_db: Database, tmp_path: Path) -> None:
    limit = 100 * 1024
    assert SMALL.stat().st_size < limit < TRACE.stat().st_size
    server = IngestServer(own_db, tmp_path / "data", "--max-upload", "100k")
    try:
        before = own_db.row_counts()
        over = [post_raw(server, TRACE), post_raw(server, TRACE, chunked=True),
                post_multipart(server, TRACE),
                post_archive(server, TRACE.read_bytes())]
        for r in over:
            assert r.status_code == 413, r.text
            assert "limit" in r.json()["error"]
        # A zip under the upload limit that expands past what an archive may
        # write (20 x the limit, at least 64 MiB): a compression bomb.
        bomb = io.BytesIO()
        with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("meta.json", b"\0" * (80 << 20))
        assert len(bomb.getvalue()) < limit
        r = post_archive(server, bomb.getvalue())
        assert r.status_code == 413 and "bomb" in r.json()["error"], r.text
        assert own_db.row_counts() == before
        assert post_raw(server, SMALL).status_code == 201
        assert not list((tmp_path / "data" / "tmp").glob(".upload-*"))
    finally:
        assert server.stop() == 0


def test_token_for_writes(own_db: Database, tmp_path: Path) -> None:
    server = IngestServer(own_db, tmp_path / "data", token="s3cret-tök")
    try:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"},
                        {"Authorization": "Basic czNjcmV0"}):
            r = requests.post(server.api("/api/traces"), data=SMALL.read_bytes(),
                              headers=headers)
            assert r.status_code == 401, r.text
            assert r.json()["error"]
        assert own_db.row_counts()["traces"] == 0
        ok = requests.post(server.api("/api/traces"), data=SMALL.read_bytes(),
                           headers={"Authorization": "Bearer s3cret-tök".encode()})
        assert ok.status_code == 201, ok.text
        tid = ok.json()["id"]
        # Reads need the token too (ingest/api/auth.py), sent in UTF-8 like the writes'.
        assert requests.get(server.api("/api/traces")).status_code == 401
        assert requests.get(server.api(f"/api/traces/{tid}"),
                            headers={"Authorization": "Bearer s3cret-tök".encode()}
                            ).status_code == 200
        assert requests.delete(server.api(f"/api/traces/{tid}")).status_code == 401
        assert requests.delete(server.api(f"/api/traces/{tid}"),
                               headers={"Authorization": "Bearer s3cret-tök".encode()}
                               ).status_code == 200
    finally:
        assert server.stop() == 0


# --------------------------------------------------------------------------
# concurrency and crashes


_CLIENT = """
import sys, urllib.error, urllib.request
req = urllib.request.Request(sys.argv[1], data=open(sys.argv[2], "rb").read(), method="POST",
                             headers={"Content-Type": "application/octet-stream"})
try:
    with urllib.request.urlopen(req) as r:
        status, body = r.status, r.read()
except urllib.error.HTTPError as e:
    status, body = e.code, e.read()
sys.stdout.write(str(status) + "\\n" + body.decode())
"""


def upload_from_process(server: Served, trace: Path) -> tuple[int, str]:
    """Upload from another process (urllib), as a separate client program would."""
    out = subprocess.run([sys.executable, "-c", _CLIENT, server.api("/api/traces"), str(trace)],
                         capture_output=True, text=True, check=True).stdout
    status, _, body = out.partition("\n")
    return int(status), body


def test_concurrent_uploads(own_db: Database, tmp_path: Path) -> None:
    server = IngestServer(own_db, tmp_path / "data", "--workers", "3", "--threads", "4")
    try:
        jobs = [t for t in TRACES for _ in range(3)]  # every trace three times at once
        health: list[int] = []
        stop = threading.Event()

        def probe() -> None:
            while not stop.is_set():
                health.append(requests.get(server.api("/healthz")).status_code)

        def upload(i_trace: tuple[int, Path]) -> tuple[int, str]:
            i, trace = i_trace
            if i % 4 == 0:
                r = post_multipart(server, trace)
            elif i % 4 == 3:
                return upload_from_process(server, trace)
            else:
                r = post_raw(server, trace, chunked=i % 4 == 2)
            return r.status_code, r.text

        prober = threading.Thread(target=probe)
        prober.start()
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
            answers = list(pool.map(upload, enumerate(jobs)))
        stop.set()
        prober.join()
        for status, text in answers:
            assert status in (200, 201), text
            assert "locked" not in text
        by_sha: dict[str, set[int]] = collections.defaultdict(set)
        created: collections.Counter[str] = collections.Counter()
        for status, text in answers:
            body = json.loads(text)
            by_sha[body["sha256"]].add(body["id"])
            created[body["sha256"]] += status == 201
        assert set(by_sha) == {sha256(t) for t in TRACES}
        assert all(len(ids) == 1 for ids in by_sha.values())
        assert all(n == 1 for n in created.values()), created
        assert sorted(own_db.trace_shas()) == sorted(by_sha)
        assert health and set(health) == {200}
        assert own_db.orphans() == {}
    finally:
        assert server.stop() == 0


def _wait_for_spool(data_dir: Path, size: int, proc: subprocess.Popen[bytes]) -> bool:
    """Poll until an upload spool file in the data dir has all ``size`` bytes."""
    tmp = data_dir / "tmp"
    while proc.poll() is None:
        for p in tmp.glob(".upload-*") if tmp.is_dir() else ():
            try:
                if p.stat().st_size == size:
                    return True
            except FileNotFoundError:
                continue
        time.sleep(0.001)
    return False


def test_kill9_mid_ingest_then_restart(own_db: Database, tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = IngestServer(own_db, data, "--workers", "1")
    big = max(TRACES, key=lambda p: p.stat().st_size)
    size = big.stat().st_size
    killed_mid_ingest = 0
    for _attempt in range(3):
        answer: list[requests.Response | Exception] = []

        def upload() -> None:
            try:
                answer.append(post_raw(server, big))  # noqa: B023
            except requests.RequestException as e:
                answer.append(e)  # noqa: B023

        t = threading.Thread(target=upload)
        t.start()
        assert _wait_for_spool(data, size, server.proc)
        server.kill9()
        t.join()
        if isinstance(answer[0], Exception):
            killed_mid_ingest += 1
        if own_db.kind == "sqlite":
            with own_db.engine.connect() as c:
                assert c.execute(sa.text("PRAGMA integrity_check")).scalar_one() == "ok"
        assert own_db.orphans() == {}
        assert own_db.trace_shas().count(sha256(big)) <= 1
        server.start()  # the same database and data directory
        if killed_mid_ingest:
            break
        # The ingest won the race against the kill: start over with an empty DB.
        tid = requests.get(server.api("/api/traces")).json()
        for tr in tid["traces"] if isinstance(tid, dict) else tid:
            requests.delete(server.api(f"/api/traces/{tr['id']}"))
    try:
        assert killed_mid_ingest, "the server answered before every kill"
        r = post_raw(server, big)
        assert r.status_code == 201, r.text
        assert own_db.trace_shas() == [sha256(big)]
        assert post_raw(server, big).status_code == 200
        assert own_db.orphans() == {}
    finally:
        assert server.stop() == 0
