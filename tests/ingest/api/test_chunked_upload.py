"""Chunked uploads through a real ``gmpscope serve``: /api/uploads and the ingest job.

A trace sent in chunks must be stored exactly as the one-shot upload stores it;
interrupted chunks resume from what the server kept; chunks that leave a hole or
overlap are refused; oversize and garbage uploads leave the database as it was.
"""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from tests.support.server import REPO, Served

TRACE = REPO / "samples" / "go1.27-httpnet.trace"
OTHER = REPO / "tests" / "data" / "traces" / "go1.22-workers.trace"
#: A guard against a job that never ends: a hang, not a speed limit.
JOB_GUARD_S = 300.0
#: Trace fields that depend only on the content (not on when or how it was stored).
CONTENT_FIELDS = ("sha256", "source", "size_bytes", "go_version", "family", "ticks_per_sec",
                  "generations", "first_ts", "last_ts", "events", "transitions", "goroutines",
                  "procs", "threads", "stacks", "event_counts", "status", "loss")


def auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def open_upload(srv: Served, name: str, size: int, token: str | None = None) -> str:
    r = requests.post(f"{srv.url}/api/uploads", params={"name": name, "size": str(size)},
                      headers=auth(token), timeout=60)
    assert r.status_code == 201, r.text
    upload_id: str = r.json()["upload_id"]
    return upload_id


def put(srv: Served, upload_id: str, offset: int, data: bytes,
        token: str | None = None) -> requests.Response:
    return requests.put(f"{srv.url}/api/uploads/{upload_id}", params={"offset": offset},
                        data=data, headers=auth(token), timeout=60)


def received(srv: Served, upload_id: str) -> int:
    r = srv.get(f"/api/uploads/{upload_id}")
    assert r.status_code == 200, r.text
    n: int = r.json()["received"]
    return n


def wait_job(srv: Served, job_id: str) -> dict[str, Any]:
    guard = time.monotonic() + JOB_GUARD_S
    while time.monotonic() < guard:
        job: dict[str, Any] = srv.get(f"/api/jobs/{job_id}").json()
        if job["state"] in ("done", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} still not finished: {job}")


def complete(srv: Served, upload_id: str, token: str | None = None) -> dict[str, Any]:
    r = requests.post(f"{srv.url}/api/uploads/{upload_id}/complete", headers=auth(token),
                      timeout=60)
    assert r.status_code == 202, r.text
    return wait_job(srv, r.json()["job_id"])


def chunked_upload(srv: Served, data: bytes, name: str, chunk: int,
                   token: str | None = None) -> dict[str, Any]:
    upload_id = open_upload(srv, name, len(data), token)
    for off in range(0, len(data), chunk):
        r = put(srv, upload_id, off, data[off:off + chunk], token)
        assert r.status_code == 200, r.text
        assert r.json()["received"] == min(off + chunk, len(data))
    return complete(srv, upload_id, token)


def trace_count(srv: Served) -> int:
    return len(srv.get("/api/traces").json()["traces"])


def spools(srv: Served) -> list[Path]:
    return sorted((srv.data_dir / "tmp").glob(".upload-*"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """An empty server of this module (the tests add traces to it); two worker
    processes, so that chunks, completes and job polls land on either."""
    with Served(tmp_path_factory.mktemp("chunked") / "data",
                extra_args=("--workers", "2", "--threads", "4")) as srv:
        yield srv


def test_chunked_equals_one_shot(served: Served, samples_server: Served,
                                 sample_ids: dict[str, int]) -> None:
    data = TRACE.read_bytes()
    chunk = len(data) // 5 + 1
    job = chunked_upload(served, data, TRACE.name, chunk)
    assert job["state"] == "done", job
    assert job["sha256"] == sha256(data) and not job["existing"]
    tid = job["trace_id"]
    mine = served.get(f"/api/traces/{tid}").json()
    # samples_server stored the same file through the one-shot path (gmpscope serve FILE).
    reference = samples_server.get(f"/api/traces/{sample_ids[TRACE.name]}").json()
    for field in CONTENT_FIELDS:
        assert mine[field] == reference[field], field
    assert mine["transition_counts"] == reference["transition_counts"]
    assert mine["name"] == TRACE.name
    # The one-shot upload of the same bytes finds the trace the chunks made.
    one = served.post("/api/traces", data=data, params={"name": "again"})
    assert one.status_code == 200, one.text
    assert one.json()["id"] == tid
    assert one.json()["events"] == mine["events"] == job["result"]["events"]
    # The spool and its session are gone; the job is in the history table.
    assert spools(served) == []
    again = chunked_upload(served, data, "same bytes", len(data))
    assert again["state"] == "done" and again["existing"] and again["trace_id"] == tid


def _send_cut_chunk(srv: Served, upload_id: str, offset: int, data: bytes, sent: int) -> None:
    """PUT a chunk that announces len(data) bytes, send only ``sent`` of them and
    hang up: a network failure in the middle of a chunk."""
    u = urlsplit(srv.url)
    with socket.create_connection((u.hostname, u.port)) as s:
        head = (f"PUT /api/uploads/{upload_id}?offset={offset} HTTP/1.1\r\n"
                f"Host: {u.netloc}\r\nContent-Length: {len(data)}\r\n"
                "Content-Type: application/octet-stream\r\n\r\n").encode()
        s.sendall(head + data[:sent])
        s.shutdown(socket.SHUT_WR)
        try:
            s.recv(65536)
        except OSError:
            pass


def test_resume_after_interrupted_chunk(served: Served) -> None:
    data = OTHER.read_bytes()
    chunk = 64 << 10
    upload_id = open_upload(served, OTHER.name, len(data))
    assert put(served, upload_id, 0, data[:chunk]).status_code == 200
    _send_cut_chunk(served, upload_id, chunk, data[chunk:2 * chunk], sent=20_000)
    # The server keeps at most what arrived; the client resumes from there.
    got = received(served, upload_id)
    assert chunk <= got <= chunk + 20_000
    # The last chunk again (a retry after a lost answer) changes nothing.
    retry = put(served, upload_id, 0, data[:chunk]) if got == chunk else \
        put(served, upload_id, chunk, data[chunk:got])
    assert retry.status_code == 200, retry.text
    assert retry.json()["received"] == got
    off = got
    while off < len(data):
        r = put(served, upload_id, off, data[off:off + chunk])
        assert r.status_code == 200, r.text
        off = r.json()["received"]
    job = complete(served, upload_id)
    assert job["state"] == "done", job
    assert job["sha256"] == sha256(data)
    assert served.get(f"/api/traces/{job['trace_id']}").json()["sha256"] == sha256(data)


def test_holes_overlaps_and_overruns_are_refused(served: Served) -> None:
    data = (REPO / "samples" / "go1.27-mutex.trace").read_bytes()
    upload_id = open_upload(served, "mutex", len(data))
    assert put(served, upload_id, 0, data[:10_000]).status_code == 200
    hole = put(served, upload_id, 12_000, data[12_000:14_000])
    assert hole.status_code == 409 and "hole" in hole.json()["error"]
    overlap = put(served, upload_id, 5_000, data[5_000:15_000])
    assert overlap.status_code == 409 and "overlaps" in overlap.json()["error"]
    # Same range as the last chunk, other bytes: not a retry.
    forged = put(served, upload_id, 0, bytes(10_000))
    assert forged.status_code == 409
    past = put(served, upload_id, 10_000, data[10_000:] + b"x")
    assert past.status_code == 400 and "declared size" in past.json()["error"]
    early = served.post(f"/api/uploads/{upload_id}/complete")
    assert early.status_code == 409 and "incomplete" in early.json()["error"]
    assert received(served, upload_id) == 10_000
    # Aborting removes everything; the session is gone after.
    assert requests.delete(f"{served.url}/api/uploads/{upload_id}", timeout=60).status_code == 200
    assert served.get(f"/api/uploads/{upload_id}").status_code == 404
    assert not [p for p in spools(served) if upload_id in p.name]


@pytest.mark.parametrize("bad_id", ["ZZ" * 16, "0" * 31, "%00", "a" * 32 + ".json", "..."])
def test_hostile_ids_are_404(served: Served, bad_id: str) -> None:
    for method in ("GET", "PUT", "DELETE"):
        r = requests.request(method, f"{served.url}/api/uploads/{bad_id}?offset=0", data=b"x",
                             timeout=60)
        assert r.status_code == 404, (method, r.text)
        assert "error" in r.json()
    assert served.get(f"/api/jobs/{bad_id}").status_code == 404


def test_traversal_never_reaches_a_file(served: Served) -> None:
    r = requests.delete(f"{served.url}/api/uploads/..%2F..%2Fgmpscope.db", timeout=60)
    assert r.status_code in (404, 405)
    assert (served.data_dir / "gmpscope.db").is_file()


def test_garbage_fails_the_job_and_stores_nothing(served: Served) -> None:
    before = served.get("/api/traces").json()["traces"]
    garbage = (REPO / "samples" / "README.md").read_bytes()
    job = chunked_upload(served, garbage, "README.md", 500)
    assert job["state"] == "failed"
    assert "README.md" in job["error"] and "not a readable Go trace" in job["error"]
    assert job["trace_id"] is None
    assert served.get("/api/traces").json()["traces"] == before
    assert spools(served) == []


def test_two_concurrent_chunked_uploads(served: Served) -> None:
    files = [REPO / "samples" / "go1.27-timers.trace", REPO / "samples" / "go1.27-connleak.trace"]
    jobs: dict[str, dict[str, Any]] = {}
    ids = {f.name: open_upload(served, f.name, f.stat().st_size) for f in files}
    datas = {f.name: f.read_bytes() for f in files}
    chunk = 16 << 10

    def send(name: str) -> None:
        data = datas[name]
        for off in range(0, len(data), chunk):
            r = put(served, ids[name], off, data[off:off + chunk])
            assert r.status_code == 200, r.text
        jobs[name] = complete(served, ids[name])

    threads = [threading.Thread(target=send, args=(f.name,)) for f in files]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(jobs) == {f.name for f in files}
    for name, job in jobs.items():
        assert job["state"] == "done", job
        stored = served.get(f"/api/traces/{job['trace_id']}").json()
        assert stored["sha256"] == sha256(datas[name]) and stored["name"] == name
    assert jobs[files[0].name]["trace_id"] != jobs[files[1].name]["trace_id"]


def test_oversize_is_413_before_anything_is_stored(tmp_path: Path) -> None:
    limit = 100_000
    with Served(tmp_path / "data", extra_args=("--workers", "1", "--threads", "4",
                                               "--max-upload", str(limit))) as srv:
        r = srv.post("/api/uploads", params={"name": "big", "size": limit + 1})
        assert r.status_code == 413 and "limit" in r.json()["error"]
        assert spools(srv) == []
        assert trace_count(srv) == 0
        # A chunk cannot get past the declared size either.
        upload_id = open_upload(srv, "ok", limit)
        over = put(srv, upload_id, 0, bytes(limit + 1))
        assert over.status_code == 400
        assert received(srv, upload_id) == 0


def test_token_guards_every_write(tmp_path: Path) -> None:
    token = "s3cret"
    data = (REPO / "samples" / "go1.27-syscallblock.trace").read_bytes()
    with Served(tmp_path / "data", token=token) as srv:
        assert srv.post("/api/uploads", params={"name": "x", "size": 10}).status_code == 401
        upload_id = open_upload(srv, "sys", len(data), token)
        assert put(srv, upload_id, 0, data).status_code == 401
        assert put(srv, upload_id, 0, data, "wrong").status_code == 401
        assert received(srv, upload_id) == 0  # srv.get sends the token: reads need it too
        assert requests.get(f"{srv.url}/api/uploads/{upload_id}", timeout=60).status_code == 401
        assert put(srv, upload_id, 0, data, token).status_code == 200
        assert srv.post(f"/api/uploads/{upload_id}/complete").status_code == 401
        assert requests.delete(f"{srv.url}/api/uploads/{upload_id}",
                               timeout=60).status_code == 401
        job = complete(srv, upload_id, token)
        assert job["state"] == "done"
        assert trace_count(srv) == 1

