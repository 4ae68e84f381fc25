"""Aligning a poller recording with the Go trace of the same run.

Data: tests/data/strace/httpnet.strace and httpnet-go1.27.trace, written by one
run of the httpnet workload (tests/data/strace/capture.sh).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from collectors.gotrace.todir import decode_file_to_dir
from collectors.poller.align import Calls, align, containment, match_offset
from collectors.poller.gojoin import align_with_trace, os_calls, syscall_intervals
from collectors.poller.parquet_out import collect_table
from collectors.poller.strace_parse import StraceParser, iter_file_lines, iter_rows

DATA = Path(__file__).resolve().parents[1] / "data" / "strace"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("join") / "decoded"
    meta = decode_file_to_dir(DATA / "httpnet-go1.27.trace", out)
    transitions = pq.read_table(out / "transitions.parquet")
    poller, _ = collect_table(iter_rows(StraceParser(), iter_file_lines(DATA / "httpnet.strace")))
    return {"meta": meta, "transitions": transitions, "poller": poller}


def running_by_m(transitions: Any) -> dict[int, list[tuple[int, int]]]:
    """Goroutine Running intervals per M, from the decoded transitions."""
    running: dict[int, tuple[int, int]] = {}
    out: dict[int, list[tuple[int, int]]] = {}
    for r in transitions.to_pylist():
        if r["resource"] != "goroutine":
            continue
        if r["from_state"] == "Running" and r["id"] in running:
            start, m = running.pop(r["id"])
            out.setdefault(m, []).append((start, r["ts"]))
        if r["to_state"] == "Running":
            running[r["id"]] = (r["ts"], r["m"])
    return out


def test_ms_are_the_recorded_threads(run: dict[str, Any]) -> None:
    go = syscall_intervals(run["transitions"])
    assert set(go.thread.tolist()) <= set(run["poller"].column("tid").to_pylist())


def test_clock_snapshot_alignment(run: dict[str, Any]) -> None:
    found, meta = align_with_trace(DATA / "httpnet-go1.27.trace", run["poller"], None)
    assert found.method == "clock-snapshot"
    wc = meta["wall_clock"]
    assert found.offset_ns == wc["wall_ns"] - wc["trace_ns"]
    # Go syscalls strace does not trace (socket, setsockopt, getsockname...) contain
    # no recorded call; most others do.
    assert found.quality is not None and found.quality > 0.5


def test_syscall_matching_recovers_the_snapshot_offset(run: dict[str, Any]) -> None:
    go = syscall_intervals(run["transitions"])
    osc = os_calls(run["poller"])
    wc = run["meta"]["wall_clock"]
    truth = wc["wall_ns"] - wc["trace_ns"]
    for start_off in (-1_500_000, 0, 400_000):  # coarse guesses up to 1.5 ms wrong
        found = match_offset(go, osc, truth + start_off)
        assert found is not None
        low, high, pairs = found
        assert low <= truth <= high and pairs > 100
        assert high - low < 100_000  # the pairs pin it to well under 0.1 ms
    bad_guess = align(go, osc, None, truth + 1_500_000)
    assert bad_guess.method == "syscall-matching"
    assert containment(go, osc, truth) == (bad_guess.go_syscalls, bad_guess.matched)
    good_guess = align(go, osc, None, truth)
    assert good_guess.method == "monotonic-clock" and good_guess.offset_ns == truth


def test_no_alignment_without_any_clock(run: dict[str, Any]) -> None:
    go = syscall_intervals(run["transitions"])
    found = align(go, os_calls(run["poller"]), None, None)
    assert found.method == "none" and found.offset_ns is None


def test_blocking_epoll_waits_fall_between_goroutines_on_their_m(run: dict[str, Any]) -> None:
    """The netpoller blocks in the scheduler, never while its M runs a goroutine;
    non-blocking polls (timeout 0) may: startTheWorld polls from the goroutine
    that stopped the world."""
    wc = run["meta"]["wall_clock"]
    offset = wc["wall_ns"] - wc["trace_ns"]
    running = running_by_m(run["transitions"])
    waits = [r for r in run["poller"].to_pylist()
             if r["name"] == "epoll_pwait" and r["duration_ns"] is not None]
    first, last = run["meta"]["first_ts"], run["meta"]["last_ts"]
    checked = 0
    for w in waits:
        start = w["ts_ns"] - offset
        end = start + w["duration_ns"]
        if start < first or end > last or w["timeout_ns"] == 0:
            continue
        assert w["tid"] in running or not any(running.values())
        overlapping = [iv for iv in running.get(w["tid"], []) if iv[0] < end and start < iv[1]]
        assert not overlapping, (w, overlapping)
        checked += 1
    assert checked >= 5


def test_calls_of_drops_unknown_ends() -> None:
    calls = Calls.of([1, 2, 3], [10, 20, 30], [15, None, 35])
    assert calls.thread.tolist() == [1, 3] and calls.end.tolist() == [15, 35]
