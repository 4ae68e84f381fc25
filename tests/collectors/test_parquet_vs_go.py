"""End to end: the Parquet files `gmpscope decode` writes say what Go says.

For every toolchain x workload trace, the directory written by
``decode_file_to_dir`` (what the CLI and the ingest service use: the C decoder
for Go 1.22+ when built, the Python one otherwise) is read back with pyarrow
and compared with Go 1.27's ``go tool trace -d=parsed``:

- transitions.parquet holds Go's StateTransitions, in Go's order, with the same
  time, resource, id, states, reason, context and stack frames;
- transition_stacks.parquet holds the transition stacks that differ from the
  event stack;
- events.parquet plus transitions.parquet, interleaved by ``seq``, give Go's
  kind and timestamp sequence, and each event's own fields.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from collectors.gotrace.model import Frame
from collectors.gotrace.parquet_out import utf8_text
from collectors.gotrace.todir import decode_file_to_dir
from tests.support.goparsed import GoEvent, go_parsed
from tests.support.workload_traces import TOOLCHAINS, WORKLOADS, workload_trace

pytestmark = pytest.mark.slow

COMBOS = [(v, w) for v in TOOLCHAINS for w in WORKLOADS]


def _stacks(out: Path) -> dict[int, tuple[Frame, ...]]:
    frames: dict[int, list[Frame]] = {}
    for r in pq.read_table(out / "stacks.parquet").to_pylist():
        frames.setdefault(r["stack_id"], []).append(
            Frame(r["pc"], r["function"], r["file"], r["line"]))
    return {0: (), **{k: tuple(v) for k, v in frames.items()}}


def _clean_frames(frames: tuple[Frame, ...]) -> tuple[Frame, ...]:
    return tuple(f._replace(func=utf8_text(f.func), file=utf8_text(f.file)) for f in frames)


def _expected_event_row(e: GoEvent) -> dict[str, Any]:
    """The events.parquet fields Go's event determines."""
    row: dict[str, Any] = {"kind": e.kind, "ts": e.ts, "m": e.m, "p": e.p, "g": e.g}
    if e.kind == "Metric":
        row["value"] = e.value if isinstance(e.value, int) else None
        row["name"] = utf8_text(e.name)
    elif e.kind in ("Label", "RangeBegin", "RangeActive", "RangeEnd"):
        row["name"] = utf8_text(e.name) or None
        row["scope"] = e.scope
        row["scope_id"] = e.scope_id
    elif e.kind in ("TaskBegin", "TaskEnd"):
        row.update(task_id=e.task, parent_task_id=e.parent, name=utf8_text(e.name) or None)
    elif e.kind in ("RegionBegin", "RegionEnd"):
        row.update(task_id=e.task, name=utf8_text(e.name) or None)
    elif e.kind == "Log":
        row.update(task_id=e.task, category=utf8_text(e.category) or None,
                   message=utf8_text(e.message) or None)
    elif e.kind == "Sync":
        row["sync_n"] = e.n
        if e.clock is not None:
            row.update(clock_trace_ns=e.clock.trace_ns, clock_mono_ns=e.clock.mono_ns,
                       clock_wall_ns=e.clock.wall_ns)
    if e.kind == "RangeEnd" and e.attrs:
        row["attrs"] = [[k, utf8_text(v) if isinstance(v, str) else v] for k, v in e.attrs]
    return row


@pytest.mark.parametrize("go_version,workload", COMBOS,
                         ids=[f"go{v}-{w}" for v, w in COMBOS])
def test_parquet_matches_go(go_version: str, workload: str, tmp_path: Path) -> None:
    path = workload_trace(go_version, workload)
    go, go_error = go_parsed(path)
    assert go_error is None, go_error
    out = tmp_path / "out"
    meta = decode_file_to_dir(path, out)
    stacks = _stacks(out)

    go_trans = [e for e in go if e.kind == "StateTransition"]
    rows = pq.read_table(out / "transitions.parquet").to_pylist()
    assert len(rows) == len(go_trans) == meta["transitions"]
    tstacks = {r["row"]: r["stack_id"]
               for r in pq.read_table(out / "transition_stacks.parquet").to_pylist()}
    for i, (r, e) in enumerate(zip(rows, go_trans, strict=True)):
        got = (r["ts"], r["resource"], r["id"], r["from_state"], r["to_state"], r["reason"],
               r["m"], r["p"], r["g"], stacks[r["stack_id"]])
        want = (e.ts, e.resource, e.rid, e.from_state, e.to_state, utf8_text(e.reason),
                e.m, e.p, e.g, _clean_frames(e.stack))
        assert got == want, f"transition row {i}: {got} != Go's {want}"
        tstack = stacks[tstacks[i]] if i in tstacks else stacks[r["stack_id"]]
        if e.tstack:
            assert tstack == _clean_frames(e.tstack), f"transition stack of row {i}"

    others = [e for e in go if e.kind != "StateTransition"]
    erows = pq.read_table(out / "events.parquet").to_pylist()
    assert len(erows) == len(others)
    go_seq = [i for i, e in enumerate(go) if e.kind != "StateTransition"]
    assert [r["seq"] for r in erows] == go_seq, "events interleave with transitions as Go's"
    for r, e in zip(erows, others, strict=True):
        want = _expected_event_row(e)
        got = {k: r[k] for k in want if k != "attrs"}
        if "attrs" in want:
            got["attrs"] = json.loads(r["attrs"])
        assert got == want, f"event seq {r['seq']}"
        assert stacks[r["stack_id"]] == _clean_frames(e.stack), f"stack of event seq {r['seq']}"
    assert meta["event_counts"] == dict(sorted(
        {k: sum(1 for e in go if e.kind == k) for k in {e.kind for e in go}}.items()))
