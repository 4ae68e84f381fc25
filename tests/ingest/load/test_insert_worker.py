"""ingest.load.insert_worker: jobs run in order on one thread, one at a time; a failure
reaches the caller; a caller's failure waits until the worker has let go."""

from __future__ import annotations

import threading

import pytest

from ingest.load.insert_worker import InsertWorker


def test_jobs_run_in_order_on_one_other_thread() -> None:
    seen: list[tuple[int, str]] = []
    with InsertWorker() as w:
        for i in range(20):
            w.submit(lambda i=i: seen.append((i, threading.current_thread().name)))
    assert [i for i, _ in seen] == list(range(20))
    assert {name for _, name in seen} == {"insert-worker"}


def test_one_job_at_a_time() -> None:
    running = threading.Semaphore(1)
    overlaps: list[int] = []

    def job() -> None:
        if not running.acquire(blocking=False):
            overlaps.append(1)
            return
        try:
            threading.Event().wait(0.001)
        finally:
            running.release()

    with InsertWorker() as w:
        for _ in range(50):
            w.submit(job)
    assert not overlaps


def test_a_failure_reaches_the_caller_and_later_jobs_do_not_run() -> None:
    ran: list[int] = []

    def boom() -> None:
        raise KeyError("bad column")

    with pytest.raises(KeyError, match="bad column"):
        with InsertWorker() as w:
            w.submit(boom)
            w.submit(lambda: ran.append(1))  # raises here, or close() does
            w.submit(lambda: ran.append(2))
    assert ran == []


def test_the_callers_failure_waits_for_the_running_job() -> None:
    started, release = threading.Event(), threading.Event()
    finished: list[bool] = []

    def slow() -> None:
        started.set()
        release.wait(5)
        finished.append(True)

    with pytest.raises(RuntimeError, match="derivation failed"):
        with InsertWorker() as w:
            w.submit(slow)
            started.wait(5)
            threading.Timer(0.05, release.set).start()
            raise RuntimeError("derivation failed")
    assert finished == [True], "the connection was free again before the rollback"
