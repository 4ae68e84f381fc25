"""The decode started ahead (ingest.load.decode_ahead): same result as decoding in
line, errors raised where the result is taken, cancelled when not needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from collectors.gotrace.errors import TraceFormatError
from ingest.load.decode_ahead import DecodeAhead
from ingest.load.decoded import DecodeCancelled, decode_bytes, decode_file_in_memory
from ingest.load.event_split import TARGETS, Column, EventParts, Texts
from ingest.load.pipeline import BadTraceError, file_sha256, ingest_trace_file
from tests.support.spill import assert_same_spills

ROOT = Path(__file__).resolve().parents[3]
TRACE = ROOT / "samples" / "go1.27-httpnet-2MB.trace"
OLD = ROOT / "tests" / "data" / "traces" / "go1.21-mixed.trace"


def same_events(a: EventParts, b: EventParts) -> bool:
    """The same events in every target table, column by column."""
    for name in TARGETS:
        ta, tb = a.table(name), b.table(name)
        if ta.rows != tb.rows:
            return False
        for col, va in ta.cols.items():
            vb = tb.cols[col]
            if isinstance(va, Texts) and isinstance(vb, Texts):
                if va.objects().tolist() != vb.objects().tolist():
                    return False
            elif isinstance(va, Column) and isinstance(vb, Column):
                if not (np.array_equal(va.values, vb.values)
                        and np.array_equal(va.nulls(), vb.nulls())):
                    return False
            else:
                return False
    return np.array_equal(np.sort(a.thread_times()[1]), np.sort(b.thread_times()[1]))


def test_same_transitions_as_in_line() -> None:
    ahead = DecodeAhead(TRACE)
    assert ahead.sha256() == file_sha256(TRACE)
    got = ahead.result()
    want = decode_file_in_memory(TRACE)
    assert got is not None and want is not None
    meta, tr, events, _, _ = got.take()
    meta2, tr2, events2, _, _ = want.take()
    assert meta == meta2 and same_events(events, events2)
    assert_same_spills(tr, tr2)
    assert ahead.seconds > 0


def test_old_format_is_none_and_garbage_raises_at_result(tmp_path: Path) -> None:
    assert DecodeAhead(OLD).result() is None  # the Parquet path decodes it
    bad = tmp_path / "bad.trace"
    bad.write_bytes(b"go 1.22 trace\x00\x00\x00" + bytes(range(90, 154)))
    ahead = DecodeAhead(bad)
    assert ahead.sha256() == file_sha256(bad)
    with pytest.raises(TraceFormatError, match="at byte 16"):
        ahead.result()


def test_loader_maps_its_error_and_stores_nothing(tmp_path: Path) -> None:
    from ingest.store.db import make_engine

    bad = tmp_path / "README.md"
    bad.write_bytes((ROOT / "samples" / "README.md").read_bytes())
    engine = make_engine(f"sqlite:///{tmp_path / 'g.db'}")
    try:
        with pytest.raises(BadTraceError, match="not a readable Go trace"):
            ingest_trace_file(engine, bad, data_dir=tmp_path / "data", ahead=DecodeAhead(bad))
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM traces").scalar() == 0
    finally:
        engine.dispose()


def test_cancel_stops_between_row_groups() -> None:
    with pytest.raises(DecodeCancelled):
        decode_bytes(TRACE, [TRACE.read_bytes()], "x" * 64, cancelled=lambda: True)
    ahead = DecodeAhead(TRACE)
    ahead.cancel()
    assert ahead.result() is None  # nothing kept, nothing raised


def test_a_stored_trace_is_found_without_waiting_for_the_decode(tmp_path: Path) -> None:
    env = {**os.environ, "GMPSCOPE_DATA": str(tmp_path / "data")}

    def cli(*paths: Path) -> list[dict[str, object]]:
        r = subprocess.run([sys.executable, "-m", "gmpscope", "ingest", "--json",
                            *map(str, paths)], cwd=ROOT, capture_output=True, text=True,
                           env=env, timeout=600)
        assert r.returncode == 0, r.stderr
        return [json.loads(line) for line in r.stdout.splitlines()]

    first = cli(TRACE)[0]
    assert first["created"] and {"decode wait", "decode", "insert intervals"} <= set(
        first["timings"])  # type: ignore[arg-type]
    again, other = cli(TRACE, OLD)
    assert again["id"] == first["id"] and not again["created"] and again["timings"] == {}
    assert other["created"] and other["id"] != first["id"]


def test_the_decode_thread_imports_nothing_the_cli_imports_meanwhile() -> None:
    """The CLI imports SQLAlchemy and the rest while the decode runs, so the
    decoder's imports (done before, ingest.load.decoded.import_decoder) must not
    include SQLAlchemy, and a decode must import nothing more."""
    code = """
import hashlib, sys
from pathlib import Path
import ingest.load.decoded as d
d.import_decoder()
assert "sqlalchemy" not in sys.modules, "the decoder's imports pull in SQLAlchemy"
before = set(sys.modules)
data = Path(sys.argv[1]).read_bytes()
d.decode_bytes(Path(sys.argv[1]), [data], hashlib.sha256(data).hexdigest())
print(sorted(set(sys.modules) - before))
"""
    r = subprocess.run([sys.executable, "-c", code, str(TRACE)], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
