"""Differential tests: our decoder against Go's reference parser on real traces.

For every supported toolchain and every workload in collectors/workloads, a
real trace (built, run and cached by :mod:`support.workload_traces`) is
decoded by ours (``open_trace`` on the file bytes) and by Go 1.27's
``go tool trace -d=parsed`` (:func:`support.goparsed.go_parsed`), and:

- Go reads the trace without error (else the trace, not the decoder, is bad);
- ours decodes it without raising;
- every goroutine and proc goes through the same state transitions in the
  same order, with the same counts per (resource, from, to, reason);
- there are as many events of each kind;
- the two event sequences are identical, field by field.

The (toolchain, workload) pair is a module-scoped fixture parameter, so each
trace is decoded once by each side for all four checks.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass

import pytest

from tests.support.asserts import (
    assert_same_events,
    assert_same_kind_counts,
    assert_same_transitions,
)
from tests.support.goparsed import GoEvent, decode_ours, go_parsed
from tests.support.workload_traces import TOOLCHAINS, WORKLOADS, workload_trace

pytestmark = pytest.mark.slow

COMBOS = [(v, w) for v in TOOLCHAINS for w in WORKLOADS]


@dataclass
class Decoded:
    trace: str
    go: list[GoEvent]
    go_error: str | None
    ours: list[GoEvent] | None
    our_error: str | None


@pytest.fixture(scope="module", params=COMBOS, ids=[f"go{v}-{w}" for v, w in COMBOS])
def decoded(request: pytest.FixtureRequest) -> Decoded:
    go_version, workload = request.param
    path = workload_trace(go_version, workload)
    go, go_error = go_parsed(path)
    ours: list[GoEvent] | None = None
    our_error: str | None = None
    try:
        ours, _trace = decode_ours(path.read_bytes())
    except Exception:  # noqa: BLE001 - any decoder failure is the finding
        our_error = traceback.format_exc(limit=-6)
    return Decoded(str(path), go, go_error, ours, our_error)


def _ours(d: Decoded) -> list[GoEvent]:
    if d.ours is None:
        pytest.fail(f"our decoder raised on {d.trace}:\n{d.our_error}")
    return d.ours


def test_go_reads_trace(decoded: Decoded) -> None:
    assert decoded.go_error is None, f"Go rejected {decoded.trace}: {decoded.go_error}"
    assert decoded.go, f"Go read no events from {decoded.trace}"


def test_transitions(decoded: Decoded) -> None:
    assert_same_transitions(_ours(decoded), decoded.go)


def test_kind_counts(decoded: Decoded) -> None:
    assert_same_kind_counts(_ours(decoded), decoded.go)


def test_same_events(decoded: Decoded) -> None:
    assert_same_events(_ours(decoded), decoded.go)
