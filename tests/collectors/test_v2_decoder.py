"""The new-family decoder (Go 1.22+ traces) against Go's reference parser.

The traces in tests/data/traces/go1.2X-workers.trace were recorded with the
Go 1.22.10, 1.23.9, 1.25.5 and 1.27.3 toolchains (1.27 writes on-disk version
1.26) from a small program run for ~2.2 s: four workers with tasks, regions,
logs, a channel and a mutex; a TCP echo loop and file reads (syscalls,
netpoller); a GC every second; CPU profiling on. Each spans 3 generations.

Expected events always come from ``go tool trace -d=parsed`` of Go 1.27.3
(tests/support/goparsed.py), run on the same bytes, including for truncated
and corrupted copies: on those Go prints the events it could read and then an
error; we must yield the same events and report the rest as a loss (or raise
TraceFormatError when not even the first generation could be read).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from collectors.gotrace.errors import TraceFormatError
from collectors.gotrace.reader import open_trace
from tests.support.asserts import assert_same_events
from tests.support.batches import batch_starts
from tests.support.goparsed import go_parsed, ours_as_go

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
TRACES = sorted(p.name for p in DATA.glob("go1.2[2-7]-workers.trace"))
# Recorded like the workers traces for 0.3 s with GODEBUG=traceallocfree=1
# (Go 1.23.9 and 1.27.3): experimental heap/stack alloc-free events.
ALLOCFREE = sorted(p.name for p in DATA.glob("go1.2[2-7]-allocfree.trace"))
HEADER = 16


def _decode(data: bytes) -> tuple[list, object]:
    tr = open_trace(data)
    evs = list(tr.events())
    return ours_as_go(tr, evs), tr


def _generation_starts(data: bytes) -> list[int]:
    seen: dict[int, int] = {}
    for off, gen in batch_starts(data):
        if gen:
            seen.setdefault(gen, off)
    return sorted(seen.values())


def test_fixture_traces_present() -> None:
    versions = {name.split("-")[0] for name in TRACES}
    assert versions == {"go1.22", "go1.23", "go1.25", "go1.26"}


@pytest.mark.parametrize("name", TRACES)
def test_real_trace_matches_go(name: str) -> None:
    path = DATA / name
    data = path.read_bytes()
    ours, tr = _decode(data)
    go, err = go_parsed(path)
    assert err is None
    assert_same_events(ours, go)
    info = tr.info
    assert info.family == "v2"
    assert info.go_version == name.split("-")[0][2:]
    assert info.generations == 3
    # Frequency on linux/amd64: 1e9 ns / 64 ns per tick.
    assert info.ticks_per_sec == 15_625_000
    assert info.loss.error == "" and info.loss.bytes_lost == 0
    kinds = {e.kind for e in ours}
    for k in (
        "Sync",
        "StateTransition",
        "Metric",
        "RangeBegin",
        "RangeEnd",
        "TaskBegin",
        "TaskEnd",
        "RegionBegin",
        "RegionEnd",
        "Log",
        "StackSample",
        "Label",
    ):
        assert k in kinds, k
    syncs = [e for e in ours if e.kind == "Sync"]
    assert [e.n for e in syncs] == [1, 2, 3, 4]
    if info.go_version >= "1.25":
        assert all(e.clock is not None for e in syncs[:-1]) and syncs[-1].clock is None
    else:
        assert all(e.clock is None for e in syncs)


@pytest.mark.parametrize("name", ALLOCFREE)
def test_experimental_events_match_go(name: str) -> None:
    path = DATA / name
    ours, tr = _decode(path.read_bytes())
    go, err = go_parsed(path)
    assert err is None
    assert_same_events(ours, go)
    exp = [e for e in ours if e.kind == "Experimental"]
    assert {e.name for e in exp} >= {"HeapObjectAlloc", "SpanAlloc", "GoroutineStackAlloc"}
    assert all(e.attrs and e.attrs[0][0] == "id" for e in exp)


@pytest.mark.parametrize("name", TRACES)
def test_stacks_are_interned(name: str) -> None:
    tr = open_trace((DATA / name).read_bytes())
    evs = list(tr.events())
    ids = {e.stack for e in evs} | {e.tstack for e in evs}
    ids.discard(0)
    assert ids and max(ids) <= len(tr.stacks)
    for sid in ids:
        frames = tr.stacks.frames(sid)
        # Real traces hold a few stacks whose only frame is pc 0 with no
        # symbol (Go prints them the same way); all others are symbolized.
        assert frames and all(f.func and f.file for f in frames if f.pc)


def _cuts(data: bytes) -> list[int]:
    starts = _generation_starts(data)
    cuts = set()
    for s in starts[1:]:
        cuts.update((s, s + 1, s + 9, s + 300))
    cuts.update((len(data) - 1, len(data) // 2))
    return sorted(c for c in cuts if HEADER < c < len(data))


@pytest.mark.parametrize("name", TRACES)
def test_truncated_trace_keeps_complete_generations(name: str, tmp_path: Path) -> None:
    data = (DATA / name).read_bytes()
    starts = _generation_starts(data)
    for cut in _cuts(data):
        blob = data[:cut]
        path = tmp_path / f"cut{cut}.trace"
        path.write_bytes(blob)
        go, err = go_parsed(path)
        try:
            ours, tr = _decode(blob)
        except TraceFormatError:
            # Only when not even the first generation could be read.
            assert err is not None and cut <= starts[1]
            continue
        assert_same_events(ours, go)
        loss = tr.info.loss
        if err is None:
            # Cut exactly at a batch boundary of a pre-1.26 trace: Go cannot tell.
            assert loss.error == "" and loss.bytes_lost == 0
            continue
        assert loss.error != ""
        assert loss.generations_lost >= 1
        assert 0 < loss.bytes_lost <= cut - HEADER
        assert HEADER <= loss.offset <= cut
        # Generations that began before the lost tail were yielded in full (a
        # pre-1.26 generation cut at a batch boundary looks complete to Go too).
        complete = sum(1 for s in starts if s < cut - loss.bytes_lost)
        assert tr.info.generations == complete >= 1


@pytest.mark.parametrize("name", TRACES)
def test_damage_in_first_generation_raises(name: str) -> None:
    data = (DATA / name).read_bytes()
    # The first batch header is not a batch: nothing can be read at all.
    with pytest.raises(TraceFormatError, match="expected batch event") as ei:
        list(open_trace(data[:HEADER] + b"\x77" + data[HEADER + 1 :]).events())
    assert ei.value.offset == HEADER


def test_truncated_first_generation_raises() -> None:
    data = (DATA / "go1.26-workers.trace").read_bytes()
    # Go 1.26 generations end with a marker, so a cut one is always detected.
    with pytest.raises(TraceFormatError, match="failed to read full batch"):
        list(open_trace(data[: _generation_starts(data)[1] // 2]).events())


def test_header_only() -> None:
    # Go 1.22-1.25: no generation at all means no frequency event: an error.
    with pytest.raises(TraceFormatError, match="no frequency event found"):
        list(open_trace(b"go 1.22 trace\x00\x00\x00").events())
    # Go 1.26: an empty trace is valid and yields just the closing Sync.
    tr = open_trace(b"go 1.26 trace\x00\x00\x00")
    evs = list(tr.events())
    assert [(e.kind, e.ts, e.n) for e in evs] == [("Sync", 1, 1)]
    assert tr.info.generations == 0 and tr.info.loss.error == ""


@pytest.mark.parametrize("version", ["1.22", "1.23", "1.25", "1.26"])
def test_garbage_after_header_raises(version: str) -> None:
    rng = random.Random(7)
    for _ in range(50):
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
        with pytest.raises(TraceFormatError):
            list(open_trace(f"go {version} trace\x00\x00\x00".encode() + body).events())


@pytest.mark.parametrize("name", TRACES)
def test_corrupted_bytes_never_crash(name: str) -> None:
    data = (DATA / name).read_bytes()
    rng = random.Random(name)
    for _ in range(60):
        d = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            d[rng.randrange(HEADER, len(d))] = rng.randrange(256)
        try:
            tr = open_trace(bytes(d))
            for _ in tr.events():
                pass
        except TraceFormatError as e:
            assert e.reason
            continue
        loss = tr.info.loss
        assert (loss.error == "") == (loss.bytes_lost == 0 and loss.generations_lost == 0)


@pytest.mark.parametrize("name", ["go1.22-workers.trace", "go1.26-workers.trace"])
def test_corrupted_bytes_match_go(name: str, tmp_path: Path) -> None:
    data = (DATA / name).read_bytes()
    rng = random.Random(1000 + len(name))
    for k in range(8):
        d = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            d[rng.randrange(HEADER, len(d))] = rng.randrange(256)
        path = tmp_path / f"mut{k}.trace"
        path.write_bytes(bytes(d))
        go, err = go_parsed(path)
        try:
            ours, tr = _decode(bytes(d))
        except TraceFormatError:
            assert err is not None
            continue
        assert_same_events(ours, go)
        assert (err is None) == (tr.info.loss.error == "")


_SORT_PROG = """package main

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

type item struct{ key, idx int }

func main() {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for sc.Scan() {
		var xs []item
		for i, f := range strings.Fields(sc.Text()) {
			k, _ := strconv.Atoi(f)
			xs = append(xs, item{k, i})
		}
		slices.SortFunc(xs, func(a, b item) int { return cmp.Compare(a.key, b.key) })
		parts := make([]string, len(xs))
		for i, x := range xs {
			parts[i] = strconv.Itoa(x.idx)
		}
		fmt.Fprintln(out, strings.Join(parts, " "))
	}
}
"""


def test_go_sort_leaves_ties_like_go(tmp_path: Path) -> None:
    """Go's reader sorts with an unstable sort; ties must end up as in Go."""
    import subprocess

    from collectors.gotrace.v2.gosort import go_sort
    from tests.support.goparsed import go_env, oracle_go

    (tmp_path / "main.go").write_text(_SORT_PROG)
    (tmp_path / "go.mod").write_text("module sortcheck\n\ngo 1.22\n")
    exe = tmp_path / "sortcheck"
    subprocess.run(
        [oracle_go(), "build", "-o", str(exe), "."],
        cwd=tmp_path,
        env=go_env(),
        check=True,
        capture_output=True,
    )
    rng = random.Random(3)
    cases = []
    for _ in range(400):
        n = rng.choice([rng.randint(1, 20), rng.randint(13, 100), rng.randint(50, 400)])
        shape = rng.randrange(4)
        keys = [rng.randint(0, max(1, n // 3)) for _ in range(n)]
        if shape == 1:
            keys.sort()
        elif shape == 2:
            keys.sort(reverse=True)
        elif shape == 3:
            keys = [rng.randint(0, 3) for _ in range(n)]
        cases.append(keys)
    text = "".join(" ".join(map(str, c)) + "\n" for c in cases)
    proc = subprocess.run([str(exe)], input=text.encode(), capture_output=True, check=True)
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == len(cases)
    for keys, line in zip(cases, lines, strict=True):
        order = list(range(len(keys)))
        go_sort(order, keys.__getitem__)
        assert order == [int(x) for x in line.split()], keys
