"""Where goroutines spend their time: per-goroutine and per-group time
breakdowns by category, from the interval frames (numpy), with the small
``goroutines`` and ``stacks`` tables read through SQL.

Every goroutine interval that is not ``NotExist`` falls into exactly one
category (:data:`CATEGORIES`), so a goroutine's category times add up to its
lifetime within the trace window: from its first interval to its end (the
trace's end when it never ended). Waiting intervals are split by Go's wait
reason (:data:`WAIT_CATEGORY`); time inside a goroutine's ``GC mark assist``
ranges that it spent Running moves from ``running`` to ``gc_assist``.
docs/analysis.md explains each number.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]
from sqlalchemy import Engine, select

from ingest.derive.cache import cached, cached_json, release_columns
from ingest.derive.frames import TraceFrames
from ingest.derive.goroutine_lanes import goroutine_table
from ingest.extensions import optional_extension
from ingest.store import models
from ingest.store.coded_models import CodedQuery, goroutine_rows_all, read_strings, rows_by_key
from ingest.views.histo import released
from ingest.views.quantiles import lane_chunks
from ingest.views.running_time import running_in_chunks

I64 = npt.NDArray[np.int64]
Arr = npt.NDArray[Any]

#: Interval rows per chunk of the time sums (their memory: a chunk's).
ROW_CHUNK = 1 << 21

#: Time categories, in display order.
CATEGORIES = ("running", "runnable", "syscall", "network", "sync", "gc_assist", "other_wait")
CATEGORY_LABELS = {
    "running": "Execution (Running)",
    "runnable": "Scheduler wait (Runnable)",
    "syscall": "Syscall",
    "network": "Network wait",
    "sync": "Sync block",
    "gc_assist": "GC assist",
    "other_wait": "Other waits",
}
CAT = {name: i for i, name in enumerate(CATEGORIES)}
#: Column of NotExist intervals (after the end of a goroutine): not lifetime.
GONE = len(CATEGORIES)

#: Go's wait reasons (Waiting intervals) -> category; any other reason,
#: including the empty one, is "other_wait".
WAIT_CATEGORY = {
    "network": "network",
    "sync": "sync",
    "sync.(*Cond).Wait": "sync",
    "chan send": "sync",
    "chan receive": "sync",
    "select": "sync",
    "GC mark assist wait for work": "gc_assist",
}
#: The range name that marks a goroutine doing GC mark assist work.
ASSIST_RANGE = "GC mark assist"
UNKNOWN_GROUP = "(unknown start function)"
#: Orders of a group's goroutine list: by goid, or most lifetime / category time first.
MEMBER_SORTS = ("goid", "lifetime", *CATEGORIES)


def category_of_kinds(frames: TraceFrames) -> npt.NDArray[np.int8]:
    """Category code (index into CATEGORIES, GONE for NotExist) per kind code."""
    top = max(frames.kinds, default=0) + 1
    out = np.full(top, CAT["other_wait"], dtype=np.int8)
    for code, k in frames.kinds.items():
        if k.to_state == "NotExist":
            out[code] = GONE
        elif k.to_state == "Running":
            out[code] = CAT["running"]
        elif k.to_state == "Runnable":
            out[code] = CAT["runnable"]
        elif k.to_state == "Syscall":
            out[code] = CAT["syscall"]
        elif k.to_state == "Waiting":
            out[code] = CAT[WAIT_CATEGORY.get(k.reason, "other_wait")]
    return out


@dataclass
class GoroutineTimes:
    """Per goroutine (lane) arrays, in goid order."""

    goid: I64
    times: I64  # shape (n, len(CATEGORIES)), ns
    first_ts: I64
    end_ts: I64  # ended_ts, or the trace's last_ts while alive
    final_state: npt.NDArray[np.int8]

    @property
    def lifetime(self) -> I64:
        return self.end_ts - self.first_ts


@dataclass
class AssistRanges:
    """The GC mark assist ranges of goroutines (open ends: the trace's), by goid."""

    g: I64
    start: I64
    end: I64

    def of(self, goid: int) -> slice:
        """The ranges of goroutine ``goid``."""
        return slice(int(np.searchsorted(self.g, goid, side="left")),
                     int(np.searchsorted(self.g, goid, side="right")))


def assist_ranges(engine: Engine, frames: TraceFrames) -> AssistRanges:
    """Every goroutine's GC mark assist ranges (read once per trace and kept:
    the ranges table has no index by name, and each goroutine page needs them)."""
    def build() -> AssistRanges:
        rg = np.array(_assist_ranges(engine, frames), dtype=np.int64).reshape(-1, 3)
        order = np.argsort(rg[:, 0], kind="stable")
        return AssistRanges(g=rg[order, 0].copy(), start=rg[order, 1].copy(),
                            end=rg[order, 2].copy())
    return cached(frames, "assist_ranges", build, persist=(AssistRanges,))


def _assist_ranges(engine: Engine, frames: TraceFrames) -> list[tuple[int, int, int]]:
    """(goid, start, end) of every GC mark assist range (open ends: the trace's)."""
    q = CodedQuery("ranges", frames.trace_id)  # the texts matched once, not per row
    query = q.select(("scope_id", "start_ts", "end_ts")).where(
        q.codes("name", [ASSIST_RANGE]), q.codes("scope", ["goroutine"]))
    with engine.connect() as conn:
        # Straight through the DB-API cursor: tens of thousands of rows on big traces.
        sql = query.compile(conn, compile_kwargs={"literal_binds": True})
        cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cur.execute(str(sql))
            rows = cur.fetchall()
        finally:
            cur.close()
    return [(int(g), frames.first_ts if s is None else int(s),
             frames.last_ts if e is None else int(e)) for g, s, e in rows]


@dataclass
class CategoryTimes:
    """What is kept of :class:`GoroutineTimes`: the times per category (the
    goids, lifetimes and final states are the frames' goroutine lanes'), as
    int32 for the goroutines whose times all fit (most: they live less than
    2.1 s), int64 for the others (rows ``long_at``, zero in ``short``)."""

    short: npt.NDArray[np.int32]
    long_at: I64
    long_times: I64

    @classmethod
    def of(cls, times: I64) -> CategoryTimes:
        """``times`` as kept."""
        long_at = np.flatnonzero((times > np.iinfo(np.int32).max).any(axis=1)
                                 | (times < np.iinfo(np.int32).min).any(axis=1))
        long_times = times[long_at]
        short = times.astype(np.int32)
        short[long_at] = 0
        return cls(short, long_at, long_times)

    def times(self) -> I64:
        """The times as int64 (a copy)."""
        out = self.short.astype(np.int64)
        out[self.long_at] = self.long_times
        return out


def goroutine_times(engine: Engine, frames: TraceFrames) -> GoroutineTimes:
    """Time per category of every goroutine (vectorised over all intervals;
    built once per trace and kept with its frames, ingest.derive.cache)."""
    kept = cached(frames, "goroutine_times",
                  lambda: CategoryTimes.of(released(frames,
                                                    lambda: _category_times(engine, frames))),
                  persist=(CategoryTimes,))
    return _with_lifetimes(frames, kept.times())


def _goroutine_times(engine: Engine, frames: TraceFrames) -> GoroutineTimes:
    """:func:`goroutine_times` built afresh."""
    return _with_lifetimes(frames, _category_times(engine, frames))


def _with_lifetimes(frames: TraceFrames, times: I64) -> GoroutineTimes:
    """Each goroutine's ``times`` with its goid, lifetime and final state
    from the frames' goroutine lanes."""
    lanes = frames.goroutines
    iv = frames.intervals
    if len(lanes.ids) and int(lanes.off[-1]):
        first = iv.take("start_ts", lanes.off[:-1])
        last_rows = lanes.off[1:] - 1
        final = frames.state[last_rows]
        gone = final == models.STATE_CODE["NotExist"]
        end = np.where(gone, iv.take("start_ts", last_rows), frames.last_ts)
    else:
        first = end = np.zeros(len(lanes.ids), np.int64)
        final = np.zeros(len(lanes.ids), np.int8)
    return GoroutineTimes(goid=lanes.ids.astype(np.int64), times=times,
                          first_ts=first.astype(np.int64), end_ts=end.astype(np.int64),
                          final_state=final)


def _category_times(engine: Engine, frames: TraceFrames) -> I64:
    lanes = frames.goroutines
    n_lanes = len(lanes.ids)
    n_rows = int(lanes.off[-1]) if n_lanes else 0
    iv = frames.intervals
    start = iv["start_ts"][:n_rows]
    # Weighted counts keyed by (lane, category), a chunk of whole lanes at a
    # time (a lane's sum comes from one count, as over all rows at once; no
    # pass allocates more than a chunk's worth). The weights as floats up
    # front (bincount's own conversion of ints is slower), subtracted as
    # floats when every timestamp is one exactly.
    exact = max(abs(frames.first_ts), abs(frames.last_ts)) < 2**53
    cat_of = category_of_kinds(frames)
    width = GONE + 1
    times = np.zeros((n_lanes, GONE), np.int64)
    # One pass per chunk in C (ingest/csrc/lanesums.c), numpy's counts without it.
    ext = optional_extension("ingest.views._lanesums")
    for lo, hi in lane_chunks(lanes.off, n_rows, ROW_CHUNK):
        a, b = np.searchsorted(lanes.off, [lo, hi])  # lanes a..b-1
        if ext is not None:
            ext.lane_sums(np.asarray(lanes.off[a:b + 1], np.int64) - lo, start[lo:hi],
                          iv["end_ts"][lo:hi], np.asarray(iv["kind"][lo:hi], np.int16), cat_of,
                          times[a:b])
        else:
            end = iv["end_ts"][lo:hi]
            dur = np.subtract(end, start[lo:hi], dtype=np.float64) if exact else \
                np.subtract(end, start[lo:hi]).astype(np.float64)
            key = np.repeat(np.arange(0, (b - a) * width, width, dtype=np.int64),
                            np.diff(lanes.off[a:b + 1]))
            key += cat_of[iv["kind"][lo:hi]]
            sums = np.bincount(key, weights=dur, minlength=(b - a) * width)
            times[a:b] = np.rint(sums).astype(np.int64).reshape(b - a, width)[:, :GONE]
        # The chunk's pages go back as it is done: read through, the three
        # mapped columns would otherwise all be this process's (1.8 GB of a
        # 1 GB trace's).
        release_columns(iv, "start_ts", "end_ts", "kind")
    ranges = assist_ranges(engine, frames)
    if len(ranges.g) and n_lanes:
        rg = np.stack([ranges.g, ranges.start, ranges.end], axis=1)
        li = np.minimum(np.searchsorted(lanes.ids, rg[:, 0]), n_lanes - 1)
        ok = lanes.ids[li] == rg[:, 0]
        moved = running_in_chunks(frames, li[ok], rg[ok, 1], rg[ok, 2])
        np.add.at(times[:, CAT["running"]], li[ok], -moved)
        np.add.at(times[:, CAT["gc_assist"]], li[ok], moved)
    return times


def _start_functions(engine: Engine, trace_id: int) -> dict[int, str | None]:
    """goid -> start function, straight through the DB-API cursor (the
    goroutines of a big trace are 100k+ rows; SQLAlchemy rows cost more than
    the query)."""
    # The coded table's function codes (ingest.store.coded_models), not a
    # joined string a row.
    sql = (f"SELECT goid, start_function_code FROM {goroutine_rows_all.name} WHERE trace_id = "
           f"{int(trace_id)}")
    with engine.connect() as conn:
        names = read_strings(conn, trace_id, "goroutines.start_function")
        cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cur.execute(sql)
            return {goid: None if c is None else names[c] for goid, c in cur.fetchall()}
        finally:
            cur.close()


def outermost_functions(engine: Engine, trace_id: int, stack_ids: list[int]) -> dict[int, str]:
    """Stack id -> its outermost frame's function."""
    s = models.stacks
    out: dict[int, tuple[int, str]] = {}
    ids = sorted(set(stack_ids) - {0})
    with engine.connect() as conn:
        for k in range(0, len(ids), 500):
            for sid, depth, fn in conn.execute(select(s.c.stack_id, s.c.depth, s.c.function)
                                               .where(s.c.trace_id == trace_id,
                                                      s.c.stack_id.in_(ids[k:k + 500]))):
                if sid not in out or depth > out[sid][0]:
                    out[int(sid)] = (int(depth), str(fn))
    return {k: v[1] for k, v in out.items()}


def stack_frames(engine: Engine, trace_id: int, stack_ids: list[int]
                 ) -> dict[int, list[dict[str, Any]]]:
    """Stack id -> frames (function, file, line), innermost first."""
    s = models.stacks
    ids = sorted(set(int(i) for i in stack_ids) - {0, -1})
    out: dict[int, list[dict[str, Any]]] = {i: [] for i in ids}
    with engine.connect() as conn:
        for k in range(0, len(ids), 500):
            for r in conn.execute(select(s.c.stack_id, s.c.depth, s.c.function, s.c.file,
                                         s.c.line)
                                  .where(s.c.trace_id == trace_id,
                                         s.c.stack_id.in_(ids[k:k + 500]))
                                  .order_by(s.c.stack_id, s.c.depth)):
                out[int(r.stack_id)].append({"function": r.function, "file": r.file,
                                             "line": int(r.line)})
    return out


def group_names(engine: Engine, frames: TraceFrames, goids: I64) -> tuple[list[str], Arr]:
    """Start-function group name of each goroutine (``goids``: the
    goroutine lanes' ids, in lane order), and whether it is known from the
    goroutine's creation (False: guessed from the outermost frame of its
    first stack, as Go's trace tool does for goroutines that existed before
    the trace). Read from the goroutines table; :func:`group_codes` is the
    same from the goroutine lanes' table."""
    fns = _start_functions(engine, frames.trace_id)
    names: list[str | None] = [fns.get(g) for g in goids.tolist()]
    known = np.array([n is not None for n in names], dtype=bool)
    missing = np.flatnonzero(~known)
    for i, name in zip(missing.tolist(), _guessed_names(engine, frames, missing), strict=True):
        names[i] = name
    return [n or UNKNOWN_GROUP for n in names], known


def _guessed_names(engine: Engine, frames: TraceFrames, lanes_at: I64) -> list[str]:
    """The outermost function of the first stack of each goroutine lane
    ``lanes_at`` (UNKNOWN_GROUP without one)."""
    if not len(lanes_at):
        return []
    lanes = frames.goroutines
    stk = frames.intervals["stack_id"]
    lo, hi = lanes.off[lanes_at], lanes.off[lanes_at + 1]
    if len(lanes_at) * 64 < len(lanes.ids):
        # A few goroutines (those that existed before the trace): their own rows.
        first_stack = np.zeros(len(lanes_at), np.int64)
        for k, (x, y) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
            nz = np.flatnonzero(stk[x:y] > 0)
            first_stack[k] = int(stk[x + int(nz[0])]) if len(nz) else 0
    else:
        n_rows = int(lanes.off[-1])
        has = np.flatnonzero(stk[:n_rows] > 0)
        j = np.searchsorted(has, lo)
        ok = j < len(has)
        jj = np.minimum(j, max(len(has) - 1, 0))
        ok &= has[jj] < hi if len(has) else np.zeros(len(lanes_at), bool)
        first_stack = np.where(ok, stk[has[jj]] if len(has) else 0, 0)
    fn = outermost_functions(engine, frames.trace_id, first_stack.tolist())
    return [fn.get(int(sid), UNKNOWN_GROUP) for sid in first_stack.tolist()]


@dataclass
class GroupCodes:
    """Each goroutine's group (in goroutine_times' goid order), dictionary-coded."""

    names: list[str]
    code: npt.NDArray[np.signedinteger[Any]]  # index into names (int16 where they fit)
    known: npt.NDArray[np.bool_]  # group known from the goroutine's creation


def group_codes(engine: Engine, frames: TraceFrames) -> GroupCodes:
    """:func:`group_names` of every goroutine, coded (built once per trace):
    from the goroutine lanes' table, which the loader keeps coded by start
    function, asking the database only about those without one."""
    def build() -> GroupCodes:
        goids = frames.goroutines.ids
        table = goroutine_table(engine, frames)
        if not np.array_equal(np.asarray(table.goid), goids):  # pragma: no cover - a foreign table
            return _group_codes_by_name(*group_names(engine, frames, goids))
        names = list(table.names)
        code = np.asarray(table.group, dtype=np.int64).copy()
        known = np.ones(len(goids), dtype=bool)
        if "" in names:
            # No start function in the table: none in the database (guessed
            # from the first stack) or an empty one (unknown, but known so).
            blank = names.index("")
            at = np.flatnonzero(code == blank)
            fns = _start_functions_of(engine, frames.trace_id, goids[at])
            given = np.array([fns.get(g) is not None for g in goids[at].tolist()], dtype=bool)
            known[at[~given]] = False
            names[blank] = UNKNOWN_GROUP
            index = {n: i for i, n in enumerate(names)}
            guessed = _guessed_names(engine, frames, at[~given])
            code[at[~given]] = [index.setdefault(n, len(index)) for n in guessed]
            names = list(index)
        # Only the groups that have goroutines (the table may name an empty one).
        used = np.bincount(code, minlength=len(names)) > 0
        renumber = np.cumsum(used) - 1
        return GroupCodes(names=[n for n, u in zip(names, used.tolist(), strict=True) if u],
                          code=_narrow_codes(renumber[code]), known=known)
    return cached(frames, "goroutine_groups", lambda: released(frames, build),
                  persist=(GroupCodes,))


def _narrow_codes(code: Arr) -> npt.NDArray[np.signedinteger[Any]]:
    """Group codes as kept: int16 where every code fits (a quarter of int64's bytes)."""
    return code.astype(np.int16 if not len(code) or int(code.max()) < 2**15 else np.int32)


def _group_codes_by_name(names: list[str], known: Arr) -> GroupCodes:
    # Dictionary-encode the names in C (100k+ goroutines on big traces).
    enc = pa.array(names, type=pa.string()).dictionary_encode()
    return GroupCodes(names=[str(n) for n in enc.dictionary.to_pylist()],
                      code=_narrow_codes(enc.indices.to_numpy(zero_copy_only=False)),
                      known=np.asarray(known, dtype=bool))


def _start_functions_of(engine: Engine, trace_id: int, goids: I64) -> dict[int, str | None]:
    """goid -> start function of the goroutines ``goids`` (those in the table)."""
    out: dict[int, str | None] = {}
    ids = goids.tolist()
    with engine.connect() as conn:
        for k in range(0, len(ids), 500):
            out.update((int(r[0]), r[1]) for r in rows_by_key(
                conn, "goroutines", trace_id, ids[k:k + 500], ("goid", "start_function")))
    return out


def _times_dict(row: I64) -> dict[str, int]:
    return {c: int(v) for c, v in zip(CATEGORIES, row.tolist(), strict=True)}


def goroutine_groups(engine: Engine, frames: TraceFrames, group: str | None = None,
                     limit: int = 1000, sort: str = "goid") -> dict[str, Any]:
    """Goroutines grouped by start function: counts (total, alive at the
    end, by final state) and summed category times; with ``group``, also
    that group's goroutines: the first ``limit`` by goid, or by the most
    ``lifetime`` or time in a category (``sort``, see MEMBER_SORTS)."""
    if sort not in MEMBER_SORTS:
        raise ValueError(f"sort must be one of {', '.join(MEMBER_SORTS)}, not {sort!r}")
    codes = group_codes(engine, frames)
    index = {n: i for i, n in enumerate(codes.names)}
    # The times (read from the frames) only when the summary is not kept
    # yet, or a group's members are asked for.
    out: dict[str, Any] = cached_json(
        frames, "goroutine_groups_summary",
        lambda: released(frames, lambda: _groups_summary(
            frames, goroutine_times(engine, frames), codes)))
    if group is not None:
        if group not in index:
            raise LookupError(f"no goroutine group {group!r}")
        gt = goroutine_times(engine, frames)
        code = np.asarray(codes.code, np.int64)
        members = np.flatnonzero(code == index[group])
        out["group"] = group
        out["members_total"] = int(len(members))
        if sort != "goid":
            key = gt.lifetime[members] if sort == "lifetime" else gt.times[members, CAT[sort]]
            members = members[np.argsort(-key, kind="stable")]
        out["sort"] = sort
        out["members"] = [goroutine_row(gt, int(i)) for i in members[:limit].tolist()]
    return out


def _groups_summary(frames: TraceFrames, gt: GoroutineTimes,
                    codes: GroupCodes) -> dict[str, Any]:
    """The groups table of :func:`goroutine_groups` (no members)."""
    code = np.asarray(codes.code, np.int64)
    known = np.asarray(codes.known)
    uniq = codes.names
    k = len(uniq)
    count = np.bincount(code, minlength=k)
    alive = np.bincount(code, weights=gt.final_state != models.STATE_CODE["NotExist"],
                        minlength=k).astype(np.int64)
    ncat = len(CATEGORIES)
    tsum = np.zeros((k, ncat), np.int64)
    for c in range(ncat):
        tsum[:, c] = np.rint(np.bincount(code, weights=gt.times[:, c], minlength=k))
    life = np.rint(np.bincount(code, weights=gt.lifetime, minlength=k)).astype(np.int64)
    finals = np.bincount(code * len(models.STATE_NAMES) + gt.final_state,
                         minlength=k * len(models.STATE_NAMES)).reshape(k, -1)
    known_any = np.bincount(code, weights=known, minlength=k) > 0
    groups: list[dict[str, Any]] = []
    for i in range(k):
        groups.append({
            "name": str(uniq[i]), "count": int(count[i]), "alive_at_end": int(alive[i]),
            "final_states": {models.STATE_NAMES[s]: int(n)
                             for s, n in enumerate(finals[i].tolist()) if n},
            "lifetime_ns": int(life[i]), "times": _times_dict(tsum[i]),
            "start_known": bool(known_any[i]),
        })
    groups.sort(key=lambda d: (-d["count"], d["name"]))
    return {
        "trace_id": frames.trace_id, "first_ts": frames.first_ts, "last_ts": frames.last_ts,
        "categories": list(CATEGORIES), "category_labels": CATEGORY_LABELS,
        "goroutines": int(len(gt.goid)), "groups": groups,
    }


def goroutine_row(gt: GoroutineTimes, i: int) -> dict[str, Any]:
    """One goroutine's line of a group table."""
    return {"goid": int(gt.goid[i]), "first_ts": int(gt.first_ts[i]),
            "end_ts": int(gt.end_ts[i]), "lifetime_ns": int(gt.lifetime[i]),
            "final_state": models.STATE_NAMES[int(gt.final_state[i])],
            "times": _times_dict(gt.times[i])}
