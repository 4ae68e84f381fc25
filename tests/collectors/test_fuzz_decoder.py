"""Hostile trace files: cut, flipped, mutated and size-bombed real traces.

Every input must end as a complete decode, a partial decode with its loss
reported, or a TraceFormatError: never another exception, never a hang, never
an allocation far beyond the input (tools/fuzz_decoder.py states the bounds).
The C decoder and the pure-Python one must end the same way. The long fuzz run
is ``python -m tools.fuzz_decoder --seconds 3600`` (docs/reliability.md); its
findings land in tests/data/fuzz/ and are replayed here for ever.
"""

from __future__ import annotations

import os
import random
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors.gotrace import columnar
from collectors.gotrace.errors import TraceFormatError
from collectors.gotrace.reader import open_trace
from tools.fuzz_decoder import (
    CORPUS,
    Outcome,
    check,
    decode_fast,
    decode_pure,
    describe,
    mutate,
)

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "traces"
#: The smallest real traces, one per family: cheap enough to cut at every byte.
SMALL_V2 = [DATA / "go1.23-allocfree.trace", DATA / "go1.26-allocfree.trace"]
SMALL_V1 = DATA / "go1.19-mixed.trace"
HEADER = 16
EXAMPLES = int(os.environ.get("GMPSCOPE_FUZZ_EXAMPLES", "60"))

needs_c = pytest.mark.skipif(not columnar.available(), reason="C extension not built")


def assert_contract(o: Outcome, data: bytes) -> None:
    assert o.kind in ("complete", "partial", "error")
    if o.kind == "partial":
        offset, lost, gens = (int(x) for x in o.detail.split(":"))
        assert HEADER <= offset <= len(data) and 0 < lost <= len(data) and gens >= 1


def recorded(path: Path) -> str:
    return path.with_suffix(".txt").read_text().strip()


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.trace")), ids=lambda p: p.stem)
def test_regression_corpus(path: Path) -> None:
    """Inputs the fuzzer kept: each still ends exactly as recorded."""
    data = path.read_bytes()
    outcome, _took = check(data)
    assert_contract(outcome, data)
    if not recorded(path).startswith("finding:"):
        assert describe(outcome) == recorded(path)


def test_corpus_covers_every_outcome() -> None:
    kinds = {recorded(p).split()[0] for p in CORPUS.glob("*.trace")}
    assert {"complete", "partial", "error"} <= kinds


@needs_c
@pytest.mark.parametrize("path", SMALL_V2, ids=lambda p: p.stem)
def test_every_byte_cut(path: Path) -> None:
    """Cut at every byte (the C decoder, what ingest runs), and every 211th cut
    through the pure decoder too: the two agree. A one-generation trace has no
    partial decode: the cut generation is all there is."""
    data = path.read_bytes()
    kinds: set[str] = set()
    for cut in range(HEADER, len(data) + 1):
        blob = data[:cut]
        fast = decode_fast(blob)
        assert fast is not None
        assert_contract(fast, blob)
        kinds.add(fast.kind)
        if cut % 211 == 0 or cut == len(data):
            assert decode_pure(blob) == fast, cut
    assert fast.kind == "complete"
    assert "error" in kinds
    generations = open_trace(data)
    list(generations.events())
    if generations.info.generations > 1:
        assert "partial" in kinds


@needs_c
@pytest.mark.parametrize("path", SMALL_V2, ids=lambda p: p.stem)
def test_every_byte_flipped(path: Path) -> None:
    """One bit flipped in every 11th byte in turn (bit position rotating; the long
    fuzz run flips every byte)."""
    data = path.read_bytes()
    for i in range(HEADER, len(data), 11):
        blob = bytearray(data)
        blob[i] ^= 1 << (i % 8)
        fast = decode_fast(bytes(blob))
        assert fast is not None
        assert_contract(fast, bytes(blob))
        if i % 211 == 0:
            assert decode_pure(bytes(blob)) == fast, i


def test_old_format_cuts() -> None:
    """The old family has no partial decode: a cut trace is refused whole (as Go does)."""
    data = SMALL_V1.read_bytes()
    for cut in range(HEADER, len(data), 521):
        o = decode_pure(data[:cut])
        assert o.kind == "error", cut


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(which=st.sampled_from([*SMALL_V2, SMALL_V1]), seed=st.integers(0, 2**32 - 1),
       rounds=st.integers(1, 4))
def test_mutations(which: Path, seed: int, rounds: int) -> None:
    rng = random.Random(seed)
    data = which.read_bytes()
    for _ in range(rounds):
        data = mutate(data, rng)
    outcome, _took = check(data)
    assert_contract(outcome, data)


def _v2_header(version: str = "1.26") -> bytes:
    return f"go {version} trace\x00\x00\x00".encode()


def _uvarint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


@pytest.mark.parametrize("fields", [
    (1, 1, 1, 2**40),           # a batch claiming a terabyte
    (1, 1, 1, 2**63),           # and beyond any allocation
    (2**63, 2**63, 2**63, 8),   # huge generation, M and time
])
def test_batch_size_bombs(fields: tuple[int, int, int, int]) -> None:
    """Huge lengths are refused before anything is allocated for them."""
    body = bytes([1]) + b"".join(_uvarint(v) for v in fields) + b"\x00" * 64
    data = _v2_header() + body
    tracemalloc.start()
    try:
        with pytest.raises(TraceFormatError):
            list(open_trace(data).events())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20
    fast = decode_fast(data)
    assert fast is None or fast.kind == "error"


def test_overlong_varint_is_an_error() -> None:
    data = _v2_header() + bytes([1]) + b"\xff" * 11 + b"\x01" + b"\x00" * 32
    assert decode_pure(data).kind == "error"
    fast = decode_fast(data)
    assert fast is None or fast.kind == "error"
