"""A raw Go 1.22+ trace is ingested straight from the C decoder's row groups
(no Parquet written and read back): the database it makes is the one the
Parquet path makes from `gmpscope decode`'s files, table for table, row for
row; and the compact transitions equal read_transitions' of those files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from collectors.gotrace import columnar
from collectors.gotrace.reader import read_header
from collectors.gotrace.todir import decode_file_to_dir
from ingest.load.pipeline import ingest_trace_file, load_parquet_dir
from ingest.load.transitions_builder import TransitionsBuilder
from ingest.store.db import make_engine
from tests.support.consistency import db_content
from tests.support.ingest_fixtures import ROOT, TRACES
from tests.support.transitions_oracle import read_transitions

V2 = [t for t in TRACES if read_header(t.read_bytes()[:64])[1] == "v2"]
SAMPLES = sorted((ROOT / "samples").glob("go1.27-*.trace"))
@pytest.mark.skipif(not columnar.available(), reason="the C decoder is not built")
@pytest.mark.parametrize("trace", V2 + SAMPLES[:3], ids=lambda p: p.name)
def test_in_memory_ingest_equals_the_parquet_path(trace: Path, tmp_path: Path) -> None:
    # Each database beside its data directory, named alike: interval_files
    # says where the intervals' files are relative to the database.
    direct = make_engine(f"sqlite:///{tmp_path / 'direct' / 'db.sqlite'}")
    ingest_trace_file(direct, trace, data_dir=tmp_path / "direct" / "data")
    d = tmp_path / "parquet"
    decode_file_to_dir(trace, d)
    via = make_engine(f"sqlite:///{tmp_path / 'via' / 'db.sqlite'}")
    load_parquet_dir(via, d, trace.name, sha256=_sha(trace), data_dir=tmp_path / "via" / "data")
    a, b = db_content(direct), db_content(via)
    assert a.keys() == b.keys()
    for table in a:
        assert a[table] == b[table], table
    direct.dispose()
    via.dispose()


@pytest.mark.skipif(not columnar.available(), reason="the C decoder is not built")
@pytest.mark.skipif(not columnar.available(), reason="the C decoder is not built")
@pytest.mark.parametrize("pure", [False, True], ids=["C copy", "numpy copy"])
@pytest.mark.parametrize("room", ["parts", "in place", "overflowing"])
@pytest.mark.parametrize("trace", V2[:4] + SAMPLES[:2], ids=lambda p: p.name)
def test_builder_equals_read_transitions(trace: Path, pure: bool, room: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Row groups kept as parts, written in place, or in place until the
    room runs out (then as parts): the same columns as the Parquet path."""
    if pure:
        monkeypatch.setenv("GMPSCOPE_PURE", "1")
    d = tmp_path / "parquet"
    meta = decode_file_to_dir(trace, d)
    want = read_transitions(d)
    n = int(meta["transitions"])
    b = TransitionsBuilder(capacity={"parts": 0, "in place": trace.stat().st_size // 2,
                                     "overflowing": n // 2 + 1}[room])
    assert (b._c is None) == pure
    columnar.decode_in_memory(trace.read_bytes(), b.add)
    if not pure:
        assert (b._cols is not None) == (room == "in place"), "the room as meant"
    got = b.finish(int(meta["transitions"]))
    assert got.reasons == want.reasons
    for name in ("ts", "res", "rid", "frm", "to", "reason", "m", "p", "g", "stack"):
        g, w = getattr(got, name), getattr(want, name)
        assert g.dtype == w.dtype, name
        np.testing.assert_array_equal(g, w, err_msg=name)


def _sha(path: Path) -> str:
    from ingest.load.pipeline import file_sha256

    return file_sha256(path)


def test_row_group_copy_keeps_wide_values_and_rejects_bad_indices() -> None:
    from ingest.load import _columnappend as c  # type: ignore[attr-defined]

    src = np.array([1, -1, 2**31 - 1, -(2**31)], np.int64)
    out32 = np.empty(4, np.int32)
    assert c.narrow_into(src, out32) and out32.tolist() == src.tolist()
    wide = np.array([5, 2**31], np.int64)
    assert not c.narrow_into(wide, np.empty(2, np.int32)), "2**31 does not fit int32"
    out64 = np.empty(2, np.int64)
    assert c.narrow_into(wide, out64) and out64.tolist() == [5, 2**31]
    lut = np.array([7, -3], np.int8)
    dst = np.empty(3, np.int8)
    c.codes_into(np.array([1, 0, 1], np.int32), lut, dst)
    assert dst.tolist() == [-3, 7, -3]
    with pytest.raises(ValueError, match="outside"):
        c.codes_into(np.array([2], np.int32), lut, np.empty(1, np.int8))
    with pytest.raises(ValueError):
        c.narrow_into(src, np.empty(3, np.int32))


@pytest.mark.parametrize("trace", V2[:2] + SAMPLES[:1], ids=lambda p: p.name)
def test_thread_spans_are_each_threads_first_last_least_and_greatest_time(
        trace: Path, tmp_path: Path) -> None:
    """columnappend.thread_spans over a real trace's transitions (its M and
    time columns in Go's order, a slice of them as a row group, and the rows
    reversed, so that a thread's first time is its greatest), against the
    same read row by row; int32 and int64 thread ids alike."""
    from ingest.load import _columnappend as c  # type: ignore[attr-defined]

    d = tmp_path / "parquet"
    decode_file_to_dir(trace, d)
    tr = read_transitions(d)
    n = len(tr.ts)
    for m, ts in ((tr.m, tr.ts), (tr.m[n // 3:n // 3 + 5000], tr.ts[n // 3:n // 3 + 5000]),
                  (tr.m[::-1], tr.ts[::-1]), (tr.m[:0], tr.ts[:0])):
        m, ts = np.ascontiguousarray(m), np.ascontiguousarray(ts)
        want: dict[int, list[int]] = {}
        for mm, t in zip(m.tolist(), ts.tolist(), strict=True):
            if mm >= 0:
                s = want.setdefault(mm, [t, t, t, t])
                s[1], s[2], s[3] = t, min(s[2], t), max(s[3], t)
        expect = (list(want), *([s[k] for s in want.values()] for k in range(4)))
        assert c.thread_spans(m, ts) == expect
        assert c.thread_spans(m.astype(np.int64), ts) == expect
    assert len(want) == 0 and len(expect[0]) == 0
    backwards = c.thread_spans(np.ascontiguousarray(tr.m[::-1]), np.ascontiguousarray(tr.ts[::-1]))
    assert len(backwards[0]) > 1 and backwards[1] == backwards[4] != backwards[3]


def test_builder_widens_a_column_whose_later_row_group_leaves_int32() -> None:
    import pyarrow as pa

    def group(g: list[int]) -> pa.Table:
        n = len(g)
        states = pa.array(["Running"] * n).dictionary_encode()
        return pa.table({
            "ts": pa.array(range(n), pa.int64()), "id": pa.array([1] * n, pa.int64()),
            "m": pa.array([0] * n, pa.int64()), "p": pa.array([0] * n, pa.int64()),
            "g": pa.array(g, pa.int64()), "stack_id": pa.array([0] * n, pa.int64()),
            "resource": pa.array(["goroutine"] * n).dictionary_encode(),
            "from_state": states, "to_state": states,
            "reason": pa.array([""] * n).dictionary_encode()})

    for pure, capacity in ((False, 0), (True, 0), (False, 3), (False, 2)):
        b = TransitionsBuilder(capacity)
        if pure:
            b._c = None
            b._cols = None
        b.add(group([1, 2]))
        b.add(group([2**40]))
        tr = b.finish(3)
        assert tr.g.dtype == np.int64 and tr.g.tolist() == [1, 2, 2**40], (pure, capacity)
        assert tr.rid.dtype == np.int32 and tr.rid.tolist() == [1, 1, 1]
        assert tr.ts.tolist() == [0, 1, 0] and tr.to.tolist() == [tr.to[0]] * 3


def test_builder_without_the_room_it_asked_for_keeps_parts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """np.empty refusing the columns' room (strict overcommit, a huge trace)
    is not an error: the row groups go as parts."""
    real_empty = np.empty

    def refuse(n: int, *a: object, **k: object) -> np.ndarray:
        if n >= 10**6:
            raise MemoryError("no room")
        return real_empty(n, *a, **k)

    monkeypatch.setattr(np, "empty", refuse)
    b = TransitionsBuilder(capacity=10**6)
    assert b._cols is None
