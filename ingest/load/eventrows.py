"""Rows from events.parquet: ranges (GC, STW, sweep, assist), tasks, regions,
logs, metrics and the events modelled nowhere else.

Ranges, tasks and regions arrive as begin/end event pairs; they are paired
here. A range or region that ends without a begin in the trace began before
the trace window (start NULL); one that never ends is open at the end (end
NULL). ``RangeActive`` (a range in progress when a generation starts) counts
as a begin whose true start is unknown (``active_at_start``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from collectors.gotrace.model import NO_TASK
from ingest.columns import Nullable

Columns = dict[str, list[Any]]

#: Kinds stored in other_events (the rest have tables of their own).
OTHER_KINDS = ("Sync", "Label", "StackSample", "Experimental")


def task_id(v: int | None) -> int | None:
    """A Go task id as a signed 64-bit SQL value; NoTask is NULL."""
    if v is None or v == NO_TASK:
        return None
    return v - (1 << 64) if v >= 1 << 63 else v


def range_kind(name: str) -> str:
    """gc, stw, sweep, assist or other, from Go's range name."""
    low = name.lower()
    if low.startswith("stop-the-world"):
        return "stw"
    if "sweep" in low:
        return "sweep"
    if "assist" in low:
        return "assist"
    if low.startswith("gc"):
        return "gc"
    return "other"


def _rows(events: pa.Table, kinds: tuple[str, ...], cols: list[str]) -> dict[str, list[Any]]:
    mask = pc.is_in(events.column("kind"), value_set=pa.array(kinds))
    sub = events.filter(mask).select(cols)
    return {c: sub.column(c).to_pylist() for c in cols}


def metrics(events: pa.Table) -> dict[str, Any]:
    """Metric samples as arrays: a trace has one per metric per GC cycle and
    generation (106 k in the 20 MB benchmark trace), so not Python lists
    (their objects cost ~50 MB of the load's peak)."""
    mask = pc.equal(events.column("kind"), "Metric")
    sub = events.filter(mask).select(["seq", "ts", "name", "value", "value_str"])
    value = sub.column("value")
    null = value.is_null().to_numpy(zero_copy_only=False)
    # Go's uint64 values as signed 64-bit SQL integers (above 2**63 they wrap).
    wrapped = value.fill_null(0).to_numpy().astype(np.uint64).view(np.int64)
    names = sub.column("name").fill_null("").combine_chunks().dictionary_encode()
    return {
        "seq": sub.column("seq").to_numpy(), "ts": sub.column("ts").to_numpy(),
        "name": np.array(names.dictionary.to_pylist() or [""], dtype=object)[
            names.indices.to_numpy()],
        "value": Nullable(wrapped, null),
        "value_str": sub.column("value_str").to_pylist()}


def logs(events: pa.Table) -> Columns:
    r = _rows(events, ("Log",), ["seq", "ts", "g", "task_id", "category", "message",
                                 "stack_id"])
    r["task_id"] = [task_id(v) for v in r["task_id"]]
    r["category"] = [v or "" for v in r["category"]]
    r["message"] = [v or "" for v in r["message"]]
    return r


def other_events(events: pa.Table) -> Columns:
    cols = ["seq", "kind", "ts", "m", "p", "g", "stack_id", "name", "scope", "scope_id",
            "attrs", "sync_n", "clock_trace_ns", "clock_mono_ns", "clock_wall_ns"]
    return _rows(events, OTHER_KINDS, cols)


def ranges(events: pa.Table) -> Columns:
    """Paired ranges: one row per begin (or active) with its matching end."""
    r = _rows(events, ("RangeBegin", "RangeActive", "RangeEnd"),
              ["kind", "ts", "m", "p", "g", "stack_id", "name", "scope", "scope_id", "attrs"])
    out: Columns = {k: [] for k in ("id", "name", "kind", "scope", "scope_id", "start_ts",
                                    "end_ts", "active_at_start", "m", "p", "g", "stack_id",
                                    "end_attrs")}
    open_: dict[tuple[str, str, int], list[int]] = defaultdict(list)
    for kind, ts, m, p, g, stack, name, scope, sid, attrs in zip(*r.values(), strict=True):
        name = name or ""
        scope = scope or "global"
        sid = -1 if sid is None else sid
        key = (name, scope, sid)
        if kind == "RangeEnd" and open_[key]:
            i = open_[key].pop()
            out["end_ts"][i] = ts
            out["end_attrs"][i] = attrs
            continue
        i = len(out["id"])
        begun = kind != "RangeEnd"
        for col, val in (("id", i), ("name", name), ("kind", range_kind(name)),
                         ("scope", scope), ("scope_id", sid),
                         ("start_ts", ts if begun else None),
                         ("end_ts", None if begun else ts),
                         ("active_at_start", kind == "RangeActive"), ("m", m), ("p", p),
                         ("g", g), ("stack_id", stack), ("end_attrs", None if begun else attrs)):
            out[col].append(val)
        if begun:
            open_[key].append(i)
    return out


def tasks(events: pa.Table) -> Columns:
    r = _rows(events, ("TaskBegin", "TaskEnd"), ["kind", "ts", "g", "name", "task_id",
                                                 "parent_task_id"])
    by_id: dict[int | None, dict[str, Any]] = {}
    for kind, ts, g, name, tid, parent in zip(*r.values(), strict=True):
        t = task_id(tid)
        row = by_id.setdefault(t, {"task_id": t, "parent_id": task_id(parent), "name": name,
                                   "start_ts": None, "end_ts": None, "start_g": None,
                                   "end_g": None})
        if kind == "TaskBegin":
            row.update(start_ts=ts, start_g=g, name=name or row["name"],
                       parent_id=task_id(parent))
        else:
            row.update(end_ts=ts, end_g=g)
            row["name"] = row["name"] or name
    rows = [v for k, v in by_id.items() if k is not None]
    keys = ("task_id", "parent_id", "name", "start_ts", "end_ts", "start_g", "end_g")
    return {k: [row[k] for row in rows] for k in keys}


def regions(events: pa.Table) -> Columns:
    """Regions paired per goroutine, last opened first closed (they nest)."""
    r = _rows(events, ("RegionBegin", "RegionEnd"), ["kind", "ts", "g", "name", "task_id",
                                                     "stack_id"])
    out: Columns = {k: [] for k in ("id", "task_id", "name", "g", "start_ts", "end_ts",
                                    "stack_id")}
    open_: dict[tuple[int, str], list[int]] = defaultdict(list)
    for kind, ts, g, name, tid, stack in zip(*r.values(), strict=True):
        name = name or ""
        key = (g, name)
        if kind == "RegionEnd" and open_[key]:
            out["end_ts"][open_[key].pop()] = ts
            continue
        i = len(out["id"])
        begun = kind == "RegionBegin"
        for col, val in (("id", i), ("task_id", task_id(tid)), ("name", name), ("g", g),
                         ("start_ts", ts if begun else None),
                         ("end_ts", None if begun else ts), ("stack_id", stack)):
            out[col].append(val)
        if begun:
            open_[key].append(i)
    return out
