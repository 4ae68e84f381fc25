# ruff: noqa: E501
"""Tests of the Go-oracle support code (tests/support/goparsed.py, asserts.py).

E501 is off: real -d=parsed output lines are long."""

from __future__ import annotations

import datetime
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from collectors.gotrace.model import ClockSnapshot, Event, Frame, StackTable
from tests.support.asserts import assert_same_events, assert_same_transitions, fmt_event
from tests.support.goparsed import (
    GoEvent,
    go_env,
    go_parsed,
    go_parsed_raw,
    oracle_go,
    ordered_v1_start,
    parse_go_parsed,
    parse_rfc3339nano,
)
from tests.support.gostrings import go_unquote

# Lines as go1.27.3 `go tool trace -d=parsed` printed them for a real trace
# (a small program recorded with go1.27.3; Wall printed with TZ=UTC).
REAL_OUTPUT = """\
M=-1 P=-1 G=-1 Sync Time=622473995264 N=1 Trace=622474010176 Mono=622474010159 Wall=2026-12-02T12:26:44.371994546Z
M=7336 P=-1 G=-1 StateTransition Time=622474016448 ProcID=0 Undetermined->Running Reason=""
M=7336 P=0 G=1 Metric Time=622474021760 Name="/sched/gomaxprocs:threads" Value=Value{Uint64(2)}
Stack=
\truntime.traceLocker.Gomaxprocs @ 0x46c1c3
\t\t/root/.cache/gmpscope/go/go1.27.3/go/src/runtime/traceruntime.go:282

M=7336 P=0 G=1 StateTransition Time=622474033664 GoID=7 NotExist->Runnable Reason=""
TransitionStack=
\truntime.traceStartReadCPU.func1 @ 0x477460
\t\t/root/.cache/gmpscope/go/go1.27.3/go/src/runtime/tracecpu.go:44

Stack=
\truntime.traceStartReadCPU @ 0x46ad06
\t\t/root/.cache/gmpscope/go/go1.27.3/go/src/runtime/tracecpu.go:44

M=7336 P=0 G=1 TaskBegin Time=622474042048 ID=1 Parent=18446744073709551615 Type="main task \\"quoted\\" \\x01 é \\u2028"
Stack=
\tmain.main @ 0x4ad166
\t\t/tmp/hd/prog/main.go:14

M=7336 P=0 G=1 Log Time=622474043520 Task=1 Category="cat\\n" Message="msg\\twith\\ttabs \\xff bad"
Stack=
\tmain.main @ 0x4ad199
\t\t/tmp/hd/prog/main.go:15

M=7339 P=1 G=19 Label Time=622477377920 Label="GC (fractional)" Resource=Goroutine(19)
M=7339 P=1 G=1 RangeEnd Time=622478241728 Name="GC incremental sweep" Scope=Proc(1) Attributes=["bytes swept"=Value{Uint64(1720320)} "bytes reclaimed"=Value{Uint64(0)}]
M=7336 P=0 G=1 RangeEnd Time=622474027456 Name="stop-the-world (start trace)" Scope=Goroutine(1) Attributes=[]
M=-1 P=-1 G=-1 Sync Time=622479957953 N=2
"""


def test_parse_real_output_fields() -> None:
    evs = parse_go_parsed(REAL_OUTPUT)
    assert [e.kind for e in evs] == [
        "Sync",
        "StateTransition",
        "Metric",
        "StateTransition",
        "TaskBegin",
        "Log",
        "Label",
        "RangeEnd",
        "RangeEnd",
        "Sync",
    ]
    sync = evs[0]
    # 2026-12-02 is day 20789 after 1970-01-01 (checked with datetime below).
    assert sync.clock == ClockSnapshot(
        622474010176, 622474010159, parse_rfc3339nano("2026-12-02T12:26:44.371994546Z")
    )
    p = evs[1]
    assert (p.resource, p.rid, p.from_state, p.to_state, p.reason, p.m, p.p, p.g) == (
        "proc",
        0,
        "Undetermined",
        "Running",
        "",
        7336,
        -1,
        -1,
    )
    assert evs[2].value == 2 and evs[2].name == "/sched/gomaxprocs:threads"
    assert evs[2].stack == (
        Frame(
            0x46C1C3,
            "runtime.traceLocker.Gomaxprocs",
            "/root/.cache/gmpscope/go/go1.27.3/go/src/runtime/traceruntime.go",
            282,
        ),
    )
    g = evs[3]
    assert (
        g.resource == "goroutine"
        and g.rid == 7
        and g.tstack[0].func == "runtime.traceStartReadCPU.func1"
    )
    assert g.stack[0].func == "runtime.traceStartReadCPU" and g.stack[0].line == 44
    # The Go program's literal was "main task \"quoted\" \x01 é \u2028".
    assert evs[4].name == 'main task "quoted" \x01 é \u2028'
    assert (evs[4].task, evs[4].parent) == (1, (1 << 64) - 1)
    # "\xff" is a lone invalid byte: kept as a surrogate escape.
    assert evs[5].category == "cat\n" and evs[5].message == "msg\twith\ttabs \udcff bad"
    assert (evs[6].name, evs[6].scope, evs[6].scope_id) == ("GC (fractional)", "goroutine", 19)
    assert evs[7].attrs == (("bytes swept", 1720320), ("bytes reclaimed", 0))
    assert (evs[7].scope, evs[7].scope_id) == ("proc", 1)
    assert evs[8].attrs == () and evs[8].name == "stop-the-world (start trace)"
    assert evs[9].n == 2 and evs[9].clock is None


def test_rfc3339nano_matches_datetime() -> None:
    for text, dt in [
        (
            "2026-12-02T12:26:44.371994546Z",
            datetime.datetime(2026, 12, 2, 12, 26, 44, tzinfo=datetime.UTC),
        ),
        ("1970-01-01T00:00:00Z", datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)),
        (
            "1969-12-31T23:59:59.5Z",
            datetime.datetime(1969, 12, 31, 23, 59, 59, tzinfo=datetime.UTC),
        ),
        (
            "2000-02-29T01:00:00.1+02:00",
            datetime.datetime(2000, 2, 28, 23, 0, 0, tzinfo=datetime.UTC),
        ),
    ]:
        frac = text.split(".")[1].rstrip("Z").split("+")[0] if "." in text else ""
        expect = int(dt.timestamp()) * 10**9 + (int(frac.ljust(9, "0")) if frac else 0)
        assert parse_rfc3339nano(text) == expect


@pytest.mark.parametrize(
    "lit,value",
    [
        (r'""', ""),
        (r'"a\"b\\c"', 'a"b\\c'),
        (r'"\a\b\f\n\r\t\v"', "\a\b\f\n\r\t\v"),
        (r'"\x00\x7f"', "\x00\x7f"),
        (r'"\u00ad\u2028\U0001d173"', "\u00ad\u2028\U0001d173"),
        (r'"\xe2\x82"', "\udce2\udc82"),  # a truncated UTF-8 sequence: two invalid bytes
        (r'"\101"', "A"),
    ],
)
def test_go_unquote(lit: str, value: str) -> None:
    assert go_unquote(lit) == value


def test_ours_as_go_and_asserts() -> None:
    from tests.support.goparsed import ours_as_go

    class T:
        stacks = StackTable()

    fr = (Frame(1, "f", "x.go", 3),)
    sid = T.stacks.intern(fr)
    ours = ours_as_go(
        T,
        [
            Event(
                "StateTransition",
                5,
                m=1,
                p=0,
                g=2,
                stack=sid,
                resource="goroutine",
                rid=2,
                from_state="Running",
                to_state="Waiting",
                reason="sleep",
                tstack=sid,
            ),
            Event("RangeEnd", 6, name="r", scope="proc", scope_id=0, attrs=[("a", 1)]),
        ],
    )
    go = [
        GoEvent(
            "StateTransition",
            5,
            m=1,
            p=0,
            g=2,
            stack=fr,
            resource="goroutine",
            rid=2,
            from_state="Running",
            to_state="Waiting",
            reason="sleep",
            tstack=fr,
        ),
        GoEvent("RangeEnd", 6, name="r", scope="proc", scope_id=0, attrs=(("a", 1),)),
    ]
    assert_same_events(ours, go)
    assert_same_transitions(ours, go)
    bad = [go[0], GoEvent("RangeEnd", 7, name="r", scope="proc", scope_id=0, attrs=(("a", 1),))]
    with pytest.raises(AssertionError, match=r"differ at index 1.*\n  ts: ours=6 go=7"):
        assert_same_events(ours, bad)
    with pytest.raises(AssertionError, match="goroutine 2"):
        assert_same_transitions(ours, [GoEvent("StateTransition", 9, resource="goroutine", rid=2)])
    assert "GoID=2 Running->Waiting" in fmt_event(go[0])


GO_PROGRAM = r"""
package main

import (
	"context"
	"fmt"
	"os"
	"runtime/trace"
	"sync"
	"time"
)

var names = []string{"plain", "q\"uote\\", "ctl\x00\x01\x7f\n", "bad\xff\xe2\x82", "uni\u00ad\u2028\U0001d173é"}

func main() {
	f, _ := os.Create(os.Args[1])
	trace.Start(f)
	ctx, task := trace.NewTask(context.Background(), "root")
	for _, n := range names {
		trace.Log(ctx, "cat", n)
		fmt.Printf("%q\n", n)
	}
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			trace.WithRegion(ctx, "work", func() { time.Sleep(time.Millisecond) })
		}()
	}
	wg.Wait()
	task.End()
	trace.Stop()
	f.Close()
}
"""
NAMES = [
    "plain",
    'q"uote\\',
    "ctl\x00\x01\x7f\n",
    "bad\udcff\udce2\udc82",
    "uni\u00ad\u2028\U0001d173é",
]


@pytest.fixture(scope="module")
def real_trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    if not os.path.exists(oracle_go()):
        pytest.skip("go1.27.3 not installed")
    d = tmp_path_factory.mktemp("goprog")
    (d / "main.go").write_text(GO_PROGRAM)
    (d / "go.mod").write_text("module prog\n\ngo 1.27\n")
    subprocess.run([oracle_go(), "build", "-o", "prog", "."], cwd=d, env=go_env(), check=True)
    out = subprocess.run(
        [str(d / "prog"), str(d / "t.trace")], cwd=d, capture_output=True, check=True
    )
    return d / "t.trace", out.stdout.decode("utf-8", "surrogateescape")


@pytest.mark.slow
def test_real_trace_round_trip(real_trace: tuple[Path, str]) -> None:
    path, quoted = real_trace
    # Go's own %q of each string unquotes to the program's literal.
    assert [go_unquote(q) for q in quoted.splitlines()] == NAMES
    evs, err = go_parsed(path)
    assert err is None
    rc, out, _ = go_parsed_raw(str(path))  # the cached copy
    text = out.decode("utf-8", "surrogateescape")
    assert rc == 0 and parse_go_parsed(text) == evs
    lines = text.split("\n")
    heads = Counter(ln.split(" ")[3] for ln in lines if ln.startswith("M="))
    assert heads == Counter(e.kind for e in evs)
    assert sum(ln.startswith("\t") and not ln.startswith("\t\t") for ln in lines) == sum(
        len(e.stack) + len(e.tstack) for e in evs
    )
    assert sum(ln == "TransitionStack=" for ln in lines) == sum(bool(e.tstack) for e in evs)
    assert [e.message for e in evs if e.kind == "Log"] == NAMES
    assert [e.kind for e in evs if e.kind.startswith("Region")].count("RegionBegin") == 6
    assert all(isinstance(e, GoEvent) for e in evs)
    sync = [e for e in evs if e.kind == "Sync"]
    assert sync and sync[0].clock is not None


@pytest.mark.slow
def test_go_error_reported(tmp_path: Path) -> None:
    if not os.path.exists(oracle_go()):
        pytest.skip("go1.27.3 not installed")
    p = tmp_path / "bad.trace"
    p.write_bytes(b"go 1.26 trace\x00\x00\x00\x07garbage")
    evs, err = go_parsed(p)
    assert err and all(e.kind == "Sync" for e in evs)


def test_parse_experimental_and_global_scope() -> None:
    # Built the way Event.String formats these kinds (event.go): Experimental
    # prints Name=%s Args=[name=Value, ...]; a None scope prints "None".
    text = (
        "M=3 P=0 G=1 Experimental Time=9 Name=SpanAlloc "
        "Args=[id=Value{Uint64(7)}, npages_value=Value{Uint64(2)}, kindclass=Value{Uint64(0)}]\n"
        'M=3 P=0 G=1 RangeBegin Time=10 Name="GC concurrent mark phase" Scope=None\n'
        "M=3 P=0 G=1 StackSample Time=11\nStack=\n\tmain.f @ 0x10\n\t\t/x/y.go:3\n\n"
    )
    e, r, s = parse_go_parsed(text)
    assert e.name == "SpanAlloc" and e.attrs == (("id", 7), ("npages_value", 2), ("kindclass", 0))
    assert (r.scope, r.scope_id) == ("global", -1)
    assert s.kind == "StackSample" and s.stack == (Frame(0x10, "main.f", "/x/y.go", 3),)


def test_v1_start_runs_ordered_by_goroutine() -> None:
    # As Go 1.27 printed a Go 1.21 gcpressure trace: the two goroutines that
    # existed at the start come from a Go map, here in the order 18, 17.
    def start(goid: int, ts: int) -> GoEvent:
        return GoEvent(kind="StateTransition", ts=ts, resource="goroutine", rid=goid,
                       from_state="Undetermined", to_state="Runnable")

    before = GoEvent(kind="Metric", ts=32216, m=0, p=1, g=1, name="/gc/heap/goal:bytes",
                     value=2097152)
    after = GoEvent(kind="StateTransition", ts=103297, m=0, p=1, g=1, resource="goroutine",
                    rid=19, from_state="NotExist", to_state="Runnable")
    go = [before, start(18, 34990), start(17, 34991), after]
    assert ordered_v1_start(go) == [before, start(17, 34990), start(18, 34991), after]
    assert ordered_v1_start(ordered_v1_start(go)) == ordered_v1_start(go)
