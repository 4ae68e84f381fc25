"""The C decoder (collectors/gotrace/_v2fast, driven by columnar.py) against
the pure-Python decoder and against Go.

The fast path must write exactly what the pure path writes (parquet_out fed
by collectors/gotrace/v2): the same meta.json (counts, loss, generations,
wall clock) and the same Parquet tables, row groups included. For damaged
input both must fail the same way: the same TraceFormatError (offset and
reason) when nothing is readable, else the same loss (offset, reason, bytes
and generations lost) and the same events before it.

Inputs: the committed real traces (Go 1.22/1.23/1.25/1.27), truncated and
byte-flipped copies of them, garbage, Go's own golden tests (raw text ->
wire bytes by tests/support/rawtext.py) and the cached workload traces
(tests/support/workload_traces.py). On the committed traces the fast output
is also checked against ``go tool trace -d=parsed`` directly.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from collectors.gotrace import columnar
from collectors.gotrace.errors import TraceFormatError
from collectors.gotrace.model import ClockSnapshot, Event, Frame
from collectors.gotrace.parquet_out import write_parquet
from collectors.gotrace.reader import open_trace
from tests.support.asserts import assert_same_events
from tests.support.batches import batch_starts
from tests.support.goparsed import GoEvent, go_parsed, oracle_go, ours_as_go

pytestmark = pytest.mark.skipif(
    columnar._v2fast is None, reason="C extension not built (run make setup)"
)

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
TRACES = sorted(p.name for p in DATA.glob("go1.2[2-7]-*.trace"))
FILES = ("transitions", "events", "transition_stacks", "stacks")
HEADER = 16

Outcome = dict[str, Any] | tuple[str, int, str]


def _pure(data: bytes, out: Path) -> Outcome:
    try:
        tr = open_trace(data)
        return write_parquet(tr.events(), tr.stacks, lambda: tr.info, out)
    except TraceFormatError as e:
        return ("error", e.offset, e.reason)


def _fast(data: bytes, out: Path) -> Outcome:
    try:
        return columnar.write_parquet_fast(data, out)
    except TraceFormatError as e:
        return ("error", e.offset, e.reason)


def _row_groups(path: Path) -> list[int]:
    md = pq.ParquetFile(path).metadata
    return [md.row_group(i).num_rows for i in range(md.num_row_groups)]


def assert_same_output(data: bytes, tmp_path: Path, tag: str = "") -> Outcome:
    """Decode with both paths; assert identical meta.json and Parquet files.

    Both writers store bytes that are not UTF-8 (damaged names, binary log
    messages) as U+FFFD, as Python's ``decode("utf-8", "replace")`` does. Should
    the pure writer fail on such strings (it did before parquet_out learnt
    that), events and loss are compared instead of files.
    """
    a, b = tmp_path / f"pure{tag}", tmp_path / f"fast{tag}"
    fast = _fast(data, b)
    try:
        pure = _pure(data, a)
    except UnicodeEncodeError:
        assert_same_events_and_loss(data, fast, b)
        return fast
    assert fast == pure
    if isinstance(pure, dict):
        meta_a, meta_b = (json.loads((x / "meta.json").read_text()) for x in (a, b))
        assert meta_a == meta_b
        for name in FILES:
            ta, tb = pq.read_table(a / f"{name}.parquet"), pq.read_table(b / f"{name}.parquet")
            assert ta.schema.equals(tb.schema, check_metadata=True), name
            if not ta.equals(tb):
                for col in ta.column_names:
                    ca, cb = ta[col].to_pylist(), tb[col].to_pylist()
                    diff = (i for i, (x, y) in enumerate(zip(ca, cb, strict=False)) if x != y)
                    i = next(diff, None)
                    assert ca == cb, f"{name}.{col} differs first at row {i}"
            assert _row_groups(a / f"{name}.parquet") == _row_groups(b / f"{name}.parquet"), name
    return pure


def _replace_bad_utf8(s: str) -> str:
    return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _clean_stack(stk: tuple[Frame, ...]) -> tuple[Frame, ...]:
    return tuple(f._replace(func=_replace_bad_utf8(f.func), file=_replace_bad_utf8(f.file))
                 for f in stk)


def _clean(e: GoEvent) -> GoEvent:
    return replace(
        e, reason=_replace_bad_utf8(e.reason), name=_replace_bad_utf8(e.name),
        category=_replace_bad_utf8(e.category), message=_replace_bad_utf8(e.message),
        stack=_clean_stack(e.stack), tstack=_clean_stack(e.tstack),
    )


def assert_same_events_and_loss(data: bytes, fast: Outcome, out: Path) -> None:
    """The pure decoder's events (strings made valid UTF-8) and loss equal the
    fast path's Parquet output."""
    tr = open_trace(data)
    evs: list[Event] = []
    try:
        for e in tr.events():
            evs.append(e)
    except TraceFormatError as e:
        assert fast == ("error", e.offset, e.reason)
        return
    assert isinstance(fast, dict)
    assert fast["loss"] == asdict(tr.info.loss)
    assert fast["generations"] == tr.info.generations
    assert fast["events"] == len(evs)
    got, gtr = events_from_dir(out)
    want = [_clean(e) for e in ours_as_go(tr, evs)]
    assert_same_events(_norm_tstack(ours_as_go(gtr, got)), _norm_tstack(want))


# ---------------------------------------------------------------- reading the output back


class _Stacks:
    def __init__(self, frames: dict[int, tuple[Frame, ...]]) -> None:
        self._frames = frames

    def frames(self, sid: int) -> tuple[Frame, ...]:
        return self._frames[sid]


class _Trace:
    def __init__(self, frames: dict[int, tuple[Frame, ...]]) -> None:
        self.stacks = _Stacks(frames)


def events_from_dir(out: Path) -> tuple[list[Event], _Trace]:
    """Rebuild model events from a Parquet directory (transitions and other
    events interleaved by ``seq``); the transition stack is known only where
    it differs from the event stack."""
    frames: dict[int, list[Frame]] = {}
    for r in pq.read_table(out / "stacks.parquet").to_pylist():
        fr = Frame(r["pc"], r["function"], r["file"], r["line"])
        frames.setdefault(r["stack_id"], []).append(fr)
    rows = pq.read_table(out / "transition_stacks.parquet").to_pylist()
    tstacks = {r["row"]: r["stack_id"] for r in rows}
    trans = pq.read_table(out / "transitions.parquet").to_pylist()
    others = pq.read_table(out / "events.parquet").to_pylist()
    evs: list[Event] = []
    ti = oi = 0
    for seq in range(len(trans) + len(others)):
        if oi < len(others) and others[oi]["seq"] == seq:
            r = others[oi]
            oi += 1
            clock = None
            if r["clock_trace_ns"] is not None:
                clock = ClockSnapshot(r["clock_trace_ns"], r["clock_mono_ns"], r["clock_wall_ns"])
            evs.append(Event(
                r["kind"], r["ts"], r["m"], r["p"], r["g"], r["stack_id"], name=r["name"] or "",
                value=r["value"], scope=r["scope"] or "",
                scope_id=r["scope_id"] if r["scope_id"] is not None else -1,
                attrs=[(k, v) for k, v in json.loads(r["attrs"])] if r["attrs"] else [],
                task=r["task_id"] or 0, parent=r["parent_task_id"] or 0,
                category=r["category"] or "", message=r["message"] or "", n=r["sync_n"] or 0,
                clock=clock,
            ))
        else:
            r = trans[ti]
            evs.append(Event(
                "StateTransition", r["ts"], r["m"], r["p"], r["g"], r["stack_id"],
                resource=r["resource"], rid=r["id"], from_state=r["from_state"],
                to_state=r["to_state"], reason=r["reason"], tstack=tstacks.get(ti, 0),
            ))
            ti += 1
    return evs, _Trace({k: tuple(v) for k, v in frames.items()})


def _norm_tstack(evs: list[GoEvent]) -> list[GoEvent]:
    # The Parquet files keep a transition stack only where it differs from the stack.
    return [replace(e, tstack=()) if e.tstack == e.stack else e for e in evs]


# ---------------------------------------------------------------- committed traces


@pytest.mark.parametrize("name", TRACES)
def test_committed_trace_same_as_pure(name: str, tmp_path: Path) -> None:
    meta = assert_same_output((DATA / name).read_bytes(), tmp_path)
    assert isinstance(meta, dict) and meta["generations"] >= 1 and meta["loss"]["error"] == ""


@pytest.mark.parametrize("name", TRACES)
def test_committed_trace_matches_go(name: str, tmp_path: Path) -> None:
    path = DATA / name
    meta = columnar.write_parquet_fast(path.read_bytes(), tmp_path)
    evs, tr = events_from_dir(tmp_path)
    assert len(evs) == meta["events"]
    go, err = go_parsed(path)
    assert err is None
    assert_same_events(_norm_tstack(ours_as_go(tr, evs)), _norm_tstack(go))


def _cuts(data: bytes) -> list[int]:
    starts = sorted({off for off, gen in batch_starts(data) if gen})
    gen_starts: dict[int, int] = {}
    for off, gen in batch_starts(data):
        if gen:
            gen_starts.setdefault(gen, off)
    cuts = set()
    for s in sorted(gen_starts.values())[1:]:
        cuts.update((s, s + 1, s + 9, s + 300))
    cuts.update(starts[1::max(1, len(starts) // 6)])
    n = len(data)
    cuts.update(HEADER + 1 + (n - HEADER) * k // 9 for k in range(9))
    cuts.update((n - 1, HEADER + 3, HEADER + 200))
    return sorted(c for c in cuts if HEADER < c < n)


@pytest.mark.parametrize("name", TRACES)
def test_truncated_same_as_pure(name: str, tmp_path: Path) -> None:
    data = (DATA / name).read_bytes()
    kinds = set()
    for cut in _cuts(data):
        out = assert_same_output(data[:cut], tmp_path, f"-{cut}")
        kinds.add("error" if isinstance(out, tuple) else "loss" if out["loss"]["error"] else "ok")
    # Damage is exercised (a refused file, or a partial decode with a loss).
    assert kinds & {"error", "loss"}


@pytest.mark.parametrize("name", TRACES)
def test_corrupted_same_as_pure(name: str, tmp_path: Path) -> None:
    data = (DATA / name).read_bytes()
    rnd = random.Random(name)
    for i in range(24):
        blob = bytearray(data)
        for _ in range(1 + i % 3):
            pos = rnd.randrange(HEADER, len(blob))
            blob[pos] = rnd.randrange(256) if i % 2 else blob[pos] ^ (1 << rnd.randrange(8))
        assert_same_output(bytes(blob), tmp_path, f"-{i}")


@pytest.mark.parametrize("version", ["1.22", "1.23", "1.25", "1.26"])
def test_garbage_same_as_pure(version: str, tmp_path: Path) -> None:
    rnd = random.Random(version)
    head = f"go {version} trace".encode().ljust(HEADER, b"\x00")
    blobs = [b"", b"\x01", b"\x01\x01\x00\x00\x05", b"\x34" * 5, b"\x31"]
    blobs += [bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 400))) for _ in range(40)]
    # Plausible batch headers with random payloads reach deeper into the decoder.
    for _ in range(40):
        payload = bytes(rnd.randrange(60) for _ in range(rnd.randrange(1, 60)))
        blobs.append(bytes([1, 1, rnd.randrange(4), 5, len(payload)]) + payload)
    for i, blob in enumerate(blobs):
        assert_same_output(head + blob, tmp_path, f"-{i}")


def test_fresh_clock_and_counts(tmp_path: Path) -> None:
    meta = columnar.write_parquet_fast((DATA / "go1.26-workers.trace").read_bytes(), tmp_path)
    assert meta["wall_clock"] is not None and meta["ticks_per_sec"] == 15_625_000
    assert sum(meta["event_counts"].values()) == meta["events"]
    assert meta["event_counts"]["StateTransition"] == meta["transitions"]


# ---------------------------------------------------------------- Go's golden tests


def _golden() -> list[Path]:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))  # oracle_go() imports tools.gotoolchains
    env = os.environ.get("GMPSCOPE_GOLDEN_DIR")
    try:
        goroot = Path(oracle_go()).resolve().parent.parent
        root = Path(env) if env else goroot / "src" / "internal" / "trace" / "testdata" / "tests"
    except Exception:
        return []
    return sorted(root.glob("*.test")) if root.is_dir() else []


@pytest.mark.slow
@pytest.mark.parametrize("path", _golden(), ids=lambda p: p.name)
def test_golden_same_as_pure(path: Path, tmp_path: Path) -> None:
    from tests.support.rawtext import load_golden

    data = load_golden(path).data
    assert_same_output(data, tmp_path)
    # Every truncation of the small golden traces too.
    if len(data) < 2000:
        for cut in range(HEADER + 1, len(data)):
            assert_same_output(data[:cut], tmp_path, f"-{cut}")


# ---------------------------------------------------------------- workload traces


def _workload_params() -> list[Any]:
    try:
        from tests.support.workload_traces import TOOLCHAINS, WORKLOADS
    except Exception:
        return []
    return [(v, w) for v in TOOLCHAINS for w in WORKLOADS if not v.startswith(("1.19", "1.21"))]


@pytest.mark.slow
@pytest.mark.parametrize("version,workload", _workload_params())
def test_workload_trace(version: str, workload: str, tmp_path: Path) -> None:
    from tests.support.workload_traces import workload_trace

    data = workload_trace(version, workload).read_bytes()
    # The annotations workload logs invalid UTF-8 (stored as U+FFFD by both).
    out = assert_same_output(data, tmp_path)
    assert isinstance(out, dict) and out["loss"]["error"] == ""


# ---------------------------------------------------------------- the CLI


def test_cli_fast_and_pure_write_the_same(tmp_path: Path) -> None:
    trace = DATA / "go1.25-workers.trace"
    outs = {}
    for mode in ("0", "1"):
        out = tmp_path / f"out{mode}"
        env = {**os.environ, "GMPSCOPE_PURE": mode}
        subprocess.run([sys.executable, "-m", "gmpscope", "decode", str(trace), "-o", str(out),
                        "--json"], cwd=REPO, env=env, check=True, capture_output=True)
        outs[mode] = out
    assert (outs["0"] / "meta.json").read_text() == (outs["1"] / "meta.json").read_text()
    for name in FILES:
        assert pq.read_table(outs["0"] / f"{name}.parquet").equals(
            pq.read_table(outs["1"] / f"{name}.parquet"))


def test_cli_fast_path_refuses_unreadable(tmp_path: Path) -> None:
    blob = (DATA / "go1.26-workers.trace").read_bytes()[: HEADER + 200]
    src = tmp_path / "bad.trace"
    src.write_bytes(blob)
    r = subprocess.run([sys.executable, "-m", "gmpscope", "decode", str(src), "-o",
                        str(tmp_path / "out")], cwd=REPO, capture_output=True, text=True)
    assert r.returncode != 0 and "at byte" in r.stderr
    assert not (tmp_path / "out").exists()
