"""Fuzzing the trace decoder: mutated real traces through both decoders.

Every input must end in one of three ways: a complete decode, a partial decode
whose loss is reported, or a TraceFormatError. Anything else (another
exception, a hang, memory far beyond the input) is a finding; its input is
saved under ``tests/data/fuzz/`` as a permanent regression input that
``tests/collectors/test_fuzz_decoder.py`` replays on every run.

The Go 1.22+ inputs go through both the C decoder and the pure-Python one,
which must agree (the same error, or the same loss and event count); older
formats through the pure-Python one.

Long run (documented in docs/reliability.md)::

    .venv/bin/python -m tools.fuzz_decoder --seconds 3600 [--seed N]

prints the number of inputs, outcomes, the slowest input and the peak memory.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import resource
import sys
import time
import tracemalloc
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEEDS = sorted([*(REPO / "tests" / "data" / "traces").glob("*.trace"),
                *(p for p in (REPO / "samples").glob("*.trace") if p.stat().st_size < 300_000)])
CORPUS = REPO / "tests" / "data" / "fuzz"
HEADER = 16
#: An input taking longer than this to decode is a hang (the issue's bound).
HANG_S = 1.0
#: Python-side allocation allowed per input byte (the decoded events of a
#: trace take a few times its size; far beyond that is a size bomb).
ALLOC_PER_BYTE = 64
ALLOC_SLACK = 32 << 20


@dataclass(frozen=True)
class Outcome:
    """How one decode ended: ``complete``, ``partial`` or ``error``."""

    kind: str
    events: int = 0
    detail: str = ""


class Finding(Exception):
    """A decode that broke the contract."""


def decode_pure(data: bytes) -> Outcome:
    from collectors.gotrace.errors import TraceFormatError
    from collectors.gotrace.reader import open_trace

    try:
        tr = open_trace(data)
        n = sum(1 for _ in tr.events())
    except TraceFormatError as e:
        return Outcome("error", 0, f"{e.offset}:{e.reason}")
    loss = tr.info.loss
    if loss.error:
        return Outcome("partial", n, f"{loss.offset}:{loss.bytes_lost}:{loss.generations_lost}")
    return Outcome("complete", n)


def decode_fast(data: bytes) -> Outcome | None:
    """The C decoder's outcome (None when it does not apply or is not built)."""
    from collectors.gotrace import columnar
    from collectors.gotrace.errors import TraceFormatError
    from collectors.gotrace.reader import read_header

    try:
        _, family = read_header(data)
    except TraceFormatError:
        return None
    if family != "v2" or not columnar.available():
        return None
    try:
        # The C decoder itself, without building Arrow tables from its chunks
        # (ChunkDecoder's work, which adds nothing to what is checked here).
        fast = getattr(columnar, "_v2fast")  # noqa: B009 - not re-exported
        dec = fast.Decoder(data, int(read_header(data)[0].split(".")[1]))
        n = 0
        while (got := dec.next_chunk(1 << 20)) is not None:
            n += sum(rows for which, rows, _cols in got if which in (0, 1))
    except TraceFormatError as e:
        return Outcome("error", 0, f"{e.offset}:{e.reason}")
    res = dec.result()
    fail = res["fail"]
    if fail is not None and res["completed"] == 0:
        return Outcome("error", 0, f"{fail[0]}:{fail[1]}")
    if fail is not None:
        lost = max(0, len(data) - res["lost_from"])
        return Outcome("partial", n, f"{fail[0]}:{lost}:{res['generations_lost']}")
    return Outcome("complete", n)


def check(data: bytes) -> tuple[Outcome, float]:
    """Decode ``data`` both ways; raise Finding when the contract is broken.

    Returns the outcome and the time the production path took (the C decoder
    for Go 1.22+ traces, the pure-Python one for older formats): that is the
    time the hang bound applies to. The pure decoder also runs under
    tracemalloc, for the allocation bound, which slows it down several times.
    """
    try:
        started = time.perf_counter()
        fast = decode_fast(data)
        took = time.perf_counter() - started
    except Exception as e:  # noqa: BLE001 - any other exception is the finding
        raise Finding(f"C decoder raised {type(e).__name__}: {e}") from e
    if fast is None:
        try:
            started = time.perf_counter()
            decode_pure(data)
            took = time.perf_counter() - started
        except Exception as e:  # noqa: BLE001
            raise Finding(f"pure decoder raised {type(e).__name__}: {e}") from e
    tracemalloc.start()
    try:
        pure = decode_pure(data)
        _, peak = tracemalloc.get_traced_memory()
    except Exception as e:  # noqa: BLE001
        raise Finding(f"pure decoder raised {type(e).__name__}: {e}") from e
    finally:
        tracemalloc.stop()
    if peak > ALLOC_PER_BYTE * len(data) + ALLOC_SLACK:
        raise Finding(f"pure decoder allocated {peak} bytes for {len(data)} input bytes")
    if fast is not None and fast != pure:
        raise Finding(f"decoders disagree: C {fast} vs pure {pure}")
    if took > HANG_S * 20:
        # A hang guard far above the 1 s bound, so that a busy machine is not a
        # finding in CI; the long run reports every input past HANG_S itself.
        raise Finding(f"decode took {took:.1f} s")
    return pure, took


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One random damage: a cut, bit flips, byte runs, a splice or a huge varint."""
    b = bytearray(data)
    what = rng.randrange(6)
    if what == 0 and len(b) > HEADER + 1:
        return bytes(b[: rng.randrange(HEADER, len(b))])
    if what == 1:
        for _ in range(rng.randrange(1, 8)):
            i = rng.randrange(HEADER, len(b)) if len(b) > HEADER else 0
            if b:
                b[i] ^= 1 << rng.randrange(8)
        return bytes(b)
    if what == 2 and len(b) > HEADER:
        i = rng.randrange(HEADER, len(b))
        b[i:i + rng.randrange(1, 64)] = bytes([rng.choice((0, 0xFF, 0x80, 0x7F))]) \
            * rng.randrange(1, 64)
        return bytes(b)
    if what == 3 and len(b) > HEADER:
        # A maximal varint (huge length/count) dropped somewhere.
        i = rng.randrange(HEADER, len(b))
        return bytes(b[:i]) + b"\xff" * rng.randrange(5, 12) + b"\x7f" + bytes(b[i:])
    if what == 4 and len(b) > HEADER * 2:
        # Duplicate a slice (repeated batches, stacks, strings).
        i = rng.randrange(HEADER, len(b))
        j = min(len(b), i + rng.randrange(1, 4096))
        return bytes(b[:j]) + bytes(b[i:j]) + bytes(b[j:])
    if len(b) > HEADER:
        i = rng.randrange(HEADER, len(b))
        j = min(len(b), i + rng.randrange(1, 256))
        del b[i:j]
    return bytes(b)


def save_finding(data: bytes, why: str) -> Path:
    """Keep an input that broke the contract; its .txt says why (``finding: ...``)
    until the fix lands and the expected outcome replaces it."""
    return _save(data, f"finding: {why}")


def describe(o: Outcome) -> str:
    """The one-line record of an outcome kept next to a corpus input."""
    return f"{o.kind} {o.events} {o.detail}".strip()


def _save(data: bytes, text: str) -> Path:
    CORPUS.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(data).hexdigest()[:16]
    path = CORPUS / f"{name}.trace"
    path.write_bytes(data)
    (CORPUS / f"{name}.txt").write_text(text + "\n")
    return path


def keep_examples(per_kind: int, seed: int) -> None:
    """Add ``per_kind`` small mutated inputs of each outcome to the corpus, with
    the outcome they end in recorded (regression inputs for the replay test)."""
    rng = random.Random(seed)
    seeds = [p.read_bytes() for p in SEEDS if p.stat().st_size < 70_000]
    kept: Counter[str] = Counter()
    while min((kept[k] for k in ("complete", "partial", "error")), default=0) < per_kind:
        data = rng.choice(seeds)
        for _ in range(rng.randrange(1, 3)):
            data = mutate(data, rng)
        outcome, _ = check(data)
        if kept[outcome.kind] < per_kind:
            kept[outcome.kind] += 1
            _save(data, describe(outcome))


def run(seconds: float, seed: int) -> int:
    rng = random.Random(seed)
    seeds = [p.read_bytes() for p in SEEDS]
    outcomes: Counter[str] = Counter()
    findings = 0
    slowest = (0.0, "")
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        data = rng.choice(seeds)
        for _ in range(rng.randrange(1, 4)):
            data = mutate(data, rng)
        try:
            outcome, took = check(data)
            outcomes[outcome.kind] += 1
        except Finding as e:
            findings += 1
            path = save_finding(data, str(e))
            print(f"FINDING {path.name}: {e}", flush=True)
            continue
        if took > slowest[0]:
            slowest = (took, hashlib.sha256(data).hexdigest()[:16])
        if took > HANG_S:
            path = save_finding(data, f"slow: {took:.2f} s")
            print(f"SLOW {path.name}: {took:.2f} s", flush=True)
        n += 1
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"inputs {n}, outcomes {dict(outcomes)}, findings {findings}, "
          f"slowest {slowest[0] * 1000:.0f} ms ({slowest[1]}), peak RSS {peak_mb:.0f} MB, "
          f"seeds {len(seeds)}, seed {seed}")
    return 1 if findings else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--keep", type=int, metavar="N",
                   help="instead: add N inputs of each outcome to the regression corpus")
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))
    if args.keep:
        keep_examples(args.keep, args.seed)
        return 0
    return run(args.seconds, args.seed)


if __name__ == "__main__":
    sys.exit(main())
