"""Background ingest jobs (ingest.api.job_runner): progress that moves, history rows, dead workers.

The runner is driven in-process with a real SQLite database and real traces, and
every live state it writes is recorded, so the progress sequence is checked
exactly (no timing); a job left behind by a dead process is checked through a
real server.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from sqlalchemy import Engine, func, select

from ingest.api import job_runner
from ingest.api.job_runner import STALE_MESSAGE, STALE_S, Job, JobFiles, JobRunner, job_status
from ingest.config import Settings
from ingest.store import models
from ingest.store.db import make_engine
from tests.support.server import REPO, Served

TRACE = REPO / "samples" / "go1.27-httpnet-2MB.trace"
#: A guard against a job that never ends: a hang, not a speed limit.
JOB_GUARD_S = 300.0


class Recorder(JobFiles):
    """JobFiles that also keeps a copy of every state written."""

    def __init__(self, tmp_dir: Path) -> None:
        super().__init__(tmp_dir)
        self.seen: list[Job] = []
        self.lock = threading.Lock()

    def write(self, job: Job) -> None:
        with self.lock:
            self.seen.append(Job(**{**job.__dict__, "result": dict(job.result)}))
        super().write(job)


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[tuple[JobRunner, Recorder, Engine]]:
    settings = Settings.from_env({}, data_dir=tmp_path / "data")
    engine = make_engine(settings.db_url)
    r = JobRunner(settings, engine)
    rec = Recorder(settings.tmp_dir)
    r.files = rec
    try:
        yield r, rec, engine
    finally:
        r.shutdown()
        engine.dispose()


def run_to_end(r: JobRunner, job_id: str) -> Job:
    guard = time.monotonic() + JOB_GUARD_S
    while time.monotonic() < guard:
        job = r.status(job_id)
        assert job is not None
        if job.state in ("done", "failed"):
            return job
        time.sleep(0.02)
    raise AssertionError(f"job {job_id} did not finish")


def history(engine: Engine, job_id: str) -> Any:
    """The job's row in the jobs table, once written (after the live file says it ended)."""
    guard = time.monotonic() + JOB_GUARD_S
    while time.monotonic() < guard:
        with engine.connect() as conn:
            row = conn.execute(select(models.jobs).where(models.jobs.c.id == job_id)).first()
        if row is not None:
            return row
        time.sleep(0.02)
    raise AssertionError(f"job {job_id} never recorded")


def spool_copy(src: Path, tmp: Path) -> Path:
    dest = tmp / f"spool-{src.name}"
    shutil.copyfile(src, dest)
    return dest


def test_progress_moves_through_the_stages(runner: tuple[JobRunner, Recorder, Engine],
                                           tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # Every update written: a 2 MB trace loads in less than the 0.25 s between
    # written updates (since its intervals are kept as files, not inserted), and
    # this test is about what the updates say, not how often they are written.
    monkeypatch.setattr(job_runner, "PROGRESS_EVERY_S", 0.0)
    r, rec, engine = runner
    spool = spool_copy(TRACE, tmp_path)
    cleaned: list[bool] = []
    job = r.submit(TRACE.name, spool, spool.stat().st_size, cleanup=lambda: cleaned.append(True))
    end = run_to_end(r, job.id)
    assert end.state == "done", end.error
    assert end.sha256 == hashlib.sha256(TRACE.read_bytes()).hexdigest()
    assert cleaned == [True]
    mine = [j for j in rec.seen if j.id == job.id]
    stages = [j.stage for j in mine]
    # Each stage once, in order (repeats are progress within a stage).
    order = [s for i, s in enumerate(stages) if i == 0 or stages[i - 1] != s]
    assert order == ["queued", "hash", "decode", "load", "done"], order
    assert [j.state for j in mine][0] == "queued" and mine[-1].state == "done"
    loads = [j for j in mine if j.stage == "load"]
    assert len({j.done for j in loads}) > 1, "load progress never moved"
    assert all(a.done <= b.done for a, b in zip(loads, loads[1:], strict=False))
    total = loads[-1].total
    with engine.connect() as conn:
        transitions = conn.execute(select(models.traces.c.transitions)
                                   .where(models.traces.c.id == end.trace_id)).scalar_one()
        # The loader counts two writes per transition (its rows, then the derived tables).
        assert total == 2 * transitions
    row = history(engine, job.id)
    assert (row.state, row.trace_id, row.sha256, row.existing) == \
        ("done", end.trace_id, end.sha256, False)
    # The heartbeats never go backwards.
    beats = [j.heartbeat for j in mine]
    assert beats == sorted(beats)


def test_garbage_job_fails_and_is_recorded(runner: tuple[JobRunner, Recorder, Engine],
                                           tmp_path: Path) -> None:
    r, _, engine = runner
    spool = spool_copy(REPO / "samples" / "README.md", tmp_path)
    job = r.submit("notes.md", spool, spool.stat().st_size)
    end = run_to_end(r, job.id)
    assert end.state == "failed"
    assert end.error.startswith("notes.md: not a readable Go trace")
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(models.traces)).scalar_one() == 0
    row = history(engine, job.id)
    assert row.state == "failed" and row.error == end.error and row.trace_id is None
    # Gone from the live files, the history still answers.
    r.files.path(job.id).unlink()
    again = r.status(job.id)
    assert again is not None and (again.state, again.error) == ("failed", end.error)


def test_stale_heartbeat_is_reported_failed(tmp_path: Path) -> None:
    files = JobFiles(tmp_path)
    job = Job(id="a" * 32, name="t.trace", size=10, state="running", stage="load",
              heartbeat=1_000_000.0)
    files.write(job)
    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    try:
        alive = job_status(files, engine, job.id, now=job.heartbeat + STALE_S - 1)
        dead = job_status(files, engine, job.id, now=job.heartbeat + STALE_S + 1)
    finally:
        engine.dispose()
    assert alive is not None and alive.state == "running"
    assert dead is not None and (dead.state, dead.error) == ("failed", STALE_MESSAGE)


def test_a_dead_workers_job_fails_through_the_api(tmp_path: Path) -> None:
    """What a killed worker leaves: a running job whose heartbeat stopped."""
    with Served(tmp_path / "data") as srv:
        files = JobFiles(srv.data_dir / "tmp")
        job = Job(id="b" * 32, name="t.trace", size=10, state="running", stage="decode",
                  created=time.time() - 120, heartbeat=time.time() - STALE_S - 5)
        files.write(job)
        got = srv.get(f"/api/jobs/{job.id}").json()
        assert (got["state"], got["error"]) == ("failed", STALE_MESSAGE)
        assert srv.get("/api/traces").json()["traces"] == []
        listed = srv.get("/api/jobs").json()["jobs"]
        assert [j["job_id"] for j in listed] == [job.id]
        assert srv.get(f"/api/jobs/{'c' * 32}").status_code == 404


def test_completing_again_after_a_dead_job_restarts_it(tmp_path: Path) -> None:
    """The spool of a job whose process died is still there: completing the upload
    again starts a new job instead of answering the dead one."""
    data = (REPO / "samples" / "go1.27-mutex.trace").read_bytes()
    with Served(tmp_path / "data") as srv:
        r = srv.post("/api/uploads", params={"name": "mutex", "size": str(len(data))})
        upload_id = r.json()["upload_id"]
        assert requests.put(f"{srv.url}/api/uploads/{upload_id}?offset=0", data=data,
                            timeout=60).status_code == 200
        # What a worker killed right after taking the upload leaves behind.
        dead = Job(id="d" * 32, name="mutex", size=len(data), state="running", stage="decode",
                   heartbeat=time.time() - STALE_S - 5)
        JobFiles(srv.data_dir / "tmp").write(dead)
        meta = srv.data_dir / "tmp" / f".upload-{upload_id}.json"
        meta.write_text(json.dumps({**json.loads(meta.read_text()), "job_id": dead.id}))
        r = srv.post(f"/api/uploads/{upload_id}/complete")
        assert r.status_code == 202
        job_id = r.json()["job_id"]
        assert job_id != dead.id
        guard = time.monotonic() + JOB_GUARD_S
        while (job := srv.get(f"/api/jobs/{job_id}").json())["state"] not in ("done", "failed"):
            assert time.monotonic() < guard, job
            time.sleep(0.05)
        assert job["state"] == "done", job
        assert job["sha256"] == hashlib.sha256(data).hexdigest()
        assert len(srv.get("/api/traces").json()["traces"]) == 1
