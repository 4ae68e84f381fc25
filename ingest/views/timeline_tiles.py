"""Timeline tiles: the level-of-detail summary cut into fixed tiles that a
browser can cache, and the list of every lane of a mode.

A *level* ``L`` cuts the trace ``[first_ts, last_ts)`` into ``2**L`` tiles of
equal span (integer edges: tile ``i`` is ``[first + i*T // 2**L, first +
(i+1)*T // 2**L)``); a tile is the level of detail of its span at
:data:`TILE_BUCKETS` buckets (:mod:`ingest.views.timeline_lod`, the same
shapes, ``cover`` and ``mix`` as the window API) for a range of lanes of the
mode's lane list. The browser picks the level whose bucket is at most a pixel,
so a view needs two to four tiles per block of lanes, and the tiles of a level
never change: they are cached by URL in the browser and zooming out or back
finds them there.

The lane list (:func:`lane_list`) has every lane of a mode in the order drawn:
the GC/STW/sweep/assist lanes, then every P, every M, or every goroutine grouped
by start function (groups with most goroutines first, each with a header lane;
goroutines by id). Lanes are addressed by their index in that list, so the
browser asks for the ranges of lanes it shows (virtual scrolling).

A tile travels as a small binary body (:func:`encode_tile`): little-endian
typed columns behind a JSON header, which the browser reads with typed-array
views and no parsing per shape (docs/timeline.md, "Tiles", has the measures).
"""

from __future__ import annotations

import json
import struct
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine

from ingest.derive.cache import cached
from ingest.derive.frames import TraceFrames
from ingest.derive.goroutine_lanes import goroutine_laneset, goroutine_table
from ingest.derive.lanesets import (
    CATEGORIES,
    RANGE_LANES,
    REF_SOURCES,
    SRC_INTERVAL,
    kind_categories,
)
from ingest.derive.proc_thread_lanes import m_lanes, p_lanes
from ingest.derive.range_lanes import range_lanes
from ingest.views.timeline import (
    BIG_LANE,
    MODES,
    BadRequest,
    Batch,
    add_laneset,
    shape_arrays,
    window_rows,
)
from ingest.views.timeline_lod import Shapes, concat_shapes, reduce_indexed, reduce_window

I64 = npt.NDArray[np.int64]

#: Buckets per tile: a tile drawn at its own level is 512 to 1024 pixels wide
#: (the browser picks the coarsest level whose bucket is at most a pixel).
TILE_BUCKETS = 512
#: Most lanes in one tile request (the browser asks per block of 64).
MAX_TILE_LANES = 256
MAX_LANES_PAGE = 5000
#: Lane kinds in :class:`LaneList`.
LANE_RANGE, LANE_PROC, LANE_GROUP, LANE_G = 0, 1, 2, 3
TYPE_NAMES = {LANE_RANGE: "range", LANE_GROUP: "group", LANE_G: "g"}
MAGIC = b"GMPTILE1"


@dataclass
class LaneList:
    """Every lane of one mode, in drawing order: its kind and what it reads
    (range lane number, P/M lane set index, group number, goroutine table row)."""

    mode: str
    kind: npt.NDArray[np.int8]
    ref: I64
    ids: I64  # P, M or goroutine id; -1 for ranges and headers
    groups: list[dict[str, Any]]  # name, count, lane (its header's index)

    def __len__(self) -> int:
        return len(self.kind)


def lane_list(engine: Engine, frames: TraceFrames, mode: str,
              group: str | None = None) -> LaneList:
    """The lanes of ``mode`` (cached per trace, mode and group filter)."""
    if mode not in MODES:
        raise BadRequest(f"mode must be one of {', '.join(MODES)}")
    return cached(frames, f"timeline_lanes:{mode}:{group}",
                  lambda: _build_lanes(engine, frames, mode, group))


def _build_lanes(engine: Engine, frames: TraceFrames, mode: str,
                 group: str | None) -> LaneList:
    rng = range_lanes(engine, frames)
    n_rng = len(rng.lanes.ids)
    kind = [np.full(n_rng, LANE_RANGE, np.int8)]
    ref = [np.arange(n_rng, dtype=np.int64)]
    ids = [np.full(n_rng, -1, np.int64)]
    groups: list[dict[str, Any]] = []
    if mode in ("p", "m"):
        ls = p_lanes(frames) if mode == "p" else m_lanes(frames)
        n = len(ls.ids)
        kind.append(np.full(n, LANE_PROC, np.int8))
        ref.append(np.arange(n, dtype=np.int64))
        ids.append(np.asarray(ls.ids, np.int64))
    else:
        gt = goroutine_table(engine, frames)
        rows = np.arange(len(gt.goid), dtype=np.int64)
        if group is not None:
            if group not in gt.names:
                raise BadRequest(f"no goroutine group {group!r} in this trace")
            rows = rows[gt.group == gt.names.index(group)]
        # Groups with most goroutines first (then by the table's order), ids ascending.
        sizes = np.bincount(np.asarray(gt.group[rows], np.int64), minlength=len(gt.names))
        rank = np.empty(len(sizes), np.int64)
        rank[np.lexsort((np.arange(len(sizes)), -sizes))] = np.arange(len(sizes))
        order = rows[np.argsort(rank[gt.group[rows]], kind="stable")]
        grp = rank[gt.group[order]]
        present, first, counts = np.unique(grp, return_index=True, return_counts=True)
        by_rank = np.argsort(rank)
        # One header lane before each group's goroutines.
        pos = n_rng + np.arange(len(order)) + np.searchsorted(present, grp, side="right")
        n = len(order) + len(present)
        k = np.full(n, LANE_GROUP, np.int8)
        r = np.zeros(n, np.int64)
        i = np.full(n, -1, np.int64)
        head = n_rng + first + np.arange(len(present))
        k[pos - n_rng] = LANE_G
        r[pos - n_rng] = order
        i[pos - n_rng] = gt.goid[order]
        r[head - n_rng] = by_rank[present]
        kind.append(k)
        ref.append(r)
        ids.append(i)
        groups = [{"name": gt.names[int(by_rank[g])], "count": int(c), "lane": int(h)}
                  for g, c, h in zip(present, counts, head, strict=True)]
    return LaneList(mode, np.concatenate(kind), np.concatenate(ref), np.concatenate(ids),
                    groups)


def _lane_fields(ll: LaneList, a: int, b: int) -> dict[str, list[Any]]:
    kinds, refs, ids = ll.kind[a:b].tolist(), ll.ref[a:b].tolist(), ll.ids[a:b].tolist()
    names = {g["lane"]: g for g in ll.groups}
    key, label, typ, gr = [], [], [], []
    for n, (k, r, i) in enumerate(zip(kinds, refs, ids, strict=True)):
        if k == LANE_RANGE:
            rk, rl = RANGE_LANES[r]
            key.append(rk)
            label.append(rl)
        elif k == LANE_PROC:
            key.append(f"{ll.mode}{i}")
            label.append(f"{ll.mode.upper()}{i}")
        elif k == LANE_GROUP:
            g = names[a + n]
            key.append(f"group:{r}")
            label.append(f"{g['name'] or '(unknown start function)'} ({g['count']:,})")
        else:
            key.append(f"g{i}")
            label.append(f"G{i}")
        typ.append(TYPE_NAMES.get(k, ll.mode))
        gr.append(r if k == LANE_GROUP else -1)
    return {"key": key, "label": label, "type": typ, "id": ids, "group": gr}


def lanes_page(engine: Engine, frames: TraceFrames, args: dict[str, str]) -> dict[str, Any]:
    """``offset``..``offset + limit`` of the lane list of ``mode`` (and
    ``group``), the total, the groups, and the lane of a focused ``g``/``m``/``p``."""
    mode = (args.get("mode") or "p").lower()
    ll = lane_list(engine, frames, mode, args.get("group") or None)
    offset = _arg(args, "offset", 0, 0, 1 << 40)
    limit = _arg(args, "limit", 500, 1, MAX_LANES_PAGE)
    focus = -1
    want = args.get(mode) if mode in ("g", "m", "p") else None
    if want not in (None, ""):
        try:
            hit = np.flatnonzero((ll.ids == int(str(want))) & (ll.kind != LANE_RANGE)
                                 & (ll.kind != LANE_GROUP))
        except ValueError:
            raise BadRequest(f"{mode} must be an integer") from None
        focus = int(hit[0]) if len(hit) else -1
    b = min(len(ll), offset + limit)
    return {"trace_id": frames.trace_id, "mode": mode, "group": args.get("group") or None,
            "first_ts": frames.first_ts, "last_ts": frames.last_ts,
            "total": len(ll), "offset": offset,
            "lanes": _lane_fields(ll, offset, max(offset, b)),
            "groups": ll.groups, "focus": focus,
            "categories": list(CATEGORIES),
            "kinds": {str(k): [v.resource, v.from_state, v.to_state, v.reason]
                      for k, v in frames.kinds.items()},
            "tile_buckets": TILE_BUCKETS, "max_level": max_level(frames),
            "max_tile_lanes": MAX_TILE_LANES}


def _arg(args: dict[str, str], name: str, default: int, lo: int, hi: int) -> int:
    raw = args.get(name)
    if raw in (None, ""):
        return default
    try:
        v = int(str(raw))
    except ValueError:
        raise BadRequest(f"{name} must be an integer, not {raw!r}") from None
    if not lo <= v <= hi:
        raise BadRequest(f"{name} must be between {lo} and {hi}")
    return v


def max_level(frames: TraceFrames) -> int:
    """The finest level: its tiles still span at least a bucket's worth of ns each."""
    span = max(1, frames.last_ts - frames.first_ts)
    level = 0
    while span >> (level + 1) >= TILE_BUCKETS:
        level += 1
    return level


def tile_span(frames: TraceFrames, level: int, index: int) -> tuple[int, int]:
    """Tile ``index`` of ``level``: ``[t1, t2)`` in trace ns."""
    span = frames.last_ts - frames.first_ts
    return (frames.first_ts + (index * span >> level),
            frames.first_ts + ((index + 1) * span >> level))


def tile(engine: Engine, frames: TraceFrames, args: dict[str, str]) -> dict[str, Any]:
    """One tile: header fields and numpy columns of the shapes of lanes
    ``lanes=a-b`` (b exclusive) over tile ``index`` of ``level``."""
    t0 = time.perf_counter()
    mode = (args.get("mode") or "p").lower()
    ll = lane_list(engine, frames, mode, args.get("group") or None)
    level = _arg(args, "level", 0, 0, max_level(frames))
    index = _arg(args, "index", 0, 0, (1 << level) - 1)
    raw = args.get("lanes") or f"0-{min(len(ll), MAX_TILE_LANES)}"
    try:
        a, b = (int(x) for x in raw.split("-", 1))
    except ValueError:
        raise BadRequest(f"lanes must be FIRST-END (lane indexes), not {raw!r}") from None
    if not 0 <= a <= b or b - a > MAX_TILE_LANES:
        raise BadRequest(f"lanes must be FIRST-END with 0 <= FIRST <= END, "
                         f"at most {MAX_TILE_LANES} lanes")
    b = min(b, len(ll))
    a = min(a, b)
    t1, t2 = tile_span(frames, level, index)
    shapes, rows = _reduce_lanes(engine, frames, ll, a, b, t1, t2)
    rng = range_lanes(engine, frames)
    cols = shape_arrays(frames, rng.g, shapes, t1)
    mix_off, mix_cat, mix_ns = _mix_columns(shapes)
    out: dict[str, Any] = {
        "trace_id": frames.trace_id, "mode": mode, "level": level, "index": index,
        "t1": t1, "t2": t2, "r1": t1 - frames.first_ts, "r2": t2 - frames.first_ts,
        "buckets": TILE_BUCKETS, "lanes": [a, b],
        "columns": {**cols, "mix_off": mix_off, "mix_cat": mix_cat, "mix_ns": mix_ns},
        "marks": _marks(engine, frames, ll, a, b, t1, t2) if mode == "m" else [],
        "stats": {"rows": rows, "shapes": len(shapes)},
    }
    out["stats"]["ms"] = round((time.perf_counter() - t0) * 1000, 2)
    frames.release()
    return out


def _reduce_lanes(engine: Engine, frames: TraceFrames, ll: LaneList, a: int, b: int,
                  t1: int, t2: int) -> tuple[Shapes, int]:
    """The level of detail of lanes ``a:b`` of ``ll`` over ``[t1, t2)``."""
    batch = Batch([], [], [], [], [])
    kinds, refs = ll.kind[a:b], ll.ref[a:b]
    if (kinds == LANE_RANGE).any():
        rng = range_lanes(engine, frames).lanes
        for n in np.flatnonzero(kinds == LANE_RANGE).tolist():
            batch.rows += add_laneset(batch, rng, int(refs[n]), a + n, t1, t2,
                                      overlapping=True)
    if (kinds == LANE_PROC).any():
        ls = p_lanes(frames) if ll.mode == "p" else m_lanes(frames)
        for n in np.flatnonzero(kinds == LANE_PROC).tolist():
            batch.rows += add_laneset(batch, ls, int(refs[n]), a + n, t1, t2)
    if (kinds == LANE_G).any():
        gt = goroutine_table(engine, frames)
        iv = frames.intervals
        kcat = kind_categories(frames)
        start_all, end_all, kind_all = iv["start_ts"], iv["end_ts"], iv["kind"]
        for n in np.flatnonzero(kinds == LANE_G).tolist():
            r = int(refs[n])
            lo, hi = int(gt.lo[r]), int(gt.hi[r])
            if int(gt.alive_hi[r]) <= t1 or int(gt.alive_lo[r]) >= t2:
                continue
            s, e = window_rows(start_all, lo, hi, t1, t2)
            batch.rows += max(0, e - s)
            if hi - lo >= BIG_LANE:
                batch.indexed.append((goroutine_laneset(frames, int(gt.goid[r]), lo, hi), 0,
                                      a + n))
                continue
            batch.add(a + n, start_all[s:e], end_all[s:e], kcat[kind_all[s:e]],
                      np.arange(s, e, dtype=np.int64) * REF_SOURCES + SRC_INTERVAL)
    start, end, cat, ref, lane = batch.arrays()
    parts = [reduce_window(start, end, cat, ref, lane, t1, t2, TILE_BUCKETS)]
    for ls_, i, lane_no in batch.indexed:
        parts.append(reduce_indexed(ls_, [(i, lane_no)], t1, t2, TILE_BUCKETS))
    return concat_shapes(parts), batch.rows


def _mix_columns(s: Shapes) -> tuple[I64, npt.NDArray[np.uint8], npt.NDArray[np.float64]]:
    """The mix of merged shapes as flat columns: shape ``i``'s categories and
    their ns are ``mix_cat/mix_ns[mix_off[i]:mix_off[i + 1]]`` (empty for a
    single interval, whose one category is ``cat``)."""
    mix = np.where((s.n > 1)[:, None], s.mix, 0) if len(s) else s.mix
    rows, cols = np.nonzero(mix)
    off = np.zeros(len(s) + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=len(s)), out=off[1:])
    return off, cols.astype(np.uint8), mix[rows, cols].astype(np.float64)


def _marks(engine: Engine, frames: TraceFrames, ll: LaneList, a: int, b: int, t1: int,
           t2: int) -> list[dict[str, Any]]:
    """OS marks (a poller recording's calls) on the M lanes ``a:b``: the M lanes'
    existing marks, with their lane index and ``s`` (ns from the tile's t1)."""
    from ingest.views.poller import timeline_marks

    got = timeline_marks(engine, frames.trace_id, t1, t2)
    if not got or not got["marks"]:
        return []
    lane_of = {int(i): a + n for n, (i, k) in enumerate(zip(ll.ids[a:b].tolist(),
                                                             ll.kind[a:b].tolist(),
                                                             strict=True))
               if k == LANE_PROC}
    return [{**mk, "lane": lane_of[mk["m"]], "s": mk["ts"] - t1}
            for mk in got["marks"] if mk["m"] in lane_of]


#: Column types in a binary tile (numpy dtype, the name the browser maps to a
#: typed array).
_COLUMN_TYPES: dict[str, tuple[str, str]] = {
    "lane": ("<i4", "i32"), "s": ("<f8", "f64"), "d": ("<f8", "f64"), "cat": ("u1", "u8"),
    "n": ("<i4", "i32"), "ref": ("<f8", "f64"), "g": ("<i4", "i32"), "kind": ("<i4", "i32"),
    "cover": ("<f4", "f32"), "mix_off": ("<i4", "i32"), "mix_cat": ("u1", "u8"),
    "mix_ns": ("<f8", "f64"),
}


def encode_tile(t: dict[str, Any]) -> bytes:
    """A tile as bytes: ``GMPTILE1``, the header's length (u32 LE), the JSON
    header (padded with spaces to 8 bytes), then each column in the header's
    ``columns`` order, little-endian, each padded to 8 bytes."""
    cols: list[bytes] = []
    spec: list[list[Any]] = []
    for name, arr in t["columns"].items():
        dt, js = _COLUMN_TYPES[name]
        raw = np.ascontiguousarray(arr, dtype=dt).tobytes()
        spec.append([name, js, len(arr)])
        cols.append(raw + b"\0" * (-len(raw) % 8))
    head = {k: v for k, v in t.items() if k != "columns"}
    head["columns"] = spec
    text = json.dumps(head, separators=(",", ":")).encode()
    text += b" " * (-(len(MAGIC) + 4 + len(text)) % 8)
    return MAGIC + struct.pack("<I", len(text)) + text + b"".join(cols)


def tile_json(t: dict[str, Any]) -> dict[str, Any]:
    """The same tile as plain JSON (lists for columns)."""
    return {**t, "columns": {k: v.tolist() for k, v in t["columns"].items()}}
