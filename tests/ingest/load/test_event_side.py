"""The events' side derived by a forked child (ingest.load.event_side) stores
what one process deriving both sides does: each real trace ingested both
ways makes the same database and the same frames and caches, in memory and
whole, and spilled in small buckets with its events' tables in parts of 3
rows; a child that fails or dies fails the
load with nothing stored, and a load that fails on its own side stops the
child."""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from collectors.gotrace import columnar
from collectors.gotrace.reader import read_header
from ingest.load import event_side, eventrows, insert_tables
from ingest.load.pipeline import BadParquetError, ingest_trace_file
from ingest.store import interval_files
from ingest.store.db import make_engine
from tests.ingest.load.test_bucket_tables import (
    _assert_same_store,
    _count_buckets,
    spilled_in_parts,
)
from tests.support.consistency import database_problems, integrity_ok
from tests.support.ingest_fixtures import ROOT, TRACES

V2 = [t for t in TRACES if read_header(t.read_bytes()[:64])[1] == "v2"]
SAMPLES = [ROOT / "samples" / n for n in ("go1.27-httpnet-2MB.trace", "go1.27-mutex.trace")]

needs_c = pytest.mark.skipif(not columnar.available(), reason="the C decoder is not built")


def _forking(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every trace's events' side forked; the children's pids, as started."""
    monkeypatch.setattr(insert_tables, "FORK_MIN_EVENTS", 0)
    pids: list[int] = []
    real = event_side.EventSide.start.__func__  # type: ignore[attr-defined]

    def start(cls: type[event_side.EventSide], *a: object) -> event_side.EventSide:
        child = real(cls, *a)
        pids.append(child.pid)
        return child  # type: ignore[no-any-return]

    monkeypatch.setattr(event_side.EventSide, "start", classmethod(start))
    return pids


def _engine(d: Path) -> Engine:
    return make_engine(f"sqlite:///{d / 'db.sqlite'}")


def _nothing_stored(engine: Engine, data: Path) -> None:
    with engine.connect() as conn:
        for table in ("traces", "region_rows_all", "metric_rows_all", "strings"):
            assert conn.execute(text(f"SELECT count(*) FROM {table}")).scalar() == 0, table
    for d in (data / "frames", data / interval_files.ROOT):
        assert not list(d.glob("*")) if d.exists() else True, list(d.glob("*"))
    integrity_ok(engine)
    assert database_problems(engine, data) == []


def _load_fails(tmp_path: Path, error: type[BaseException], match: str) -> tuple[Engine, Path]:
    """The sample's load fails with ``error`` (matching ``match``) and stores
    nothing; its database and data directory, for more."""
    data = tmp_path / "data"
    engine = _engine(data)
    with pytest.raises(error, match=match):
        ingest_trace_file(engine, SAMPLES[0], data_dir=data)
    _nothing_stored(engine, data)
    return engine, data


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@needs_c
@pytest.mark.parametrize("parts", [False, True], ids=["whole", "spilled, in parts"])
@pytest.mark.parametrize("trace", V2 + SAMPLES, ids=lambda p: p.name)
def test_a_forked_events_side_stores_what_one_process_does(
        trace: Path, parts: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if parts:  # in buckets of 600 transitions (300 beside the child)
        spilled_in_parts(monkeypatch, 600)
    one = _engine(tmp_path / "one")
    ingest_trace_file(one, trace, data_dir=tmp_path / "one" / "data")
    pids = _forking(monkeypatch)
    sizes = _count_buckets(monkeypatch)
    forked = _engine(tmp_path / "forked")
    ingest_trace_file(forked, trace, data_dir=tmp_path / "forked" / "data")
    assert len(pids) == 1 and _gone(pids[0])
    if parts:  # a goroutine's rows are never split: a bucket may be one goroutine's
        assert len(sizes) > 1 or "allocfree" in trace.name, sizes
    _assert_same_store(one, tmp_path / "one" / "data", forked, tmp_path / "forked" / "data")
    one.dispose()
    forked.dispose()


@needs_c
def test_a_failing_events_side_fails_the_load(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The child's error is the load's (a ValueError: the trace's columns do
    not fit together); nothing is stored, and the trace loads after."""
    pids = _forking(monkeypatch)
    real = eventrows.tasks

    def tasks(events: object) -> object:
        raise ValueError("tasks that do not fit together")

    monkeypatch.setattr(eventrows, "tasks", tasks)
    engine, data = _load_fails(tmp_path, BadParquetError, "tasks that do not fit together")
    assert len(pids) == 1 and _gone(pids[0])
    monkeypatch.setattr(eventrows, "tasks", real)
    assert ingest_trace_file(engine, SAMPLES[0], data_dir=data).created
    assert len(pids) == 2
    engine.dispose()


@needs_c
def test_a_killed_events_worker_fails_the_load(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    _forking(monkeypatch)

    def killed(events: object) -> object:
        os.kill(os.getpid(), signal.SIGKILL)  # the child: it never returns
        raise AssertionError

    monkeypatch.setattr(eventrows, "ranges", killed)
    engine, _ = _load_fails(tmp_path, OSError, "events' worker .* ended with status 0x9 before")
    engine.dispose()


@needs_c
def test_a_load_failing_beside_the_child_stops_it(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The transitions' side fails while the child derives: the child is
    killed and reaped, its staged files go with the load's."""
    from ingest.load import bucket_tables

    pids = _forking(monkeypatch)

    def failing(self: object, *a: object) -> object:
        raise OSError("a disk that failed mid-load")

    monkeypatch.setattr(bucket_tables.BucketTables, "_syscall_part", failing)
    engine, _ = _load_fails(tmp_path, OSError, "mid-load")
    assert len(pids) == 1 and _gone(pids[0])
    engine.dispose()


@needs_c
@pytest.mark.parametrize("size", ["3m", "5m"])
def test_a_full_disk_beside_the_child_stores_nothing(size: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The data directory a small tmpfs that fills up while the two processes
    write (their caches, coded files, frames and interval files): the load
    fails with the disk's error, nothing is stored, and with room the same
    trace loads."""
    import subprocess

    from tests.support.tmpfs import small_tmpfs

    pids = _forking(monkeypatch)
    with small_tmpfs(tmp_path, size) as disk:
        data = disk / "data"
        engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
        with pytest.raises(OSError) as failed:
            ingest_trace_file(engine, SAMPLES[0], data_dir=data)
        assert failed.value.errno == errno.ENOSPC or "No space left" in str(failed.value)
        assert pids and all(_gone(p) for p in pids)
        _nothing_stored(engine, data)
        subprocess.run(["mount", "-o", "remount,size=200m", str(disk)], check=True)
        assert ingest_trace_file(engine, SAMPLES[0], data_dir=data).created
        engine.dispose()


@needs_c
def test_a_fork_refused_derives_both_sides_here(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                caplog: pytest.LogCaptureFixture) -> None:
    """os.fork failing (EAGAIN: too many processes) leaves the load to derive
    the events' side itself: the same store as one process's."""
    def refused() -> int:
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

    one = _engine(tmp_path / "one")
    ingest_trace_file(one, SAMPLES[0], data_dir=tmp_path / "one" / "data")
    monkeypatch.setattr(insert_tables, "FORK_MIN_EVENTS", 0)
    monkeypatch.setattr(os, "fork", refused)
    here = _engine(tmp_path / "here")
    ingest_trace_file(here, SAMPLES[0], data_dir=tmp_path / "here" / "data")
    assert "the events' side not forked" in caplog.text
    _assert_same_store(one, tmp_path / "one" / "data", here, tmp_path / "here" / "data")
    one.dispose()
    here.dispose()
