"""Flows (who woke whom) against Go's own unblock events: the context
goroutine of every Waiting -> Runnable transition as ``go tool trace
-d=parsed`` prints it, on real workload traces of several Go versions."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import numpy as np
import pytest

from ingest.views.flows import all_wakes, flows, select_row
from ingest.views.wakes import goroutine_row_count, row_before_seq
from tests.support.causality import TRACES, Loaded, backends, go_unblocks, load_traces


@pytest.fixture(scope="module", params=backends())
def loaded_traces(request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loaded]:
    yield from load_traces(request.param, tmp_path_factory)


def _row_of_seq(f: object, seq: int) -> int:
    iv = f.intervals  # type: ignore[attr-defined]
    n = goroutine_row_count(f)  # type: ignore[arg-type]
    hits = np.nonzero(np.asarray(iv["seq"][:n]) == seq)[0]
    assert len(hits) == 1
    return int(hits[0])


@pytest.mark.parametrize("name", list(TRACES))
def test_every_waker_is_gos_context_goroutine(loaded_traces: Loaded, name: str) -> None:
    """The wake-up index equals Go's list: same transitions, same woken and waker."""
    f = loaded_traces.get(name)
    go = [(i, g, w) for i, g, w, _ in go_unblocks(loaded_traces.files[name])]
    assert go, "the trace has wake-ups"
    assert all_wakes(f) == go


@pytest.mark.parametrize("name", list(TRACES))
def test_woken_by_names_the_waker_and_its_stack(loaded_traces: Loaded, name: str) -> None:
    """flows() of each woken span (up to 200 per trace): the waker and the
    stack Go printed for the unblock."""
    f, eng = loaded_traces.get(name), loaded_traces.engine
    for seq, goid, waker, stack in go_unblocks(loaded_traces.files[name])[:200]:
        row = _row_of_seq(f, seq)
        d = flows(eng, f, row)
        by = d["woken_by"]
        assert by is not None and by["goroutine"] == goid and by["seq"] == seq
        assert by["waker"] == waker
        assert tuple(fr["function"] for fr in by["stack"]) == stack
        if waker is not None:
            assert d["arrows"][0]["from"]["goroutine"] == waker
            assert by["waker_span"]["goroutine"] == waker
            assert by["waker_span"]["state"] == "Running"
        # The wait it ended is the woken goroutine's previous interval.
        if by["wait"] is not None:
            assert by["wait"]["state"] == "Waiting" and by["wait"]["end_ts"] == by["ts"]
        # Selecting the wait itself, or the run that follows, names the same wake-up.
        if by["wait"] is not None:
            assert flows(eng, f, by["wait"]["row"])["woken_by"]["seq"] == seq


@pytest.mark.parametrize("name", list(TRACES))
def test_woke_lists_every_unblock_in_the_wakers_span(loaded_traces: Loaded,
                                                     name: str) -> None:
    """Each waker's Running span lists exactly the unblocks Go gives it there."""
    f, eng = loaded_traces.get(name), loaded_traces.engine
    by_span: dict[int, list[tuple[int, int]]] = {}
    for seq, goid, waker, _ in go_unblocks(loaded_traces.files[name]):
        if waker is not None:
            row = row_before_seq(f, waker, seq)
            assert row is not None
            by_span.setdefault(row, []).append((seq, goid))
    for row, want in list(by_span.items())[:300]:
        d = flows(eng, f, row, limit=1000)
        assert d["woke_total"] == len(want)
        assert [(w["seq"], w["goroutine"]) for w in d["woke"]] == want
        assert Counter(a["kind"] for a in d["arrows"])["woke"] == len(want)


def test_selects_by_goroutine_and_time(loaded_traces: Loaded) -> None:
    """``g`` and ``t`` pick the interval in progress at t; ``ref`` the shape's row."""
    f = loaded_traces.get("chain-1.27")
    seq, goid, waker, _ = [u for u in go_unblocks(loaded_traces.files["chain-1.27"])
                           if u[2] is not None][0]
    row = _row_of_seq(f, seq)
    ts = int(f.intervals["start_ts"][row])
    assert select_row(f, goid=goid, t=ts) >= row
    assert select_row(f, ref=row * 4) == row
    with pytest.raises(LookupError):
        select_row(f, goid=10**9)
    with pytest.raises(LookupError):
        select_row(f, ref=-1)
