"""The timeline view's data: lanes by P, M or G with a level-of-detail summary
of a time window, and the details of one clicked span.

``timeline(...)`` returns plain, JSON-ready data (column-oriented: one list
per field, not one dict per shape) for the JSON API, the page and the export
CLI alike. Lanes come from :mod:`ingest.derive.lanesets`, the reduction from
:mod:`ingest.views.timeline_lod`; the answer never holds more than ``cap`` shapes
(the bucket count is lowered until it fits).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine, select

from ingest.derive.frames import TraceFrames
from ingest.derive.goroutine_lanes import goroutine_laneset, goroutine_table
from ingest.derive.lanesets import (
    CATEGORIES,
    RANGE_LANES,
    REF_SOURCES,
    SRC_INTERVAL,
    SRC_RANGE,
    SRC_RUN,
    LaneSet,
    Times,
    kind_categories,
    lane_index,
    lane_search,
)
from ingest.derive.proc_thread_lanes import m_lanes, p_lanes
from ingest.derive.range_lanes import range_lanes
from ingest.store import models
from ingest.store.coded_models import rows_by_key
from ingest.views.timeline_lod import Shapes, concat_shapes, reduce_indexed, reduce_window

I64 = npt.NDArray[np.int64]

MODES = ("p", "m", "g")
DEFAULT_PX = 1200
MAX_PX = 4000
#: Most shapes in one answer: well under 1 MB of JSON.
DEFAULT_CAP = 5000
MAX_CAP = 20000
DEFAULT_LIMIT = 60
MAX_LIMIT = 500
#: Goroutines with this many intervals or more are reduced through an index.
BIG_LANE = 4096
#: Fewest buckets per window when lowering the resolution to fit the cap.
MIN_BUCKETS = 16


class BadRequest(ValueError):
    """A parameter is out of range (the API answers 400)."""


@dataclass
class Params:
    """A timeline request, validated."""

    mode: str = "p"
    t1: int | None = None
    t2: int | None = None
    px: int = DEFAULT_PX
    offset: int | None = None
    limit: int = DEFAULT_LIMIT
    group: str | None = None
    g: int | None = None
    m: int | None = None
    p: int | None = None
    cap: int = DEFAULT_CAP


def _int(args: dict[str, str], name: str, lo: int | None = None,
         hi: int | None = None) -> int | None:
    raw = args.get(name)
    if raw is None or raw == "":
        return None
    try:
        v = int(raw)
    except ValueError:
        try:
            f = float(raw)
        except ValueError:
            raise BadRequest(f"{name} must be an integer, not {raw!r}") from None
        if not np.isfinite(f):
            raise BadRequest(f"{name} must be finite") from None
        v = int(f)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise BadRequest(f"{name} must be between {lo} and {hi}")
    return v


def parse_params(args: dict[str, str]) -> Params:
    """Params from a query string (t1/t2 absolute trace ns); raises BadRequest."""
    mode = (args.get("mode") or "p").lower()
    if mode not in MODES:
        raise BadRequest(f"mode must be one of {', '.join(MODES)}")
    p = Params(mode=mode, t1=_int(args, "t1"), t2=_int(args, "t2"),
               px=_int(args, "px", 16, MAX_PX) or DEFAULT_PX,
               offset=_int(args, "offset", 0), limit=_int(args, "limit", 1, MAX_LIMIT)
               or DEFAULT_LIMIT, group=args.get("group"), g=_int(args, "g"),
               m=_int(args, "m"), p=_int(args, "p"),
               cap=_int(args, "cap", 100, MAX_CAP) or DEFAULT_CAP)
    if p.t1 is not None and p.t2 is not None and p.t2 <= p.t1:
        raise BadRequest("t2 must be greater than t1")
    return p


@dataclass
class _Lane:
    key: str
    label: str
    type: str  # range | p | m | g | group
    id: int
    group: int = -1


@dataclass
class Batch:
    """Rows of the drawn lanes, concatenated lane by lane."""

    start: list[I64]
    end: list[I64]
    cat: list[npt.NDArray[np.int8]]
    ref: list[I64]
    lane: list[I64]
    #: (lane set, lane index in it, lane no) of indexed lanes, reduced by reduce_indexed.
    indexed: list[tuple[LaneSet, int, int]] = field(default_factory=list)
    rows: int = 0

    def add(self, lane_no: int, start: I64, end: I64, cat: npt.NDArray[np.int8],
            ref: I64) -> None:
        if len(start):
            self.start.append(start)
            self.end.append(end)
            self.cat.append(cat)
            self.ref.append(ref)
            self.lane.append(np.full(len(start), lane_no, np.int64))

    def arrays(self) -> tuple[I64, I64, npt.NDArray[np.int8], I64, I64]:
        if not self.start:
            z = np.zeros(0, np.int64)
            return z, z, np.zeros(0, np.int8), z, z
        return (np.concatenate(self.start), np.concatenate(self.end),
                np.concatenate(self.cat), np.concatenate(self.ref),
                np.concatenate(self.lane))


def window_rows(start: Times, lo: int, hi: int, t1: int, t2: int) -> tuple[int, int]:
    """Rows of one time-ordered, non-overlapping lane that may overlap [t1, t2)."""
    a = int(lane_search(start, lo, hi, t1, "right")[0])
    b = int(lane_search(start, lo, hi, t2, "left")[0])
    return max(lo, a - 1), b


def add_laneset(batch: Batch, ls: LaneSet, i: int, lane_no: int, t1: int, t2: int,
                 overlapping: bool = False) -> int:
    """Queue lane ``i`` of ``ls`` for reduction; returns its rows in the window."""
    lo, hi = int(ls.lo[i]), int(ls.hi[i])
    a, b = window_rows(ls.start, lo, hi, t1, t2)
    if overlapping:
        a = lo  # an earlier row may reach into the window
    if ls.index is not None:
        batch.indexed.append((ls, i, lane_no))
    else:
        batch.add(lane_no, ls.start[a:b], ls.end[a:b], ls.cat[a:b], ls.ref[a:b])
    return max(0, b - a)


def timeline(engine: Engine, frames: TraceFrames, params: Params) -> dict[str, Any]:
    """The lanes and level-of-detail shapes of one window of a trace."""
    t0 = time.perf_counter()
    t1 = frames.first_ts if params.t1 is None else params.t1
    t2 = frames.last_ts if params.t2 is None else params.t2
    if t2 <= t1:
        t2 = t1 + 1
    lanes: list[_Lane] = []
    batch = Batch([], [], [], [], [])
    rng = range_lanes(engine, frames)
    for i, lane_id in enumerate(rng.lanes.ids):
        kind, label = RANGE_LANES[int(lane_id)]
        batch.rows += add_laneset(batch, rng.lanes, i, len(lanes), t1, t2, overlapping=True)
        lanes.append(_Lane(kind, label, "range", -1))
    extra: dict[str, Any] = {}
    focus = -1
    if params.mode in ("p", "m"):
        ls = p_lanes(frames) if params.mode == "p" else m_lanes(frames)
        want = params.p if params.mode == "p" else params.m
        total = len(ls.ids)
        offset = params.offset or 0
        if params.offset is None and want is not None:
            pos = int(np.searchsorted(ls.ids, want))
            offset = max(0, pos - params.limit // 4) if pos < total else 0
        for i in range(offset, min(total, offset + params.limit)):
            lid = int(ls.ids[i])
            name = f"P{lid}" if params.mode == "p" else f"M{lid}"
            if want == lid:
                focus = len(lanes)
            batch.rows += add_laneset(batch, ls, i, len(lanes), t1, t2)
            lanes.append(_Lane(name.lower(), name, params.mode, lid))
    else:
        total, offset, focus, extra = _goroutine_lanes(engine, frames, params, t1, t2,
                                                       lanes, batch)
    start, end, cat, ref, lane = batch.arrays()
    rows = batch.rows

    def reduce(nb: int) -> Shapes:
        parts = [reduce_window(start, end, cat, ref, lane, t1, t2, nb)]
        for ls, i, lane_no in batch.indexed:
            parts.append(reduce_indexed(ls, [(i, lane_no)], t1, t2, nb))
        return concat_shapes(parts)

    nb = params.px
    shapes = reduce(nb)
    capped = False
    while len(shapes) > params.cap and nb > MIN_BUCKETS:
        capped = True
        nb = max(MIN_BUCKETS, int(nb * params.cap / len(shapes) * 0.9))
        shapes = reduce(nb)
    out: dict[str, Any] = {
        "trace_id": frames.trace_id, "mode": params.mode, "t1": t1, "t2": t2,
        "first_ts": frames.first_ts, "last_ts": frames.last_ts, "px": params.px,
        "buckets": nb, "bucket_ns": (t2 - t1) / nb, "categories": list(CATEGORIES),
        "kinds": {str(k): [v.resource, v.from_state, v.to_state, v.reason]
                  for k, v in frames.kinds.items()},
        "lanes": {f: [getattr(x, f) for x in lanes]
                  for f in ("key", "label", "type", "id", "group")},
        "focus": focus, "total_lanes": total, "offset": offset, "limit": params.limit,
        **extra,
        "shapes": shape_columns(frames, rng.g, shapes, t1),
        "mix": _mix(shapes),
    }
    out["stats"] = {"rows": rows, "shapes": len(shapes),
                    "merged": int(np.count_nonzero(shapes.ref < 0)), "capped": capped,
                    "ms": round((time.perf_counter() - t0) * 1000, 2)}
    # The binary searches of a whole-trace window touch pages all over the
    # lane sets (each fault maps 64 KB around it): 160-230 MB of a P or M
    # set otherwise stays in this worker until the frames close.
    frames.release()
    return out


def _goroutine_lanes(engine: Engine, frames: TraceFrames, params: Params, t1: int, t2: int,
                     lanes: list[_Lane], batch: Batch
                     ) -> tuple[int, int, int, dict[str, Any]]:
    """G lanes: goroutines alive in the window, grouped by start function, one page."""
    gt = goroutine_table(engine, frames)
    sel = (gt.alive_hi > t1) & (gt.alive_lo < t2)
    if params.group is not None:
        if params.group not in gt.names:
            raise BadRequest(f"no goroutine group {params.group!r} in this trace")
        sel &= gt.group == gt.names.index(params.group)
    focus_row = -1
    if params.g is not None:
        i = int(np.searchsorted(gt.goid, params.g))
        if i < len(gt.goid) and gt.goid[i] == params.g:
            focus_row = i
            sel[i] = True
    rows = np.flatnonzero(sel)
    order = rows[np.argsort(gt.group[rows], kind="stable")]
    counts = np.bincount(gt.group[rows], minlength=len(gt.names))
    present = np.flatnonzero(counts)
    per_group = 0
    if params.group is None and len(present) > 1:
        # Without a group filter, the first goroutines of every group: a page
        # of the biggest group alone would hide all the others.
        per_group = max(3, params.limit // len(present))
        grp_sorted = gt.group[order]
        rank = np.arange(len(order)) - np.searchsorted(grp_sorted, grp_sorted)
        order = order[(rank < per_group) | (order == focus_row)]
    total = len(order)
    offset = params.offset or 0
    if params.offset is None and focus_row >= 0:
        pos = int(np.flatnonzero(order == focus_row)[0])
        offset = max(0, pos - params.limit // 4)
    groups = [{"name": gt.names[int(gi)], "count": int(counts[gi])} for gi in present]
    page = order[offset:offset + params.limit]
    iv = frames.intervals
    kcat = kind_categories(frames)
    start_all, end_all, kind_all = iv["start_ts"], iv["end_ts"], iv["kind"]
    focus = -1
    prev_group = -1
    for r in page:
        grp = int(gt.group[r])
        if grp != prev_group:
            name = gt.names[grp] or "(unknown start function)"
            shown = (f"{int(counts[grp]):,}, first {per_group}"
                     if 0 < per_group < counts[grp] else f"{int(counts[grp]):,}")
            lanes.append(_Lane(f"group:{grp}", f"{name} ({shown})", "group", -1, grp))
            prev_group = grp
        goid = int(gt.goid[r])
        if r == focus_row:
            focus = len(lanes)
        a, b = window_rows(start_all, int(gt.lo[r]), int(gt.hi[r]), t1, t2)
        batch.rows += b - a
        if int(gt.hi[r] - gt.lo[r]) >= BIG_LANE:
            # A long-lived goroutine: reduce it from its prefix sums, not row by row.
            batch.indexed.append((goroutine_laneset(frames, goid, int(gt.lo[r]),
                                                    int(gt.hi[r])), 0, len(lanes)))
            lanes.append(_Lane(f"g{goid}", f"G{goid}", "g", goid, grp))
            continue
        batch.add(len(lanes), start_all[a:b], end_all[a:b], kcat[kind_all[a:b]],
                  np.arange(a, b, dtype=np.int64) * REF_SOURCES + SRC_INTERVAL)
        lanes.append(_Lane(f"g{goid}", f"G{goid}", "g", goid, grp))
    return total, offset, focus, {"groups": groups, "per_group": per_group}


def shape_columns(frames: TraceFrames, range_g: I64, s: Shapes, t1: int) -> dict[str, Any]:
    """Shapes as columns; times as offsets from t1 (shorter JSON)."""
    return {k: v.tolist() for k, v in shape_arrays(frames, range_g, s, t1).items()}


def shape_arrays(frames: TraceFrames, range_g: I64, s: Shapes, t1: int
                 ) -> dict[str, npt.NDArray[Any]]:
    """Shapes as numpy columns (see :func:`shape_columns`)."""
    ref = s.ref
    src = np.where(ref >= 0, ref % REF_SOURCES, -1)
    row = np.where(ref >= 0, ref // REF_SOURCES, 0)
    g = np.full(len(s), -1, np.int64)
    kind = np.full(len(s), -1, np.int64)
    iv = src == SRC_INTERVAL
    if iv.any():
        r = row[iv]
        g[iv] = np.where(r < _goroutine_rows(frames), frames.intervals["rid"][r], -1)
        kind[iv] = frames.intervals["kind"][r]
    run = src == SRC_RUN
    if run.any():
        g[run] = _run_column(frames, "g", row[run])
    rg = src == SRC_RANGE
    if rg.any():
        g[rg] = range_g[row[rg]]
    d = s.end - s.start
    return {"lane": s.lane, "s": s.start - t1, "d": d, "cat": s.cat, "n": s.n,
            "ref": ref, "g": g, "kind": kind, "cover": cover_column(s.covered, d)}


def _run_column(frames: TraceFrames, name: str, rows: I64) -> npt.NDArray[np.integer[Any]]:
    """Column ``name`` of proc runs ``rows``: read at their interval's row
    where the frames keep a run as that row (``proc_runs[name]`` would make
    the whole column: 0.1 s and 32 MB of the 200 MB trace's, each request)."""
    runs = frames.proc_runs
    at, col = runs.columns.get("row"), runs.via_row.get(name)
    if at is not None and col is not None:
        return np.asarray(col[np.asarray(at[rows], np.int64)])
    return np.asarray(runs[name][rows])


def _goroutine_rows(frames: TraceFrames) -> int:
    """Goroutine rows come first in the intervals: rows below this are theirs."""
    return int(frames.goroutines.off[-1]) if len(frames.goroutines.ids) else 0


def cover_column(covered: I64, d: I64) -> npt.NDArray[np.float64]:
    """The JSON's ``cover``: covered ns / span ns, rounded to 3 decimals and at
    least 0.001 (a shape always covers some of its span: it stays in (0, 1])."""
    if not len(d):
        return np.zeros(0)
    return np.clip(np.round(covered / np.maximum(d, 1), 3), 0.001, 1.0)


def _mix(s: Shapes) -> list[list[int] | None]:
    """Per merged shape the ns in each category, as [cat, ns, cat, ns...]."""
    out: list[list[int] | None] = [None] * len(s)
    merged = np.flatnonzero(s.n > 1)
    if not len(merged):
        return out
    rows, cols = np.nonzero(s.mix[merged])
    flat = np.column_stack([cols, s.mix[merged][rows, cols]]).ravel().tolist()
    ends = (np.cumsum(np.bincount(rows, minlength=len(merged))) * 2).tolist()
    begin = 0
    for i, end in zip(merged.tolist(), ends, strict=True):
        out[i] = flat[begin:end]
        begin = end
    return out


# --------------------------------------------------------------------------
# one span's details


def _stack(engine: Engine, trace_id: int, stack_id: int) -> list[dict[str, Any]]:
    if stack_id <= 0:
        return []
    st = models.stacks
    with engine.connect() as conn:
        rows = conn.execute(select(st.c.function, st.c.file, st.c.line)
                            .where(st.c.trace_id == trace_id, st.c.stack_id == stack_id)
                            .order_by(st.c.depth)).all()
    return [{"function": r.function, "file": r.file, "line": r.line} for r in rows]


def _interval(engine: Engine, frames: TraceFrames, row: int) -> dict[str, Any]:
    iv = frames.intervals
    k = frames.kinds.get(int(iv["kind"][row]))
    resource = k.resource if k else ""
    rid = int(iv["rid"][row])
    out: dict[str, Any] = {
        "source": "interval", "row": row, "resource": resource, "id": rid,
        "goroutine": rid if resource == "goroutine" else None,
        "state": k.to_state if k else "", "from_state": k.from_state if k else "",
        "reason": k.reason if k else "", "start_ts": int(iv["start_ts"][row]),
        "end_ts": int(iv["end_ts"][row]),
        "duration_ns": int(iv["end_ts"][row] - iv["start_ts"][row]),
        "m": int(iv["m"][row]), "p": int(iv["p"][row]), "g": int(iv["g"][row]),
        "stack_id": int(iv["stack_id"][row]),
        "stack": _stack(engine, frames.trace_id, int(iv["stack_id"][row])),
    }
    nxt = row + 1
    n_g = _goroutine_rows(frames)
    if nxt < len(iv) and int(iv["rid"][nxt]) == rid and (nxt < n_g) == (row < n_g):
        kn = frames.kinds.get(int(iv["kind"][nxt]))
        out["next"] = {"state": kn.to_state if kn else "", "reason": kn.reason if kn else "",
                       "m": int(iv["m"][nxt]), "p": int(iv["p"][nxt]),
                       "stack_id": int(iv["stack_id"][nxt]),
                       "stack": _stack(engine, frames.trace_id, int(iv["stack_id"][nxt]))}
    else:
        out["next"] = None
    return out


def span_details(engine: Engine, frames: TraceFrames, ref: int) -> dict[str, Any]:
    """What one shape (by its ``ref``) stands for: the interval, proc run or
    range, with its stack (frames innermost first) and the transition that
    ended it. Raises LookupError for an unknown ref."""
    if ref < 0:
        raise LookupError(f"ref {ref}: a merged shape has no single span")
    src, row = ref % REF_SOURCES, ref // REF_SOURCES
    if src == SRC_INTERVAL:
        if row >= len(frames.intervals):
            raise LookupError(f"no interval row {row}")
        return _interval(engine, frames, row)
    if src == SRC_RUN:
        runs = frames.proc_runs
        if row >= len(runs):
            raise LookupError(f"no proc run row {row}")
        g, st = int(runs["g"][row]), int(runs["start_ts"][row])
        out: dict[str, Any] = {
            "source": "proc_run", "row": row, "resource": "proc", "id": int(runs["p"][row]),
            "goroutine": g, "state": "Running", "start_ts": st,
            "end_ts": int(runs["end_ts"][row]),
            "duration_ns": int(runs["end_ts"][row] - st), "m": int(runs["m"][row]),
            "p": int(runs["p"][row]), "g": g}
        # The goroutine's own Running interval that began this run: its reason and
        # the stack where it stopped.
        rows = lane_index(frames).goroutine_rows(g)
        seg = frames.intervals["start_ts"][rows]
        i = int(np.searchsorted(seg, st, side="right")) - 1
        if i >= 0:
            out["interval"] = _interval(engine, frames, rows.start + i)
            out["reason"] = out["interval"]["reason"]
            out["next"] = out["interval"]["next"]
            out["stack"] = out["interval"]["stack"]
        return out
    if src == SRC_RANGE:
        rng = range_lanes(engine, frames)
        if row >= len(rng.range_id):
            raise LookupError(f"no range row {row}")
        with engine.connect() as conn:
            got = rows_by_key(conn, "ranges", frames.trace_id, [int(rng.range_id[row])])
        if not got:
            raise LookupError(f"no range row {row}")
        x = got[0]
        start = frames.first_ts if x.start_ts is None else x.start_ts
        end = frames.last_ts if x.end_ts is None else x.end_ts
        return {"source": "range", "row": row, "resource": x.scope, "id": x.scope_id,
                "goroutine": x.g if x.g >= 0 else None, "state": x.kind, "reason": x.name,
                "start_ts": start, "end_ts": end, "duration_ns": end - start,
                "start_known": x.start_ts is not None, "end_known": x.end_ts is not None,
                "m": x.m, "p": x.p, "g": x.g, "stack_id": x.stack_id,
                "stack": _stack(engine, frames.trace_id, x.stack_id), "next": None}
    raise LookupError(f"ref {ref}: unknown source")
