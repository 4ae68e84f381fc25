"""Rows from the events: ranges (GC, STW, sweep, assist), tasks, regions,
logs, metrics and the events modelled nowhere else.

Each function takes its events from :class:`ingest.load.event_split.EventParts`
(one target's kinds and columns, in decode order) and returns the table's
columns as arrays, never a Python object per event: a 200 MB trace has 6 M
region events and 3.7 M metric samples.

Metrics, logs and regions, the tables of millions of rows, are made and
handed over ``PART_ROWS`` rows at a time (their text columns coded by one
:class:`ingest.store.coded_insert.CodeBook` per column across the parts, as
the whole table's would be); the others whole.

Ranges, tasks and regions arrive as begin/end event pairs; they are paired
here (:mod:`ingest.load.pairing`). A range or region that ends without a
begin in the trace began before the trace window (start NULL); one that never
ends is open at the end (end NULL). ``RangeActive`` (a range in progress when
a generation starts) counts as a begin whose true start is unknown
(``active_at_start``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from collectors.gotrace.model import NO_TASK
from ingest.columns import Nullable
from ingest.load.event_split import OTHER_KINDS, EventParts, EventTable, Texts
from ingest.load.pairing import pair_by_goroutine, pair_nested
from ingest.load.spill_file import KeptColumns
from ingest.store.coded_insert import CodeBook, CodedText, coded_text, in_book

Arr = npt.NDArray[Any]
Columns = dict[str, Any]

#: Rows per part of the tables made in parts.
PART_ROWS = 1 << 21

__all__ = ["OTHER_KINDS", "PART_ROWS", "logs", "metrics", "other_events", "range_kind", "ranges",
           "regions", "tasks"]


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


def task_ids(values: Arr, null: Arr | None = None) -> Nullable:
    """Go task ids as signed 64-bit SQL values (above 2**63 they wrap); NoTask
    and missing ones are NULL."""
    v = values.astype(np.uint64)
    gone = v == np.uint64(NO_TASK)
    if null is not None:
        gone |= null
    return Nullable(v.view(np.int64), gone)


def _canon(t: Texts, null_as: str) -> Arr:
    """Codes under which NULL and ``null_as`` are one value (keys for pairing),
    in the codes' own (narrowest) type."""
    values = [null_as if v is None else v for v in t.values]
    _, first, inverse = np.unique(np.array(values, dtype=object), return_index=True,
                                  return_inverse=True)
    return first[inverse].astype(t.codes.dtype)[t.codes]


def _coded(t: Texts, null: str | None = None, rows: Arr | None = None) -> CodedText:
    """The column as objects (NULL as ``null``) that keep their codes: the
    store codes them without hashing a string a row."""
    return coded_text(t.codes if rows is None else t.codes[rows], [null, *t.values[1:]])


def _kinds(t: EventTable) -> list[str | None]:
    return t.text("kind").values


def _is(t: EventTable, *kinds: str) -> Arr:
    # A lookup by code: np.isin sorts millions of codes (5x slower).
    wanted = np.array([k in kinds for k in _kinds(t)], dtype=bool)
    return wanted[t.text("kind").codes]


def _at(values: Arr, idx: Arr, missing: Arr) -> Nullable:
    """values[idx] where idx >= 0, NULL where ``missing``."""
    out = values[np.maximum(idx, 0)]
    out[missing] = 0  # in place: a big table's column is never made twice
    return Nullable(out, missing)


def ranges(parts: EventParts) -> Columns:
    """Paired ranges: one row per begin (or active) with its matching end."""
    t = parts.table("ranges")
    begin = ~_is(t, "RangeEnd")
    name = _canon(t.text("name"), "")
    scope = _canon(t.text("scope"), "global")
    sid = t.num("scope_id")
    scope_id = np.where(sid.nulls(), -1, sid.values).astype(np.int64)
    pairs = pair_nested([name, scope, scope_id], begin)
    r, e, begun = pairs.row_event, pairs.end_event, pairs.begun
    ts = t.num("ts").values
    closed = e >= 0
    end_idx = np.where(closed, e, np.where(begun, -1, r))
    names = _coded(t.text("name"), "", r)
    attrs = t.text("attrs")
    attr_codes = attrs.codes[np.maximum(end_idx, 0)]
    attr_codes[end_idx < 0] = 0  # NULL
    return {
        "id": np.arange(len(r), dtype=np.int64), "name": names,
        "kind": coded_text(t.text("name").codes[r],
                           [range_kind(v or "") for v in names.values]),
        "scope": _coded(t.text("scope"), "global", r), "scope_id": scope_id[r],
        "start_ts": Nullable(np.where(begun, ts[r], 0), ~begun),
        "end_ts": _at(ts, end_idx, end_idx < 0),
        "active_at_start": _is(t, "RangeActive")[r].tolist(),
        "m": t.num("m").values[r], "p": t.num("p").values[r], "g": t.num("g").values[r],
        "stack_id": t.num("stack_id").values[r],
        "end_attrs": coded_text(attr_codes, [None, *attrs.values[1:]])}


def regions(parts: EventParts) -> Iterator[Columns]:
    """Regions paired per goroutine and name, last opened first closed (they
    nest), ``PART_ROWS`` rows at a time. A region never spans goroutines, so
    a big trace's are paired a range of goroutines at a time, and only the
    columns the pairing needs are read back for it (the rest after); each
    column is made whole and kept aside (spilled with the events) until the
    parts are read out of them."""
    t = parts.table("regions", ("kind", "g", "name"))
    begin = _is(t, "RegionBegin")
    g = t.num("g").values
    name = t.text("name")
    del t
    pairs = pair_by_goroutine(g, _canon(name, ""), begin)
    del begin
    # The row indices stay int32 where they fit: as intp numpy gathers by them
    # faster, but they held ~100 MB more of the 1 GB trace's peak, which is here.
    r, e, begun = pairs.row_event, pairs.end_event, pairs.begun
    del pairs
    # A row's end event: its end, none (open at the end: -1), or the row's
    # own event when it is an end with nothing open; made in place.
    end_idx = e
    end_idx[(e < 0) & ~begun] = r[(e < 0) & ~begun]
    del e
    kept = KeptColumns(parts.spill_dir, "regions-")
    try:
        kept.keep("name", name.codes[r])
        names = ["", *name.values[1:]]
        kept.keep("g", g[r])
        del g, name
        # Each event column taken at the rows' events a chunk of events at a
        # time (EventParts.gather): the 1 GB trace's peak is here, and its
        # regions' times alone are 310 MB. The rows are in event order.
        ascending = bool(np.all(r[1:] >= r[:-1]))
        start = parts.gather("regions", "ts", r, ascending=ascending).values
        start[~begun] = 0  # an end with nothing open: begun before the trace
        kept.keep("start_ts", start)
        kept.keep("start_null", ~begun)
        del start, begun
        missing = end_idx < 0
        np.maximum(end_idx, 0, out=end_idx)
        end = parts.gather("regions", "ts", end_idx).values
        parts.forget("regions", "ts")
        del end_idx
        end[missing] = 0
        kept.keep("end_ts", end)
        kept.keep("end_null", missing)
        del end, missing
        tid = parts.gather("regions", "task_id", r, ascending=ascending)
        parts.forget("regions", "task_id")
        task = task_ids(tid.values, tid.null)
        del tid
        kept.keep("task_id", task.values)
        kept.keep("task_null", task.null)
        del task
        kept.keep("stack_id", parts.gather("regions", "stack_id", r, ascending=ascending).values)
        parts.forget("regions", "stack_id")
        n = len(r)
        del r
        book = CodeBook()
        for lo in range(0, max(n, 1), PART_ROWS):
            hi = min(lo + PART_ROWS, n)
            yield {
                "id": np.arange(lo, hi, dtype=np.int64),
                "task_id": Nullable(kept.rows("task_id", lo, hi), kept.rows("task_null", lo, hi)),
                "name": in_book(coded_text(kept.rows("name", lo, hi), names), book),
                "g": kept.rows("g", lo, hi),
                "start_ts": Nullable(kept.rows("start_ts", lo, hi),
                                     kept.rows("start_null", lo, hi)),
                "end_ts": Nullable(kept.rows("end_ts", lo, hi), kept.rows("end_null", lo, hi)),
                "stack_id": kept.rows("stack_id", lo, hi)}
    finally:
        kept.close()


def tasks(parts: EventParts) -> Columns:
    """One row per task id, in order of its first event: the (last) begin's
    time and goroutine, the (last) end's, the name the begin gives (else the
    end's) and the parent the begin gives (else the first event's). The
    events' columns are read back one at a time, each gathered into the
    rows' columns and dropped (a 1 GB trace has 6 M task events)."""
    col = parts.table("tasks", ("task_id",)).num("task_id")
    tid = task_ids(col.values, col.nulls())
    del col
    known = np.flatnonzero(~tid.null)
    ids = tid.values[known]
    del tid
    begin = _is(parts.table("tasks", ("kind",)), "TaskBegin")[known]
    uniq, first_at, slot = np.unique(ids, return_index=True, return_inverse=True)
    if (np.bincount(slot[begin], minlength=len(uniq)).max(initial=0) > 1
            or np.bincount(slot[~begin], minlength=len(uniq)).max(initial=0) > 1):
        t = parts.table("tasks", ("ts", "g", "name", "parent_task_id"))
        parent = task_ids(t.num("parent_task_id").values, t.num("parent_task_id").nulls())
        return _tasks_in_order(ids, begin, t.num("ts").values[known],
                               t.num("g").values[known], t.text("name").objects()[known],
                               parent.values[known], parent.null[known])
    by_row = np.argsort(first_at, kind="stable")  # tasks in order of first appearance
    first = first_at[by_row]
    del first_at
    b = np.full(len(uniq), -1, dtype=np.int64)
    e = np.full(len(uniq), -1, dtype=np.int64)
    b[slot[begin]] = np.flatnonzero(begin)
    e[slot[~begin]] = np.flatnonzero(~begin)
    del uniq, slot, begin
    b, e = b[by_row], e[by_row]
    del by_row
    has_b, has_e = b >= 0, e >= 0
    bi, ei = np.maximum(b, 0), np.maximum(e, 0)
    del b, e
    out: Columns = {"task_id": ids[first]}
    del ids
    col = parts.table("tasks", ("parent_task_id",)).num("parent_task_id")
    parent = task_ids(col.values, col.nulls())
    del col
    src = np.where(has_b, bi, first)
    del first
    pv, pn = parent.values[known], parent.null[known]
    del parent
    out["parent_id"] = Nullable(pv[src], pn[src])
    del pv, pn, src
    # The names as codes (code 0 is NULL): whether a name is empty is asked
    # of the few distinct values, not of each task.
    text = parts.table("tasks", ("name",)).text("name")
    name_values = [None, *text.values[1:]]
    codes = text.codes[known]
    b_code = codes[bi]
    named = np.array([bool(v) for v in name_values], dtype=bool)
    out["name"] = coded_text(np.where(has_b & named[b_code], b_code,
                                      np.where(has_e, codes[ei], b_code)), name_values)
    del text, codes, b_code
    for column, start, end in (("ts", "start_ts", "end_ts"), ("g", "start_g", "end_g")):
        values = parts.table("tasks", (column,)).num(column).values[known]
        out[start] = Nullable(np.where(has_b, values[bi], 0), ~has_b)
        out[end] = Nullable(np.where(has_e, values[ei], 0), ~has_e)
        del values
    return out


def _tasks_in_order(ids: Arr, begin: Arr, ts: Arr, g: Arr, names: Arr, pv: Arr,
                    pn: Arr) -> Columns:
    """:func:`tasks` event by event, for a trace that begins or ends a task id
    twice (then the later event wins, as the walk gives)."""
    by_id: dict[int, dict[str, Any]] = {}
    for i, t in enumerate(ids.tolist()):
        parent = None if pn[i] else int(pv[i])
        row = by_id.setdefault(t, {"task_id": t, "parent_id": parent, "name": names[i],
                                   "start_ts": None, "end_ts": None, "start_g": None,
                                   "end_g": None})
        if begin[i]:
            row.update(start_ts=int(ts[i]), start_g=int(g[i]),
                       name=names[i] or row["name"], parent_id=parent)
        else:
            row.update(end_ts=int(ts[i]), end_g=int(g[i]))
            row["name"] = row["name"] or names[i]
    keys = ("task_id", "parent_id", "name", "start_ts", "end_ts", "start_g", "end_g")
    return {k: [row[k] for row in by_id.values()] for k in keys}


def logs(parts: EventParts) -> Iterator[Columns]:
    """The log events, ``PART_ROWS`` at a time."""
    books = {"category": CodeBook(), "message": CodeBook()}
    for t in parts.slices("logs", PART_ROWS):
        tid = t.num("task_id")
        yield {"seq": t.num("seq").values, "ts": t.num("ts").values, "g": t.num("g").values,
               "task_id": task_ids(tid.values, tid.nulls()),
               "category": in_book(_coded(t.text("category"), ""), books["category"]),
               "message": in_book(_coded(t.text("message"), ""), books["message"]),
               "stack_id": t.num("stack_id").values}


def metrics(parts: EventParts) -> Iterator[Columns]:
    """Metric samples (a trace has one per metric per GC cycle and
    generation), ``PART_ROWS`` at a time."""
    books = {"name": CodeBook(), "value_str": CodeBook()}
    for t in parts.slices("metrics", PART_ROWS):
        value = t.num("value")
        yield {
            "seq": t.num("seq").values, "ts": t.num("ts").values,
            "name": in_book(_coded(t.text("name"), ""), books["name"]),
            # Go's uint64 values as signed 64-bit SQL integers (above 2**63 they wrap).
            "value": Nullable(value.values.astype(np.uint64).view(np.int64), value.nulls()),
            "value_str": in_book(_coded(t.text("value_str")), books["value_str"])}


def other_events(parts: EventParts) -> Columns:
    t = parts.table("other_events")
    out: Columns = {}
    for name, col in t.cols.items():
        if isinstance(col, Texts):
            out[name] = col.objects()
        elif col.null is not None:
            out[name] = Nullable(col.values.astype(np.int64), col.null)
        else:
            out[name] = col.values
    return out
