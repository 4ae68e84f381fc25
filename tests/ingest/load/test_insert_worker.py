"""ingest.load.insert_worker: jobs run in order on one thread, one at a time; the
caller runs ahead by up to ``ahead_bytes`` of waiting jobs; a failure reaches the
caller; a caller's failure waits until the worker has let go."""

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


def _submit_returns(w: InsertWorker, nbytes: int, job: object = lambda: None) -> threading.Event:
    """Submit from another thread; the event is set once submit returned."""
    done = threading.Event()

    def go() -> None:
        w.submit(job, nbytes)  # type: ignore[arg-type]
        done.set()

    threading.Thread(target=go, daemon=True).start()
    return done


@pytest.mark.parametrize("ahead, admitted", [(0, 0), (100, 2), (120, 3)])
def test_the_caller_runs_ahead_by_ahead_bytes(ahead: int, admitted: int) -> None:
    # A first job of 30 bytes blocks the worker; jobs of 30 bytes more are
    # admitted while the waiting ones and the new one hold <= ahead bytes.
    release = threading.Event()
    seen: list[int] = []
    with InsertWorker(ahead) as w:
        w.submit(release.wait, 30)
        for i in range(admitted):
            w.submit(lambda i=i: seen.append(i), 30)
        blocked = _submit_returns(w, 30, lambda: seen.append(admitted))
        assert not blocked.wait(0.3), "submitted past ahead_bytes"
        release.set()
        assert blocked.wait(10)
    assert seen == list(range(admitted + 1))


def test_a_job_bigger_than_ahead_bytes_waits_for_the_worker_to_be_idle() -> None:
    release = threading.Event()
    with InsertWorker(100) as w:
        w.submit(release.wait, 10)
        big = _submit_returns(w, 1000)
        assert not big.wait(0.3)
        release.set()
        assert big.wait(10)
        w.wait_idle()
        w.submit(lambda: None, 1000)  # nothing waiting: admitted at once


def test_ahead_a_failure_stops_the_jobs_queued_after_it() -> None:
    ran: list[int] = []
    release = threading.Event()

    def boom() -> None:
        release.wait(5)
        raise KeyError("bad column")

    with pytest.raises(KeyError, match="bad column"):
        with InsertWorker(1 << 20) as w:
            w.submit(boom, 10)
            w.submit(lambda: ran.append(1), 10)  # queued behind the failure
            release.set()
            w.submit(lambda: ran.append(2), 10)
    assert ran == []
