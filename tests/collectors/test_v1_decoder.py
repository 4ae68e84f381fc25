"""The old-family decoder (on-disk 1.11, 1.19, 1.21) against Go 1.27.

Oracle: ``go tool trace -d=parsed`` of the go1.27.3 toolchain, which reads old
traces by parsing them whole and converting them to the new event model.

Inputs:
- Go's own golden old traces (``internal/trace/internal/tracev1/testdata``,
  read from the installed toolchain at test time);
- two real traces recorded for this test with Go 1.19 and Go 1.21
  (tests/data/traces/go1.19-mixed.trace, go1.21-mixed.trace: goroutines,
  channels, select, sync.Mutex/Cond, loopback TCP, a blocking pipe read,
  file syscalls, timers, tasks/regions/logs, GC, CPU profile samples);
- truncated, bit-flipped and garbage inputs: ours must fail exactly when Go
  fails (with TraceFormatError only) and otherwise match Go's events.

Go's own output is not deterministic where events of different Ps carry
the same timestamp (old tracers divide the tick counter by 64, so this is
common): its merge starts from a map's random iteration order, and the
goroutines reported at the end of the initial phase come out in map order.
Tied events end up 1 ns apart after Go forces strictly increasing
timestamps, so the comparison allows a different order only inside runs
of events exactly 1 ns apart, and still requires the same multiset of
events there and the same timestamp sequence overall.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from collectors.gotrace.errors import TraceFormatError
from collectors.gotrace.reader import open_trace
from tests.support.asserts import assert_same_events
from tests.support.goparsed import GoEvent, decode_ours, go_parsed, oracle_go

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"


def golden_dir() -> Path:
    goroot = Path(oracle_go()).resolve().parent.parent
    return goroot / "src" / "internal" / "trace" / "internal" / "tracev1" / "testdata"


GOLDEN = sorted(p.name for p in golden_dir().glob("*_good")) if golden_dir().is_dir() else []
OWN = sorted(p.name for p in DATA.glob("go1.19-*.trace")) + sorted(
    p.name for p in DATA.glob("go1.21-*.trace")
)


def _strip_ts(e: GoEvent) -> str:
    return repr(dataclasses.replace(e, ts=0))


def assert_same_modulo_ties(ours: list[GoEvent], go: list[GoEvent]) -> None:
    """Equal, except that events may be reordered inside runs of events
    whose timestamps are exactly 1 ns apart (see the module docstring)."""
    if ours == go:
        return
    if len(ours) != len(go) or [e.ts for e in ours] != [e.ts for e in go]:
        assert_same_events(ours, go)  # raises with a readable diff
    n = len(go)
    i = 0
    while i < n:
        j = i + 1
        while j < n and go[j].ts == go[j - 1].ts + 1:
            j += 1
        if ours[i:j] != go[i:j]:
            a = sorted(map(_strip_ts, ours[i:j]))
            b = sorted(map(_strip_ts, go[i:j]))
            if a != b:
                assert_same_events(ours[i:j], go[i:j], what=f"events [{i}:{j}] (a 1 ns run)")
        i = j


def _check_against_go(path: Path, data: bytes | None = None) -> str:
    """Decode ``path`` (or ``data`` written there) with both; return how it went."""
    raw = path.read_bytes() if data is None else data
    go, err = go_parsed(path)
    try:
        ours, tr = decode_ours(raw)
    except TraceFormatError as e:
        assert err is not None, f"only we fail: {e}"
        # Where Go fails after printing events (a panic on a missing string
        # or stack), it printed them; we fail at the same event or earlier.
        return "both fail"
    assert err is None, f"Go fails but we decode {len(ours)} events; Go says: {err}"
    assert_same_modulo_ties(ours, go)
    assert tr.info.family == "v1"
    assert tr.info.ticks_per_sec > 0
    assert tr.info.generations == 1
    return "same"


@pytest.mark.slow
@pytest.mark.parametrize("name", GOLDEN)
def test_go_golden_old_traces(name: str) -> None:
    assert _check_against_go(golden_dir() / name) == "same"


@pytest.mark.slow
@pytest.mark.parametrize("name", OWN)
def test_real_traces(name: str) -> None:
    path = DATA / name
    assert _check_against_go(path) == "same"
    ours, tr = decode_ours(path.read_bytes())
    kinds = {e.kind for e in ours}
    # The recordings exercise every kind the old format can produce.
    assert {
        "StackSample",
        "Label",
        "Log",
        "TaskBegin",
        "RegionBegin",
        "RangeBegin",
        "Metric",
    } <= kinds
    assert tr.info.go_version == name[2:6]


def test_own_traces_are_committed() -> None:
    assert "go1.19-mixed.trace" in OWN and "go1.21-mixed.trace" in OWN
    for name in OWN:
        assert (DATA / name).stat().st_size < 300_000


def test_exact_order_when_go_is_deterministic() -> None:
    """With at most 8 Ps Go's merge order is the Ps' first-seen order in the
    likeliest case; our recordings have 5 and match Go event for event."""
    path = DATA / "go1.21-mixed.trace"
    ours, _ = decode_ours(path.read_bytes())
    go, err = go_parsed(path)
    assert err is None
    assert_same_events(ours, go)


def _mutations(data: bytes, seed: int, count: int) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for k in range(count):
        b = bytearray(data)
        if k % 3 == 0:
            b = b[: rng.randrange(16, len(b))]
        elif k % 3 == 1:
            for _ in range(rng.randint(1, 3)):
                i = rng.randrange(16, len(b))
                b[i] ^= 1 << rng.randrange(8)
        else:
            b[rng.randrange(16, len(b))] = rng.randrange(256)
        out.append(bytes(b))
    return out


MUTATED = [
    ("user_task_region_1_11_good", 11, 12),
    ("user_task_region_1_19_good", 19, 12),
    ("stress_start_stop_1_21_good", 21, 16),
    ("http_1_19_good", 119, 8),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,seed,count", MUTATED)
def test_damaged_traces_fail_like_go(name: str, seed: int, count: int, tmp_path: Path) -> None:
    src = golden_dir() / name
    if not src.exists():
        pytest.skip("Go's golden traces are not installed")
    outcomes = []
    for k, data in enumerate(_mutations(src.read_bytes(), seed, count)):
        path = tmp_path / f"{name}.{k}"
        path.write_bytes(data)
        outcomes.append(_check_against_go(path, data))
    assert "both fail" in outcomes


@pytest.mark.slow
def test_truncated_own_trace_fails_like_go(tmp_path: Path) -> None:
    data = (DATA / "go1.19-mixed.trace").read_bytes()
    for cut in (16, 17, 100, len(data) // 2, len(data) - 1):
        path = tmp_path / f"cut{cut}"
        path.write_bytes(data[:cut])
        assert _check_against_go(path, data[:cut]) == "both fail"


def _decode(data: bytes) -> list[object]:
    return list(open_trace(data).events())


@pytest.mark.parametrize("version", ["1.11", "1.19", "1.21"])
def test_garbage_raises_only_trace_format_error(version: str) -> None:
    header = f"go {version} trace".encode().ljust(16, b"\x00")
    rng = random.Random(version)
    for _ in range(300):
        body = bytes(rng.randrange(256) for _b in range(rng.randrange(0, 64)))
        with pytest.raises(TraceFormatError):
            _decode(header + body)


def test_header_only_has_no_frequency() -> None:
    with pytest.raises(TraceFormatError, match="no EvFrequency event"):
        _decode(b"go 1.21 trace\x00\x00\x00")


def test_huge_lengths_are_refused_without_allocating() -> None:
    header = b"go 1.19 trace\x00\x00\x00"
    batch = bytes([0x41, 0x00, 0x00])  # EvBatch (2 args): P 0, ticks 0
    # A string claiming 2^62 bytes: the indexing pass finds it runs past the end.
    huge = bytes([0x25, 0x01]) + bytes([0x80] * 8 + [0x40])
    with pytest.raises(TraceFormatError, match="failed to read trace: EOF"):
        _decode(header + batch + huge)
    # A length-prefixed event block claiming more than Go's 2048-byte limit.
    block = bytes([0xC0 | 0x0D, 0x81, 0x10])
    with pytest.raises(TraceFormatError, match="too big"):
        _decode(header + batch + block)
    # An 11-byte varint.
    with pytest.raises(TraceFormatError, match="varint"):
        _decode(header + bytes([0x41]) + bytes([0xFF] * 11))


def test_event_before_any_batch() -> None:
    with pytest.raises(TraceFormatError, match="has no batches yet"):
        _decode(b"go 1.21 trace\x00\x00\x00" + bytes([0x06, 0x01]))


def test_decoding_is_lazy_and_single_pass() -> None:
    path = golden_dir() / "user_task_region_1_21_good"
    if not path.exists():
        pytest.skip("Go's golden traces are not installed")
    tr = open_trace(path.read_bytes())
    it = tr.events()
    first = next(it)
    assert first.kind == "Sync" and first.n == 1
    rest = list(it)
    assert rest[-1].kind == "Sync" and rest[-1].n == 2
    assert tr.info.ticks_per_sec > 0 and tr.info.generations == 1
    assert len(tr.stacks) > 0


# --------------------------------------------------------------------------
# Crafted traces: a tiny writer for the old wire format, and cases for the
# corners real recordings rarely reach. Expected: whatever Go does with them.


def _uv(v: int) -> bytes:
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | 0x80 if v else b)
        if not v:
            return bytes(out)


def _ev(typ: int, *args: int, text: bytes | None = None) -> bytes:
    """An event: up to 3 values inline, more (or a UserLog) length-prefixed."""
    if len(args) <= 3 and text is None:
        return bytes([typ | ((len(args) - 1) << 6)]) + b"".join(map(_uv, args))
    payload = b"".join(map(_uv, args))
    out = bytes([typ | (3 << 6)]) + _uv(len(payload)) + payload
    return out + (_uv(len(text)) + text if text is not None else b"")


def _batch(pid: int, ticks: int) -> bytes:
    return bytes([1 | (1 << 6)]) + _uv(pid) + _uv(ticks)


def _string(sid: int, s: bytes) -> bytes:
    return bytes([37]) + _uv(sid) + _uv(len(s)) + s


def _stack(sid: int, frames: list[tuple[int, int, int, int]]) -> bytes:
    return _ev(3, sid, len(frames), *(v for f in frames for v in f))


_LOG = _ev(48, 1, 1, 4, 2, text=b"hello")  # UserLog task 1, key string 4, stack 2


def _crafted(version: str = "1.21", p0: bytes = b"", tail: bytes = b"", freq: int = 10**9) -> bytes:
    """One goroutine that logs in a task, makes a syscall and ends."""
    return f"go {version} trace".encode().ljust(16, b"\x00") + b"".join(
        (
            _batch(0, 1000),
            _ev(5, 1, 7),  # ProcStart on thread 7
            _ev(13, 1, 5, 1, 2),  # GoCreate g5, its stack 1, creator stack 2
            _ev(4, 1, 4, 0),  # Gomaxprocs 4: ends the initial phase
            _ev(38, 1, 5),  # GoStartLocal g5
            _ev(45, 2, 1, 0, 3, 2),  # UserTaskCreate task 1, no parent, name 3
            _LOG,
            _ev(28, 1, 2),  # GoSysCall (does not block)
            _ev(46, 3, 1, 2),  # UserTaskEnd task 1
            p0,
            _ev(15, 1),  # GoEnd
            _ev(6, 1),  # ProcStop
            _batch(0, 5000),
            _string(1, b"main.f"),
            _string(2, b"/x/f.go"),
            _string(3, b"task-a"),
            _string(4, b"cat"),
            _stack(1, [(0x1000, 1, 2, 10)]),
            _stack(2, [(0x2000, 1, 2, 20), (0x2100, 1, 2, 21)]),
            bytes([2]) + _uv(freq),  # Frequency
            tail,
        )
    )


CRAFTED = {
    "base-1.21": _crafted(),
    "base-1.19": _crafted("1.19"),
    "base-1.11": _crafted("1.11"),
    "no-frequency": b"go 1.21 trace".ljust(16, b"\x00") + _batch(0, 1) + _ev(5, 1, 7),
    "zero-frequency": _crafted(freq=0),
    "duplicate-string": _crafted(tail=_batch(0, 6000) + _string(1, b"again")),
    # Log keys resolve in Go's converted id space: past the trace's own
    # strings come the inline log messages, then the converter's own strings.
    "log-key-is-inline-message": _crafted().replace(_LOG, _ev(48, 1, 1, 5, 2, text=b"hello")),
    "log-key-is-builtin": _crafted().replace(_LOG, _ev(48, 1, 1, 7, 2, text=b"hello")),
    "log-key-missing": _crafted().replace(_LOG, _ev(48, 1, 1, 99, 2, text=b"hello")),
    "start-label": _crafted(p0=_ev(17, 1, 2) + _ev(41, 1, 5, 2, 3)),  # GoSched, GoStartLabel
    "proc-on-p-minus-1": _crafted(tail=_batch((1 << 64) - 1, 5500) + _ev(5, 1, 9) + _ev(6, 1)),
    "stw-kinds-1.19": _crafted("1.19", p0=_ev(9, 1, 1) + _ev(10, 1)),
    "stw-kinds-1.21": _crafted("1.21", p0=_ev(9, 1, 7) + _ev(10, 1) + _ev(9, 1, 40) + _ev(10, 1)),
    "futile-wakeup": _crafted("1.11", p0=_ev(36, 1)),
    "timer-goroutine": _crafted("1.11", tail=bytes([35]) + _uv(5)),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_crafted_traces(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.trace"
    path.write_bytes(CRAFTED[name])
    _check_against_go(path)


def test_crafted_base_decodes() -> None:
    evs = _decode(CRAFTED["base-1.21"])
    assert len(evs) == 12
