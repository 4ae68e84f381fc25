"""Chunked upload sessions without a server: the race between a job's cleanup
and ``complete`` saving the job id (a garbage upload fails in milliseconds)."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

from ingest.api.chunked import Session, Sessions


def finished_session(tmp_path: Path) -> tuple[Sessions, Session]:
    sessions = Sessions(tmp_path, limit=1 << 20)
    s = sessions.create("README.md", 5)
    sessions.write(s.id, 0, 5, io.BytesIO(b"hello"))
    return sessions, s


def test_cleanup_of_a_fast_job_waits_for_complete(tmp_path: Path) -> None:
    sessions, s = finished_session(tmp_path)
    cleaner: list[threading.Thread] = []

    def start(meta: Session, spool: Path) -> str:
        # The job ends at once and cleans up while complete still holds the lock.
        t = threading.Thread(target=sessions.finish, args=(meta.id,))
        t.start()
        cleaner.append(t)
        time.sleep(0.3)  # without the lock the files are gone by now
        return "job-1"

    done = sessions.complete(s.id, start)
    assert done.job_id == "job-1"
    cleaner[0].join(timeout=10)
    assert not cleaner[0].is_alive()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_finish_after_the_spool_is_gone_removes_the_rest(tmp_path: Path) -> None:
    sessions, s = finished_session(tmp_path)
    sessions.spool_path(s.id).unlink()
    sessions.finish(s.id)
    assert list(tmp_path.iterdir()) == []
