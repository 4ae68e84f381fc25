"""Cut and bit-flipped real traces through the whole ingest path, into SQLite.

Each damaged file goes through ``ingest.load.pipeline.ingest_trace_file`` into one real
database. The only allowed ends: a complete trace, a trace stored with its loss
reported (status "damaged", bytes_lost > 0), or BadTraceError with every table's
row count as before and no file left behind. Never another exception, never a
half-stored trace (tests/support/consistency.py says what whole means).

CI runs a seeded sample of cuts (around batch boundaries and at kilobytes) and
flips of every real trace. ``GMPSCOPE_RELIABILITY_FULL=1`` runs the full sweep
(docs/reliability.md): every kilobyte, around every batch boundary, 64 flips a
trace, with a summary of the outcomes printed per trace (``pytest -s``).
"""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from ingest.load.delete import delete_trace
from ingest.load.pipeline import BadTraceError, ingest_trace_file
from ingest.store import models
from ingest.store.db import make_engine
from tests.support.batches import HEADER, batch_starts
from tests.support.consistency import database_problems, integrity_ok, row_counts, trace_problems

REPO = Path(__file__).resolve().parents[3]
#: Real traces small enough to ingest hundreds of times (the 2 MB sample: CI cuts it twice).
TRACES = sorted((REPO / "tests" / "data" / "traces").glob("*.trace")) + sorted(
    p for p in (REPO / "samples").glob("*.trace") if p.stat().st_size < 1_000_000)
BIG = REPO / "samples" / "go1.27-httpnet-2MB.trace"
FULL = os.environ.get("GMPSCOPE_RELIABILITY_FULL", "") not in ("", "0")
#: CI sample sizes per trace (the full sweep takes every kilobyte and every boundary).
CI_BOUNDARIES, CI_KB_CUTS, CI_FLIPS = 3, 3, 3
FULL_FLIPS = 64


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, Path, Path]]:
    """(engine, data dir, scratch dir for the damaged files): one database for all cases."""
    base = tmp_path_factory.mktemp("rel-ingest")
    data = base / "data"
    engine = make_engine(f"sqlite:///{data / 'gmpscope.db'}")
    yield engine, data, base / "scratch"
    engine.dispose()


def cuts(data: bytes, rng: random.Random) -> list[int]:
    """Where to cut: around batch boundaries (one before, at, one after) and at kilobytes."""
    starts = [pos for pos, _gen in batch_starts(data)] + [len(data)]
    kb = list(range(1024, len(data), 1024))
    if not FULL:
        starts = rng.sample(starts, min(CI_BOUNDARIES, len(starts)))
        kb = rng.sample(kb, min(CI_KB_CUTS, len(kb)))
    around = {p + d for p in starts for d in (-1, 0, 1)}
    return sorted(c for c in around | set(kb) if HEADER <= c <= len(data))


def flips(data: bytes, rng: random.Random) -> list[tuple[int, int]]:
    """(byte offset, bit) pairs, seeded: past the header (a bad header is one clear error)."""
    n = FULL_FLIPS if FULL else CI_FLIPS
    return [(rng.randrange(HEADER, len(data)), rng.randrange(8)) for _ in range(n)]


def ingest_one(store: tuple[Engine, Path, Path], blob: bytes, label: str) -> str:
    """Ingest ``blob``; check the allowed ends; leave the database as it was."""
    engine, data, scratch = store
    scratch.mkdir(parents=True, exist_ok=True)
    path = scratch / "damaged.trace"
    path.write_bytes(blob)
    before = row_counts(engine)
    raws_before = set((data / "traces").glob("*")) if (data / "traces").is_dir() else set()
    try:
        result = ingest_trace_file(engine, path, label, data_dir=data)
    except BadTraceError as e:
        assert "not a readable Go trace" in str(e), (label, str(e))
        assert row_counts(engine) == before, f"{label}: refused but the database changed"
        raws = set((data / "traces").glob("*")) if (data / "traces").is_dir() else set()
        assert raws == raws_before, f"{label}: refused but a raw file was kept"
        assert not list((data / "tmp").glob("ingest-*")), f"{label}: work dir left behind"
        return "error"
    except Exception as e:  # the contract: nothing else may escape
        pytest.fail(f"{label}: {type(e).__name__}: {e}")
    assert result.created, f"{label}: matched an existing trace"
    problems = trace_problems(engine, result.id, data)
    assert not problems, (label, problems)
    with engine.connect() as conn:
        tr = conn.execute(select(models.traces).where(models.traces.c.id == result.id)).one()
    outcome = str(tr.status)
    if outcome == "damaged":
        assert tr.bytes_lost > 0 and tr.loss_error, (label, tr.bytes_lost, tr.loss_error)
    assert delete_trace(engine, result.id, data)
    assert row_counts(engine) == before, f"{label}: delete left rows"
    return outcome


def run_trace(store: tuple[Engine, Path, Path], trace: Path) -> Counter[str]:
    data = trace.read_bytes()
    rng = random.Random(f"reliability:{trace.name}")
    seen: Counter[str] = Counter()
    for cut in cuts(data, rng):
        seen["cut " + ingest_one(store, data[:cut], f"{trace.name}[:{cut}]")] += 1
    for pos, bit in flips(data, rng):
        blob = bytearray(data)
        blob[pos] ^= 1 << bit
        seen["flip " + ingest_one(store, bytes(blob), f"{trace.name} bit {bit} of byte {pos}")] += 1
    if FULL:
        print(f"\n{trace.name}: {dict(sorted(seen.items()))}")
    return seen


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.name)
def test_damaged_trace_ingest(store: tuple[Engine, Path, Path], trace: Path) -> None:
    seen = run_trace(store, trace)
    assert sum(seen.values()) > 0
    integrity_ok(store[0])
    assert database_problems(store[0], store[1]) == []


def test_damaged_big_trace(store: tuple[Engine, Path, Path]) -> None:
    """The 2 MB sample (68 batches): CI cuts it in two places, one of them
    inside its first generation (refused) and one after several (damaged)."""
    data = BIG.read_bytes()
    if FULL:
        seen = run_trace(store, BIG)
    else:
        starts = [pos for pos, _ in batch_starts(data)]
        seen = Counter(ingest_one(store, data[:c], f"{BIG.name}[:{c}]")
                       for c in (starts[3] + 1, len(data) // 2))
        assert seen["damaged"] >= 1
    assert sum(seen.values()) > 0


def test_outcomes_cover_every_end(store: tuple[Engine, Path, Path]) -> None:
    """The sample reaches all three ends, so none of the checks above is vacuous."""
    data = (REPO / "tests" / "data" / "traces" / "go1.23-workers.trace").read_bytes()
    starts = [pos for pos, _ in batch_starts(data)]
    ends = {ingest_one(store, data, "whole"),
            ingest_one(store, data[:starts[-1]], "last batch cut"),
            ingest_one(store, data[:starts[0] + 7], "first batch cut")}
    assert ends == {"complete", "damaged", "error"}
