"""Background ingest jobs: a finished upload decoded and loaded off the request thread.

A :class:`JobRunner` (one per app, kept in ``app.extensions``) runs each job in its
own thread pool and answers at once with the job's id. A job's live state (stage,
progress, heartbeat) is a small JSON file in ``<tmp_dir>/jobs/``, rewritten
atomically, so that any server process can report on it. It is not in the database
on purpose: on SQLite the load transaction holds the only write lock for most of an
ingest (27 of 30 s for a 25 MB trace), so progress written there would wait behind
the very transaction it reports on. When a job ends, its outcome is also recorded
in the ``jobs`` table (the history).

A process that dies mid-job stops touching the heartbeat: readers report such a job
as failed. The trace itself is never half-stored (one transaction per trace).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from ingest.api.warm import warm_reports
from ingest.config import Settings
from ingest.load.pipeline import IngestError, find_by_sha, ingest_trace_file
from ingest.memory import give_back_free_memory
from ingest.store import models
from ingest.store.retries import with_retries

log = logging.getLogger("gmpscope.ingest.jobs")

#: Seconds between heartbeats of every job a runner owns.
HEARTBEAT_S = 2.0
#: A queued or running job whose heartbeat is older than this is dead.
STALE_S = 30.0
#: Progress is written at most this often (stage changes always are).
PROGRESS_EVERY_S = 0.25
#: Live job files older than this are swept.
KEEP_S = 24 * 3600.0
STALE_MESSAGE = "the server stopped during the ingest; upload again"
_ID = re.compile(r"[0-9a-f]{32}")
ACTIVE = ("queued", "running")


@dataclass
class Job:
    """One ingest job as the API reports it."""

    id: str
    name: str
    size: int
    state: str = "queued"  # queued | running | done | failed
    stage: str = "queued"  # queued | hash | decode | load | done
    done: int = 0
    total: int = 0
    trace_id: int | None = None
    existing: bool = False
    sha256: str | None = None
    error: str = ""
    result: dict[str, Any] = field(default_factory=dict)
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    heartbeat: float = field(default_factory=time.time)

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["job_id"] = out.pop("id")
        return out


def valid_id(job_id: str) -> bool:
    return bool(_ID.fullmatch(job_id))


class JobFiles:
    """The live state files of jobs, readable by every process."""

    def __init__(self, tmp_dir: Path) -> None:
        self.directory = tmp_dir / "jobs"

    def path(self, job_id: str) -> Path:
        if not valid_id(job_id):
            raise ValueError(f"bad job id {job_id!r}")
        return self.directory / f"{job_id}.json"

    def write(self, job: Job) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path(job.id)
        tmp = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(asdict(job)))
        os.replace(tmp, path)

    def read(self, job_id: str) -> Job | None:
        try:
            return Job(**json.loads(self.path(job_id).read_text()))
        except (FileNotFoundError, ValueError, TypeError):
            return None

    def recent(self) -> list[Job]:
        jobs = []
        if self.directory.is_dir():
            for p in self.directory.glob("*.json"):
                job = self.read(p.stem) if valid_id(p.stem) else None
                if job is not None:
                    jobs.append(job)
        return sorted(jobs, key=lambda j: j.created, reverse=True)

    def sweep(self, keep_s: float = KEEP_S) -> None:
        cutoff = time.time() - keep_s
        if not self.directory.is_dir():
            return
        for p in self.directory.iterdir():
            with contextlib.suppress(OSError):
                if p.stat().st_mtime < cutoff:
                    p.unlink()


def job_status(files: JobFiles, engine: Engine, job_id: str,
               now: float | None = None) -> Job | None:
    """A job's state from its live file, else from the history table.

    A queued or running job whose heartbeat is stale is reported failed: the
    process running it is gone.
    """
    if not valid_id(job_id):
        return None
    job = files.read(job_id)
    if job is None:
        return _from_history(engine, job_id)
    if job.state in ACTIVE and (now or time.time()) - job.heartbeat > STALE_S:
        job.state, job.error = "failed", STALE_MESSAGE
    return job


def _from_history(engine: Engine, job_id: str) -> Job | None:
    j = models.jobs
    with engine.connect() as conn:
        row = conn.execute(select(j).where(j.c.id == job_id)).first()
    if row is None:
        return None
    return Job(id=row.id, name=row.name, size=row.size_bytes, state=row.state, stage=row.stage,
               trace_id=row.trace_id, existing=row.existing, sha256=row.sha256,
               error=row.error, created=row.created_at.timestamp(),
               started=row.started_at.timestamp() if row.started_at else None,
               finished=row.finished_at.timestamp(), heartbeat=row.finished_at.timestamp())


def _ts(t: float | None) -> datetime | None:
    return None if t is None else datetime.fromtimestamp(t, UTC)


class JobRunner:
    """Runs ingest jobs in background threads of this process and keeps their
    live files and heartbeats up to date."""

    def __init__(self, settings: Settings, engine: Engine, workers: int = 2) -> None:
        self.settings = settings
        self.engine = engine
        self.files = JobFiles(settings.tmp_dir)
        self._pool = ThreadPoolExecutor(max_workers=workers,
                                        thread_name_prefix="gmpscope-ingest")
        self._lock = threading.Lock()
        self._active: dict[str, Job] = {}
        self._last_write: dict[str, float] = {}
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def submit(self, name: str, path: Path, size: int,
               cleanup: Callable[[], None] | None = None) -> Job:
        """Queue the ingest of the trace file ``path``; ``cleanup`` runs when the
        job ends, whatever the outcome (it removes the upload's spool)."""
        self.files.sweep()
        job = Job(id=uuid.uuid4().hex, name=name, size=size)
        with self._lock:
            self._active[job.id] = job
            self.files.write(job)
            self._start_heartbeat()
        self._pool.submit(self._run, job, path, cleanup)
        return job

    def status(self, job_id: str) -> Job | None:
        return job_status(self.files, self.engine, job_id)

    def shutdown(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- running -----------------------------------------------------------

    def _start_heartbeat(self) -> None:
        if self._beat is None or not self._beat.is_alive():
            self._beat = threading.Thread(target=self._heartbeat, name="gmpscope-job-heartbeat",
                                          daemon=True)
            self._beat.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            with self._lock:
                for job in self._active.values():
                    job.heartbeat = time.time()
                    self.files.write(job)

    def _update(self, job: Job, force: bool = False, **changes: Any) -> None:
        with self._lock:
            stage_changed = changes.get("stage", job.stage) != job.stage
            for k, v in changes.items():
                setattr(job, k, v)
            now = time.time()
            if force or stage_changed or now - self._last_write.get(job.id, 0.0) >= \
                    PROGRESS_EVERY_S:
                job.heartbeat = now
                self.files.write(job)
                self._last_write[job.id] = now

    def _run(self, job: Job, path: Path, cleanup: Callable[[], None] | None) -> None:
        self._update(job, force=True, state="running", stage="hash", started=time.time(),
                     total=job.size)
        warm_id: int | None = None
        # The end state is published only after the cleanup, so that a client
        # that sees "done" or "failed" also sees the upload's files gone.
        outcome: dict[str, Any] = {"state": "failed", "error": "internal error: interrupted"}
        try:
            sha = self._hash(job, path)
            found = find_by_sha(self.engine, sha)
            if found is None:
                settings = self.settings

                def progress(stage: str, done: int, total: int) -> None:
                    self._update(job, stage=stage, done=done, total=total)

                result = with_retries(lambda: ingest_trace_file(
                    self.engine, path, job.name or f"upload-{sha[:12]}",
                    data_dir=settings.data_dir, sha256=sha, progress=progress))
            else:
                result = found
            job.result = result.as_dict()
            outcome = {"state": "done", "stage": "done", "trace_id": result.id,
                       "existing": not result.created, "done": job.total}
            if result.created:
                warm_id = result.id
        except IngestError as e:
            outcome = {"state": "failed", "error": str(e)}
        except Exception as e:  # a bug: say so, keep the traceback in the log
            log.exception("ingest job %s failed", job.id)
            outcome = {"state": "failed", "error": f"internal error: {type(e).__name__}"}
        finally:
            if cleanup is not None:
                with contextlib.suppress(OSError):
                    cleanup()
            self._update(job, force=True, **outcome)
            job.finished = time.time()
            with self._lock:
                self._active.pop(job.id, None)
                self._last_write.pop(job.id, None)
                job.heartbeat = job.finished
                self.files.write(job)
            # The history row comes after the live file: on SQLite it may wait behind
            # another job's load for minutes, and meanwhile readers already see the end.
            self._record(job)
        try:
            if warm_id is not None:
                # The job's own thread, the job already ended: warming delays nobody.
                warm_reports(self.engine, self.settings.data_dir, warm_id)
        finally:
            # A load keeps what it frees for its next step while the process is
            # small (ingest.memory); the server gives it all back once done.
            give_back_free_memory()

    def _hash(self, job: Job, path: Path) -> str:
        h = hashlib.sha256()
        done = 0
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(8 << 20), b""):
                h.update(block)
                done += len(block)
                self._update(job, done=done)
        job.sha256 = h.hexdigest()
        return job.sha256

    def _record(self, job: Job) -> None:
        """The outcome into the jobs table (the history); a failure here is logged,
        the live file already says how the job ended."""
        from ingest.store.db import write_tx

        row = {"id": job.id, "name": job.name, "size_bytes": job.size, "state": job.state,
               "stage": job.stage, "trace_id": job.trace_id, "existing": job.existing,
               "sha256": job.sha256, "error": job.error, "created_at": _ts(job.created),
               "started_at": _ts(job.started), "finished_at": _ts(job.finished)}

        def insert() -> None:
            with write_tx(self.engine) as conn:
                conn.execute(models.jobs.insert().values(**row))

        try:
            with_retries(insert)
        except Exception:
            log.exception("could not record job %s", job.id)
