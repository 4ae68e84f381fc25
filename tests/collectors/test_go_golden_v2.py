"""Go's own golden tests for the new trace family, run against our decoder.

Each ``internal/trace/testdata/tests/*.test`` file of the installed Go 1.27
toolchain (read at test time, never copied) holds an expectation (SUCCESS,
or FAILURE with a regexp for the error) and a trace in Go's raw text form.
We convert the text to wire bytes (tests/support/rawtext.py) and check:

- the converter on its own, against Go: Go's parser meets the file's
  expectation on our bytes, and ``go tool trace -d=wire`` prints back the
  same events the text holds;
- our decoder: SUCCESS files decode to exactly the events
  ``go tool trace -d=parsed`` prints for the same bytes; FAILURE files make
  it raise TraceFormatError (or report a loss);
- damaged variants (every truncation point, single-byte corruptions of the
  small files): ours and Go print the same events and agree on failing.
"""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from collectors.gotrace.errors import TraceFormatError
from collectors.gotrace.model import Event
from tests.support.asserts import assert_same_events, first_difference, fmt_event
from tests.support.goparsed import GoEvent, go_env, go_parsed, oracle_go, ours_as_go, trace_tool
from tests.support.rawtext import GoldenTest, canonical_lines, go_regexp_search, load_golden

pytestmark = pytest.mark.slow


def golden_dir() -> Path:
    """The toolchain's golden test directory (``$GMPSCOPE_GOLDEN_DIR`` overrides)."""
    env = os.environ.get("GMPSCOPE_GOLDEN_DIR")
    if env:
        return Path(env)
    goroot = Path(oracle_go()).resolve().parent.parent
    return goroot / "src" / "internal" / "trace" / "testdata" / "tests"


GOLDEN = sorted(p.name for p in golden_dir().glob("*.test")) if golden_dir().is_dir() else []


def _load(name: str, tmp_path: Path) -> tuple[GoldenTest, Path]:
    t = load_golden(golden_dir() / name)
    path = tmp_path / (name + ".trace")
    path.write_bytes(t.data)
    return t, path


@pytest.mark.parametrize("name", GOLDEN)
def test_converter_meets_go_expectation(name: str, tmp_path: Path) -> None:
    t, path = _load(name, tmp_path)
    _, err = go_parsed(path)
    if t.success:
        assert err is None, f"Go rejects our conversion of a SUCCESS file: {err}"
    else:
        assert err is not None, "Go accepts our conversion of a FAILURE file"
        assert t.error_regexp is not None and go_regexp_search(t.error_regexp, err), (
            f"Go's error {err!r} does not match {t.error_regexp!r}"
        )


@pytest.mark.parametrize("name", GOLDEN)
def test_converter_round_trips_through_go_wire(name: str, tmp_path: Path) -> None:
    t, path = _load(name, tmp_path)
    proc = subprocess.run(
        [*trace_tool(), "-d=wire", str(path)],
        capture_output=True,
        env=go_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    text = (golden_dir() / name).read_text(encoding="utf-8", errors="surrogateescape")
    trace_text = text.split("-- trace --\n", 1)[1]
    want = canonical_lines(trace_text)
    got = canonical_lines(proc.stdout.decode("utf-8", "surrogateescape"))
    assert got == want


def _decode_ours(data: bytes) -> tuple[list[GoEvent], str | None]:
    """Our events (as GoEvent) and our error: TraceFormatError's text, or the
    loss we reported; None when we read everything."""
    from collectors.gotrace.reader import open_trace

    try:
        tr = open_trace(data)
    except TraceFormatError as e:
        return [], str(e)
    evs: list[Event] = []
    err: str | None = None
    try:
        for ev in tr.events():
            evs.append(ev)
    except TraceFormatError as e:
        err = str(e)
    if err is None and tr.info.loss.error:
        err = f"loss reported: {tr.info.loss.error}"
    return ours_as_go(tr, evs), err


@pytest.mark.parametrize("name", GOLDEN)
def test_ours_matches_go(name: str, tmp_path: Path) -> None:
    t, path = _load(name, tmp_path)
    go, go_err = go_parsed(path)
    ours, our_err = _decode_ours(t.data)
    if t.success:
        assert go_err is None
        if our_err is not None:
            # Show how far we got in agreement before failing.
            assert_same_events(ours, go[: len(ours)], "events before our error")
            nxt = fmt_event(go[len(ours)]) if len(ours) < len(go) else "(end)"
            pytest.fail(
                f"we fail after {len(ours)} of {len(go)} events: {our_err}\n  Go's next: {nxt}"
            )
        assert_same_events(ours, go)
    else:
        assert go_err is not None
        assert our_err is not None, (
            f"we read a trace Go rejects ({go_err!r}); we produced {len(ours)} events, Go {len(go)}"
        )
        # Beyond the brief's minimum: the events before the failure are Go's,
        # and our reason matches the expectation Go's own test states.
        assert_same_events(ours, go, "events before the error")
        assert t.error_regexp is not None and go_regexp_search(t.error_regexp, our_err), (
            f"our error {our_err!r} does not match Go's expectation {t.error_regexp!r}"
        )


# --------------------------------------------------------------------------
# Damaged variants of the golden traces: ours and Go must agree on every one
# (same events, and either both fail or neither does).

MUTATE_ALL_MAX = 400  # files up to this size get every byte mutated
MUTATE_SAMPLES = 100  # larger files: this many evenly spaced bytes, XOR 0x01 only
TRUNCATE_ALL_MAX = 512  # files up to this size are cut at every offset
TRUNCATE_SAMPLES = 256  # larger files: this many evenly spaced cut points
XORS: tuple[int, ...] = (0x01, 0x80, 0xFF)


def _variants(data: bytes, kind: str) -> list[tuple[str, bytes]]:
    if kind == "truncate":
        n = len(data)
        if n <= TRUNCATE_ALL_MAX:
            cuts = list(range(16, n))
        else:
            cuts = sorted({16 + (n - 16) * i // TRUNCATE_SAMPLES for i in range(TRUNCATE_SAMPLES)})
        return [(f"cut at {c}", data[:c]) for c in cuts]
    n = len(data)
    if n <= MUTATE_ALL_MAX:
        where, xors = list(range(16, n)), XORS
    else:
        # Each variant of a large file costs a full decode on both sides.
        where = sorted({16 + (n - 16) * i // MUTATE_SAMPLES for i in range(MUTATE_SAMPLES)})
        xors = XORS[:1]
    out = []
    for i in where:
        for x in xors:
            d = bytearray(data)
            d[i] ^= x
            out.append((f"byte {i} ^ {x:#04x}", bytes(d)))
    return out


def _short(err: str | None) -> str | None:
    """First line of an error, capped: Go appends whole frontier dumps."""
    if err is None:
        return None
    first = err.split("\n", 1)[0]
    return first if len(first) <= 160 else first[:160] + "..."


def _check_variants(name: str, kind: str, tmp_path: Path) -> None:
    t = load_golden(golden_dir() / name)
    variants = _variants(t.data, kind)
    paths = []
    for i, (_, data) in enumerate(variants):
        p = tmp_path / f"v{i}.trace"
        p.write_bytes(data)
        paths.append(p)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        go_results = list(pool.map(go_parsed, paths))
    problems = []
    for (label, data), (go, go_err_full) in zip(variants, go_results, strict=True):
        go_err = _short(go_err_full)
        ours, our_err_full = _decode_ours(data)  # any exception but TraceFormatError fails here
        our_err = _short(our_err_full)
        if ours != go:
            i = first_difference(ours, go)
            detail = f"events differ at {i} (ours {len(ours)}, go {len(go)})"
            if i < len(ours) and i < len(go):
                detail += f"\n      ours: {fmt_event(ours[i])}\n      go:   {fmt_event(go[i])}"
            problems.append(f"{label}: {detail}; our error {our_err!r}, Go's {go_err!r}")
        elif (our_err is None) != (go_err is None):
            problems.append(
                f"{label}: same {len(go)} events, but our error {our_err!r}, Go's {go_err!r}"
            )
    if problems:
        shown = "\n  ".join(problems[:8])
        pytest.fail(
            f"{len(problems)} of {len(variants)} {kind}d variants disagree with Go:\n  {shown}"
        )


@pytest.mark.parametrize("name", GOLDEN)
def test_truncated_variants_match_go(name: str, tmp_path: Path) -> None:
    _check_variants(name, "truncate", tmp_path)


@pytest.mark.parametrize("name", GOLDEN)
def test_mutated_variants_match_go(name: str, tmp_path: Path) -> None:
    _check_variants(name, "mutate", tmp_path)
