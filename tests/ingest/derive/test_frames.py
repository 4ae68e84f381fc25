"""The views' frame cache (ingest.derive.frames): what the loader writes while loading equals
what is rebuilt from the database, row for row; deletes and id reuse never show stale
frames."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from ingest.config import Settings, sqlite_url
from ingest.derive.cache import DERIVED_VERSION
from ingest.derive.frame_layout import TABLE_COLUMNS
from ingest.derive.frames import FrameStore, TraceNotFound, build_arrays
from ingest.load.delete import delete_trace
from ingest.load.pipeline import ingest_trace_file
from ingest.store.db import make_engine

REPO = Path(__file__).resolve().parents[3]
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


def test_remapped_frames_read_the_same_columns_through_their_own_mappings(
        store: FrameStore) -> None:
    res = ingest_trace_file(store.engine, SAMPLE, data_dir=store.data_dir)
    frames = store.get(res.id)
    other = frames.remapped()
    for name, cols in TABLE_COLUMNS.items():
        for c in cols:
            mine, theirs = getattr(frames, name)[c], getattr(other, name)[c]
            np.testing.assert_array_equal(mine, theirs, err_msg=f"{name}.{c}")
            assert not np.shares_memory(mine, theirs), f"{name}.{c} shares a mapping"
    # What opening computed is shared, not computed again.
    assert other.state is frames.state and other.goroutines is frames.goroutines
    other.release()  # hands back its own pages: the first still reads its columns
    np.testing.assert_array_equal(frames.intervals["start_ts"], other.intervals["start_ts"])


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
    derived = frames / "3-abcdef-v2" / f"derived-v{DERIVED_VERSION}"
    old = [tmp / ".upload-abc.part", tmp / "ingest-x1", frames / ".staging-1",
           derived / ".m_lanes.1f2e.tmp"]
    new = [tmp / ".upload-def.part", tmp / "ingest-x2", frames / ".staging-2",
           derived / ".p_lanes.3a4b.tmp"]
    keep = [tmp / "jobs", frames / "3-abcdef-v2", derived / "m_lanes", tmp_path / "traces"]
    # Lane sets of an older layout go whatever their age (nothing reads them).
    older = frames / "3-abcdef-v2" / f"derived-v{DERIVED_VERSION - 1}" / "p_lanes"
    for p in old + new + keep + [older]:
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
    assert not older.parent.exists()
    assert all(p.exists() for p in new + keep)


def test_server_start_removes_raw_traces_no_stored_trace_owns(store: FrameStore) -> None:
    """A load killed between keeping the raw file and its commit leaves the file; the
    next server start removes it (when old: another server may be loading it now) and
    keeps every stored trace's."""
    import os
    import time

    from gmpscope.wsgi import prepare
    from ingest.load.raw_copy import raw_path

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
    from ingest.derive.frame_layout import Kind
    from ingest.derive.frame_writer import FrameWriter

    (tmp_path / "frames").write_text("not a directory")
    w = FrameWriter(tmp_path, background=True)
    w.start_background()
    w.add("syscalls", {c: np.arange(3) for c in TABLE_COLUMNS["syscalls"]}, 3)
    assert w.finish(1, "ab" * 32, 0, 10, {0: Kind("goroutine", "Running", "Idle", "")}) is None
    assert isinstance(w.error, OSError)
    assert (tmp_path / "frames").read_text() == "not a directory"


def test_ids_and_flags_stored_narrow_times_int64(store: FrameStore) -> None:
    res = ingest_trace_file(store.engine, SAMPLE, data_dir=store.data_dir)
    frames = store.get(res.id)
    assert frames.intervals["start_ts"].dtype == np.int64
    assert frames.syscalls["stolen_ts"].dtype == np.int64
    assert frames.intervals["g"].dtype == np.int32, "goroutine ids of a sample fit 32 bits"
    assert frames.intervals["kind"].dtype == np.int16
    assert frames.syscalls["p_lost"].dtype == np.int8


def test_column_dtype_keeps_every_value() -> None:
    from ingest.derive.frame_writer import column_dtype

    assert column_dtype("g", -1, 2**31 - 1) == np.int32
    assert column_dtype("g", -1, 2**31) == np.int64, "a goroutine id past 32 bits"
    assert column_dtype("kind", 0, 40) == np.int16
    assert column_dtype("kind", 0, 40_000) == np.int32
    assert column_dtype("p_lost", 0, 1) == np.int8
    assert column_dtype("start_ts", 0, 5) == np.int64, "times are never narrowed"


def test_written_columns_round_trip(tmp_path: Path) -> None:
    from ingest.columns import Diff, Gather, Nullable, Seq
    from ingest.derive.frame_writer import write_column

    big = np.array([5, 2**40, -1, 7], dtype=np.int64)
    cases = {
        "plain": (np.array([3, -1, 2**31 - 1], dtype=np.int64), [3, -1, 2**31 - 1], np.int32),
        "gather": (Gather(big, np.array([0, 3, 2])), [5, 7, -1], np.int64),
        "nullable": (Nullable(np.array([4, 9]), np.array([False, True])), [4, -1], np.int32),
        "seq": (Seq(2**31 - 2), [2**31 - 2, 2**31 - 1, 2**31], np.int64),
        "list": ([1, None, 3], [1, -1, 3], np.int32),
        "diff": (Diff(np.array([9, 2**40 + 1]), Gather(big, np.array([0, 1]))), [4, 1], np.int32),
    }
    for name, (col, want, dtype) in cases.items():
        write_column(tmp_path, "t", "g", col, len(want))
        got = np.load(tmp_path / "t.g.npy")
        assert got.dtype == dtype, name
        assert got.tolist() == want, name


def test_older_layout_copy_removed_when_the_new_one_is_written(store: FrameStore) -> None:
    res = ingest_trace_file(store.engine, SAMPLE, data_dir=store.data_dir)
    (new,) = (store.data_dir / "frames").glob(f"{res.id}-*")
    old = new.with_name(new.name.rsplit("-v", 1)[0] + "-v2")
    new.rename(old)  # as an older gmpscope left it
    store.get(res.id)
    assert [p.name for p in (store.data_dir / "frames").glob(f"{res.id}-*")] == [new.name]


def test_a_duration_column_is_written_as_int64_differences(tmp_path: Path) -> None:
    from ingest.columns import Diff, Gather
    from ingest.derive.frame_writer import write_column

    end = np.array([15, 2**33], np.int64)
    start = Gather(np.array([2**33 - 1, 5], np.int64), np.array([1, 0]))
    write_column(tmp_path, "syscalls", "duration_ns", Diff(end, start), 2)
    got = np.load(tmp_path / "syscalls.duration_ns.npy")
    assert got.dtype == np.int64 and got.tolist() == [10, 1]


def test_a_second_writer_keeps_the_set_in_use(store: FrameStore) -> None:
    # Two writers of one trace's frames (the loader after its commit, a worker
    # asked for the trace meanwhile): the second must not replace the set the
    # first one's readers map and save derived values into.
    from ingest.derive.frame_writer import write_frames

    res = ingest_trace_file(store.engine, SAMPLE, data_dir=store.data_dir)
    (final,) = (store.data_dir / "frames").glob(f"{res.id}-*")
    in_use = store.get(res.id)
    marker = final / f"derived-v{DERIVED_VERSION}" / "saved-by-a-reader"
    marker.parent.mkdir(exist_ok=True)
    marker.write_text("x")
    facts, tables = build_arrays(store.engine, res.id)
    assert write_frames(store.data_dir, facts, tables) == final
    assert marker.read_text() == "x"
    assert sorted(p.name for p in (store.data_dir / "frames").iterdir()) == [final.name]
    assert len(in_use.intervals) == len(tables["intervals"])


def test_a_torn_set_is_replaced(store: FrameStore) -> None:
    from ingest.derive.frame_writer import write_frames
    from ingest.derive.frames import read_frames

    res = ingest_trace_file(store.engine, SAMPLE, data_dir=store.data_dir)
    (final,) = (store.data_dir / "frames").glob(f"{res.id}-*")
    next(final.glob("intervals.*.npy")).unlink()  # as a crash in the middle of removing it
    assert read_frames(final) is None
    facts, tables = build_arrays(store.engine, res.id)
    assert write_frames(store.data_dir, facts, tables) == final
    assert read_frames(final) is not None
    assert len(store.get(res.id).intervals) == len(tables["intervals"])


@pytest.mark.parametrize("span", [8, 64, 1 << 26])
def test_take_and_parts_of_mapped_tables_equal_whole_reads(store: FrameStore, span: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Gathers a few source bytes at a time (rows ascending, descending,
    scattered) and scans part by part give the whole columns' values, for a
    table's own columns and those read at its rows in the intervals."""
    from ingest.derive import frame_layout

    monkeypatch.setattr(frame_layout, "GATHER_SPAN", span)
    monkeypatch.setattr(frame_layout, "GATHER_ROWS", 5)
    res = ingest_trace_file(store.engine, SAMPLE, data_dir=store.data_dir)
    frames = store.get(res.id)
    rng = np.random.default_rng(3)
    for table in (frames.intervals, frames.syscalls, frames.proc_runs):
        names = [*table.columns, *table.via_row]
        if "end_ts" in table.via_row:
            names.append("duration_ns")
        n = len(table)
        assert n > 20
        for rows in (np.arange(0, n, 3), np.arange(n)[::-2], rng.integers(0, n, 50),
                     np.zeros(0, np.int64)):
            for name in names:
                np.testing.assert_array_equal(table.take(name, rows), np.asarray(table[name])[rows],
                                              err_msg=name)
        for size in (7, n):
            got = list(frame_layout.parts(table, tuple(names), size))
            assert [a for a, _ in got] == list(range(0, n, size))
            for name in names:
                np.testing.assert_array_equal(np.concatenate([c[name] for _, c in got]),
                                              table[name], err_msg=name)
        table.release()
