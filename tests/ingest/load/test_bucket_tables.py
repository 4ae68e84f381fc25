"""Deriving a trace's tables bucket by bucket (ingest.load.bucket_tables) and
its events' tables part by part (ingest.load.eventrows) gives the rows of
deriving them whole: each real trace ingested with its transitions cut into
many small buckets of goroutine ids, spilled to a file as they are decoded,
and its metrics, logs and regions in parts of 3 rows, makes the same
database and the same frames (the caches made of those parts too) as one
bucket and one part in memory;
on SQLite and PostgreSQL, from a raw trace and from a decoded directory. The
small parts are loaded waiting for the insert worker after each table (as a
big trace is), the whole trace running ahead of it."""

from __future__ import annotations

import contextlib
import filecmp
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from collectors.gotrace import columnar
from collectors.gotrace.reader import read_header
from collectors.gotrace.todir import decode_file_to_dir
from ingest.load import bucket_tables, event_split, eventrows, insert_tables, transition_spill
from ingest.load.pipeline import file_sha256, ingest_trace_file, load_parquet_dir
from ingest.store.db import make_engine
from tests.support.consistency import STORED_HOW, db_content
from tests.support.ingest_fixtures import ROOT, TRACES, backends, make_db_url

V2 = [t for t in TRACES if read_header(t.read_bytes()[:64])[1] == "v2"]
SAMPLES = [ROOT / "samples" / n for n in ("go1.27-httpnet-2MB.trace", "go1.27-mutex.trace")]
# The interval files' directory names where a trace was stored, not what.
_HOW = {**STORED_HOW, "interval_files": frozenset({"directory"})}


def _small_buckets(monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`spilled_in_parts` in buckets of 300 rows, the procs' steals
    looked for 7 rows at a time, the load not running ahead."""
    monkeypatch.setattr(insert_tables, "AHEAD_MAX_TRANSITIONS", -1)
    monkeypatch.setattr(bucket_tables, "STEAL_SLICE", 7)
    spilled_in_parts(monkeypatch, 300)


def spilled_in_parts(monkeypatch: pytest.MonkeyPatch, bucket_rows: int) -> None:
    """Buckets of ``bucket_rows`` rows, runs of 2000 rows, every trace
    spilled, the events' tables made in parts of 3 rows (their event columns
    read back about 5 events at a time)."""
    monkeypatch.setattr(eventrows, "PART_ROWS", 3)
    monkeypatch.setattr(event_split, "GATHER_ROWS", 5)
    monkeypatch.setattr(transition_spill, "BUCKET_ROWS", bucket_rows)
    monkeypatch.setattr(transition_spill, "FLUSH_ROWS", 2000)
    monkeypatch.setattr(transition_spill, "SPILL_MIN_BYTES", 0)
    monkeypatch.setattr(transition_spill, "SPILL_MIN_ROWS", 0)


def _frames(data: Path) -> dict[str, Path]:
    return {p.relative_to(next((data / "frames").glob("1-*"))).as_posix(): p
            for p in (data / "frames").glob("1-*/**/*") if p.is_file()}


def _assert_same_store(a: Engine, a_data: Path, b: Engine, b_data: Path) -> None:
    ca, cb = db_content(a, _HOW), db_content(b, _HOW)
    assert ca.keys() == cb.keys()
    for table in ca:
        assert ca[table] == cb[table], table
    fa, fb = _frames(a_data), _frames(b_data)
    assert fa.keys() == fb.keys() and fa
    for name, path in fa.items():
        assert filecmp.cmp(path, fb[name], shallow=False), name


def _count_buckets(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    seen: list[int] = []
    real = transition_spill.TransitionSpill.buckets

    def buckets(self: transition_spill.TransitionSpill, bucket_rows: int | None = None,
                extra: transition_spill.Bucket | None = None) -> object:
        for b in real(self, bucket_rows, extra):
            seen.append(len(b.tr))
            yield b

    monkeypatch.setattr(transition_spill.TransitionSpill, "buckets", buckets)
    return seen


@pytest.mark.skipif(not columnar.available(), reason="the C decoder is not built")
@pytest.mark.parametrize("trace", V2 + SAMPLES, ids=lambda p: p.name)
def test_many_spilled_buckets_store_what_one_does(trace: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    one = make_engine(f"sqlite:///{tmp_path / 'one' / 'db.sqlite'}")
    ingest_trace_file(one, trace, data_dir=tmp_path / "one" / "data")
    _small_buckets(monkeypatch)
    sizes = _count_buckets(monkeypatch)
    many = make_engine(f"sqlite:///{tmp_path / 'many' / 'db.sqlite'}")
    ingest_trace_file(many, trace, data_dir=tmp_path / "many" / "data")
    # One goroutine's rows are never split: the allocfree traces' main
    # goroutine makes nearly all of theirs.
    assert len(sizes) > 1 or "allocfree" in trace.name, sizes
    assert not list((tmp_path / "many" / "data" / "tmp").glob("*/transitions-*"))
    _assert_same_store(one, tmp_path / "one" / "data", many, tmp_path / "many" / "data")
    one.dispose()
    many.dispose()


@pytest.mark.skipif(not columnar.available(), reason="the C decoder is not built")
def test_buckets_not_read_ahead_store_what_one_does(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace with more transitions than READ_AHEAD_MAX_ROWS: each bucket
    read when its turn comes (the path above reads the next one meanwhile)."""
    monkeypatch.setattr(bucket_tables, "READ_AHEAD_MAX_ROWS", -1)
    test_many_spilled_buckets_store_what_one_does(SAMPLES[0], tmp_path, monkeypatch)


@pytest.mark.skipif(not columnar.available(), reason="the C decoder is not built")
def test_a_decoded_directory_spilled_stores_what_the_raw_trace_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = SAMPLES[0]
    raw = make_engine(f"sqlite:///{tmp_path / 'raw' / 'db.sqlite'}")
    ingest_trace_file(raw, trace, data_dir=tmp_path / "raw" / "data")
    d = tmp_path / "parquet"
    decode_file_to_dir(trace, d)
    _small_buckets(monkeypatch)
    sizes = _count_buckets(monkeypatch)
    via = make_engine(f"sqlite:///{tmp_path / 'via' / 'db.sqlite'}")
    load_parquet_dir(via, d, trace.name, sha256=file_sha256(trace),
                     data_dir=tmp_path / "via" / "data")
    assert len(sizes) > 10
    _assert_same_store(raw, tmp_path / "raw" / "data", via, tmp_path / "via" / "data")
    raw.dispose()
    via.dispose()


@pytest.mark.skipif(not columnar.available(), reason="the C decoder is not built")
@pytest.mark.parametrize("backend", backends())
def test_many_buckets_on_each_backend(backend: str, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL every interval is a row: the parts' ids run on."""
    trace = SAMPLES[0]
    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(contextlib.contextmanager(make_db_url)(backend, d))
                for d in (tmp_path / "one", tmp_path / "many")]
        for d in ("one", "many"):
            (tmp_path / d).mkdir()
        one, many = make_engine(urls[0]), make_engine(urls[1])
        ingest_trace_file(one, trace, data_dir=tmp_path / "one" / "data")
        _small_buckets(monkeypatch)
        sizes = _count_buckets(monkeypatch)
        ingest_trace_file(many, trace, data_dir=tmp_path / "many" / "data")
        assert len(sizes) > 10
        _assert_same_store(one, tmp_path / "one" / "data", many, tmp_path / "many" / "data")
        one.dispose()
        many.dispose()


@pytest.mark.skipif(not columnar.available(), reason="the C decoder is not built")
def test_damaged_traces_on_the_spilled_path(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut and bit-flipped copies of the 2 MB sample, spilled in small buckets:
    the ends the reliability tests allow (a trace, complete or with its loss
    reported, or BadTraceError with nothing stored), checked the same way."""
    from tests.ingest.load.test_reliability_ingest import ingest_one
    from tests.support.batches import batch_starts
    from tests.support.consistency import database_problems, integrity_ok

    _small_buckets(monkeypatch)
    data = SAMPLES[0].read_bytes()
    store = (make_engine(f"sqlite:///{tmp_path / 'data' / 'gmpscope.db'}"),
             tmp_path / "data", tmp_path / "scratch")
    starts = [pos for pos, _ in batch_starts(data)]
    ends = [ingest_one(store, data[:cut], f"cut at {cut}")
            for cut in (starts[3] + 1, len(data) // 2, len(data) - 7)]
    for pos in (len(data) // 3, len(data) // 2 + 11):
        blob = bytearray(data)
        blob[pos] ^= 0x10
        ends.append(ingest_one(store, bytes(blob), f"bit 4 of byte {pos}"))
    assert "damaged" in ends, ends
    integrity_ok(store[0])
    assert database_problems(store[0], store[1]) == []
    store[0].dispose()


@pytest.mark.skipif(not columnar.available(), reason="the C decoder is not built")
def test_a_load_failing_mid_buckets_stores_nothing(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure after some buckets' intervals were written (to the frames and
    the transaction) leaves no row, no frames and no interval files; the same
    trace then loads."""
    from ingest.load import bucket_tables

    _small_buckets(monkeypatch)
    engine = make_engine(f"sqlite:///{tmp_path / 'data' / 'gmpscope.db'}")
    real = bucket_tables.BucketTables._syscall_part
    calls = [0]

    def failing(self: bucket_tables.BucketTables, *a: object) -> object:
        calls[0] += 1
        if calls[0] == 5:
            raise OSError("a disk that failed mid-load")
        return real(self, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(bucket_tables.BucketTables, "_syscall_part", failing)
    with pytest.raises(OSError, match="mid-load"):
        ingest_trace_file(engine, SAMPLES[0], data_dir=tmp_path / "data")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM traces")).scalar() == 0
        assert conn.execute(text("SELECT count(*) FROM intervals")).scalar() == 0
    data = tmp_path / "data"
    for kept in ("frames", "intervals"):  # staged frames and interval files gone
        left = list((data / kept).glob("*")) if (data / kept).exists() else []
        assert left == [], kept
    monkeypatch.setattr(bucket_tables.BucketTables, "_syscall_part", real)
    got = ingest_trace_file(engine, SAMPLES[0], data_dir=tmp_path / "data")
    assert got.created
    engine.dispose()
