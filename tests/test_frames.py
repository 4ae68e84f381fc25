"""The views' frame cache (ingest.frames): what the loader writes while loading equals
what is rebuilt from the database, row for row; deletes and id reuse never show stale
frames."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from ingest.config import Settings, sqlite_url
from ingest.db import make_engine
from ingest.frames import TABLE_COLUMNS, FrameStore, TraceNotFound, build_arrays
from ingest.load import ingest_trace_file
from ingest.queries import delete_trace

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "samples" / "go1.27-syscallblock.trace"
OTHER = REPO / "tests" / "data" / "traces" / "go1.22-workers.trace"


@pytest.fixture()
def store(tmp_path: Path) -> FrameStore:
    settings = Settings.from_env({}, data_dir=tmp_path, db_url=sqlite_url(tmp_path / "t.db"))
    return FrameStore(make_engine(settings.db_url), settings.data_dir)


def test_frames_written_at_ingest_equal_the_database(store: FrameStore) -> None:
    res = ingest_trace_file(store.engine, SAMPLE, data_dir=store.data_dir)
    written = list((store.data_dir / "frames").glob(f"{res.id}-*"))
    assert len(written) == 1, "the loader wrote the frames"
    frames = store.get(res.id)
    facts, tables = build_arrays(store.engine, res.id)
    for name, cols in TABLE_COLUMNS.items():
        got = getattr(frames, name)
        assert len(got) == len(tables[name]), name
        for c in cols:
            np.testing.assert_array_equal(got[c], tables[name][c], err_msg=f"{name}.{c}")
    assert frames.first_ts == facts["first_ts"] and frames.last_ts == facts["last_ts"]
    assert {str(k): [v.resource, v.from_state, v.to_state, v.reason]
            for k, v in frames.kinds.items()} == facts["kinds"]
    # Lanes tile the interval rows: goroutines first, then procs.
    g, p = frames.goroutines, frames.procs
    assert g.off[0] == 0 and g.off[-1] == p.off[0] and p.off[-1] == len(frames.intervals)
    assert (frames.resource[: g.off[-1]] == 0).all() and (frames.resource[p.off[0]:] == 1).all()


def test_frames_rebuilt_when_missing_and_gone_after_delete(store: FrameStore) -> None:
    res = ingest_trace_file(store.engine, SAMPLE, data_dir=store.data_dir)
    n = len(store.get(res.id).intervals)
    shutil.rmtree(store.data_dir / "frames")
    fresh = FrameStore(store.engine, store.data_dir)
    assert len(fresh.get(res.id).intervals) == n
    assert delete_trace(store.engine, res.id, store.data_dir)
    assert not list((store.data_dir / "frames").glob(f"{res.id}-*"))
    with pytest.raises(TraceNotFound):
        fresh.get(res.id)


def test_reused_id_never_shows_the_old_trace(store: FrameStore) -> None:
    first = ingest_trace_file(store.engine, SAMPLE, data_dir=store.data_dir)
    n_first = len(store.get(first.id).intervals)
    delete_trace(store.engine, first.id, store.data_dir)
    second = ingest_trace_file(store.engine, OTHER, data_dir=store.data_dir)
    if second.id != first.id:
        pytest.skip("the database did not reuse the id")
    got = store.get(second.id)
    facts, tables = build_arrays(store.engine, second.id)
    assert len(got.intervals) == len(tables["intervals"]) != n_first


def test_server_start_clears_what_a_killed_server_left(tmp_path: Path) -> None:
    """Old upload spools, ingest work directories, frame staging directories and
    half-written lane sets go;
    recent ones (another server may be writing them) and everything else stay."""
    import os
    import time

    from gmpscope.wsgi import prepare

    settings = Settings.from_env({}, data_dir=tmp_path, db_url=sqlite_url(tmp_path / "t.db"))
    tmp, frames = settings.tmp_dir, tmp_path / "frames"
    derived = frames / "3-abcdef-v2" / "derived-v1"
    old = [tmp / ".upload-abc.part", tmp / "ingest-x1", frames / ".staging-1",
           derived / ".m_lanes.1f2e.tmp"]
    new = [tmp / ".upload-def.part", tmp / "ingest-x2", frames / ".staging-2",
           derived / ".p_lanes.3a4b.tmp"]
    keep = [tmp / "jobs", frames / "3-abcdef-v2", derived / "m_lanes", tmp_path / "traces"]
    for p in old + new + keep:
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.suffix == ".part":
            p.write_bytes(b"x")
        else:
            p.mkdir(exist_ok=True)
            (p / "f").write_bytes(b"x")
    hour_ago = time.time() - 7200
    for p in old + keep:
        os.utime(p, (hour_ago, hour_ago))
    prepare(settings)
    assert [p.exists() for p in old] == [False] * 4
    assert all(p.exists() for p in new + keep)


def test_server_start_removes_raw_traces_no_stored_trace_owns(store: FrameStore) -> None:
    """A load killed between keeping the raw file and its commit leaves the file; the
    next server start removes it (when old: another server may be loading it now) and
    keeps every stored trace's."""
    import os
    import time

    from gmpscope.wsgi import prepare
    from ingest.load import raw_path

    copy = store.data_dir / "upload.trace"  # the kept file may be a hard link of it
    shutil.copyfile(SAMPLE, copy)
    res = ingest_trace_file(store.engine, copy, data_dir=store.data_dir)
    owned = raw_path(store.data_dir, res.sha256)
    orphan_old = raw_path(store.data_dir, "ab" * 32)
    orphan_new = raw_path(store.data_dir, "cd" * 32)
    for p in (orphan_old, orphan_new):
        p.write_bytes(b"go 1.23 trace\x00\x00\x00")
    hour_ago = time.time() - 7200
    for p in (owned, orphan_old):
        os.utime(p, (hour_ago, hour_ago))
    settings = Settings.from_env({}, data_dir=store.data_dir,
                                 db_url=str(store.engine.url))
    prepare(settings)
    assert owned.exists() and orphan_new.exists()
    assert not orphan_old.exists()


def test_background_writer_failure_only_drops_the_cache(tmp_path: Path) -> None:
    # The frames directory cannot be made (a file is in the way): the loader's
    # background writer records the error, finish() says None, nothing stays.
    from ingest.frames import FrameWriter, Kind

    (tmp_path / "frames").write_text("not a directory")
    w = FrameWriter(tmp_path, background=True)
    w.add("syscalls", {c: np.arange(3) for c in TABLE_COLUMNS["syscalls"]}, 3)
    assert w.finish(1, "ab" * 32, 0, 10, {0: Kind("goroutine", "Running", "Idle", "")}) is None
    assert isinstance(w.error, OSError)
    assert (tmp_path / "frames").read_text() == "not a directory"
