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
  it raise TraceFormatError (or report a loss).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support.asserts import assert_same_events, fmt_event
from support.goparsed import GoEvent, go_env, go_parsed, oracle_go, ours_as_go
from support.rawtext import GoldenTest, canonical_lines, go_regexp_search, load_golden

from collectors.gotrace.errors import TraceFormatError
from collectors.gotrace.model import Event

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
        [oracle_go(), "tool", "trace", "-d=wire", str(path)],
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
