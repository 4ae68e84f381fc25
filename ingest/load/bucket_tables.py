"""The tables made of a trace's transitions, derived bucket by bucket.

The transitions come partitioned (:mod:`ingest.load.transition_spill`): the
goroutines' rows in buckets of goroutine ids, in id order, then the procs'.
The interval order (ingest.derive.intervals) is resource, id, Go's order, so
each bucket's intervals are the next rows of the trace's: a bucket's tables
are its rows' with their interval rows and transition numbers offset, and
only what spans buckets is merged here (each thread's sums, the goroutine
runs per proc, the proc runs' (proc, time) order, the dwell times of each
edge of the state graph). Memory holds one bucket of transitions (and the
procs', a few percent of a trace) at a time.

The answer is the same rows as deriving the whole trace at once; see
tests/ingest/load/test_bucket_tables.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ingest.codes import GOROUTINE, PROC, RESOURCE_NAMES, STATE_NAMES
from ingest.columns import Computed, Gather, Nullable, Transitions
from ingest.derive import intervals as derive
from ingest.derive.interval_order import IDLE, RUNNING, SYSCALL, Arr, Columns, Ordered
from ingest.extensions import optional_extension
from ingest.load.spill_file import Spilled, SpillFile
from ingest.load.transition_spill import Bucket, TransitionSpill
from ingest.store.coded_insert import CodeBook, in_book
from ingest.store.coded_models import CODED
from ingest.timings import Timings

#: Stored type of a frames column: (lowest, highest) value it may hold.
Bounds = dict[str, tuple[int, int]]


@dataclass
class FramePlan:
    """A table written to the frames in parts: its rows and its columns' bounds."""

    rows: int
    bounds: Bounds


@dataclass
class _Edges:
    """Each state-graph edge's transitions and its measured dwell times, kept
    in parts in a temporary file in ``spill_dir``; without one (a trace in
    memory, one bucket) the rows of that bucket."""

    spill_dir: Path | None
    count: dict[int, int] = field(default_factory=dict)
    parts: dict[int, list[Spilled]] = field(default_factory=dict)
    whole: list[tuple[Any, ...]] | None = None

    def __post_init__(self) -> None:
        self.file = SpillFile(self.spill_dir, "dwell-") if self.spill_dir is not None else None

    def add(self, tr: Transitions, o: Ordered) -> None:
        order = o.order
        if not len(order):
            return
        if self.spill_dir is None:
            # In memory the trace is one bucket: its rows whole, as
            # ingest.derive.intervals.state_edges makes them.
            if self.whole is not None:
                raise RuntimeError("state edges of one bucket only when in memory")
            self.whole = derive.state_edges(tr, o)
            return
        if self._add_c(tr, o):
            return
        edge = tr.res[order].astype(np.int16) * 8
        edge += tr.frm[order]
        edge *= 8
        edge += tr.to[order]
        dwell = tr.ts[order]
        dwell[1:] -= dwell[:-1].copy()
        dwell[0] = -1
        dwell[o.first] = -1
        counts = np.bincount(edge, minlength=128)
        for c in np.flatnonzero(counts).tolist():
            self.count[c] = self.count.get(c, 0) + int(counts[c])
        keep = dwell >= 0
        edge, dwell = edge[keep], dwell[keep]
        by = np.argsort(edge, kind="stable")
        edge, dwell = edge[by], dwell[by]
        cut = np.flatnonzero(edge[1:] != edge[:-1]) + 1
        assert self.file is not None
        for a, b in zip([0, *cut.tolist()], [*cut.tolist(), len(edge)], strict=True):
            if b > a:
                self.parts.setdefault(int(edge[a]), []).append(self.file.keep(dwell[a:b]))

    def _add_c(self, tr: Transitions, o: Ordered) -> bool:
        """:meth:`add` in one C pass (ingest/csrc/summaries.c's edge_dwells),
        False where it does not apply (numpy's sorts then do the same)."""
        c = optional_extension("ingest.derive._summaries")
        order = o.order
        if (c is None or order.dtype != np.int32 or o.first.dtype != np.bool_
                or tr.ts.dtype != np.int64 or len(tr.ts) != len(order)
                or any(a.dtype != np.int8 for a in (tr.res, tr.frm, tr.to))):
            return False
        count = np.zeros(128, np.int64)
        measured = np.zeros(128, np.int64)
        dwell = np.empty(len(order), np.int64)
        c.edge_dwells(order, o.first, tr.ts, tr.res, tr.frm, tr.to, count, measured, dwell)
        assert self.file is not None
        at = 0
        for code in np.flatnonzero(count).tolist():
            self.count[code] = self.count.get(code, 0) + int(count[code])
            k = int(measured[code])
            if k:
                self.parts.setdefault(code, []).append(self.file.keep(dwell[at:at + k]))
            at += k
        return True

    def _values(self, code: int) -> Arr:
        parts = self.parts.pop(code, [])
        if not parts:
            return np.zeros(0, np.int64)
        assert self.file is not None
        return np.concatenate([self.file.back(part) for part in parts])

    def rows(self) -> list[tuple[Any, ...]]:
        """state_edges' rows, by edge code (as ingest.derive.intervals.state_edges)."""
        if self.whole is not None:
            return self.whole
        out: list[tuple[Any, ...]] = []
        for code in sorted(self.count):
            d = self._values(code)
            rest, to = divmod(code, 8)
            res, frm = divmod(rest, 8)
            names = (RESOURCE_NAMES[res], STATE_NAMES[frm], STATE_NAMES[to], self.count[code])
            if not len(d):
                out.append((*names, 0, None, None, None, None))
                continue
            total = sum(int(p.sum()) for p in np.array_split(d, max(1, len(d) >> 20)))
            n = len(d)
            k99, k50 = _rank(0.99, n), _rank(0.5, n)
            d.partition(k99)
            p99 = int(d[k99])
            top = int(d.max())
            head = d[:k99 + 1]
            head.partition(k50)
            out.append((*names, n, total / n, int(head[k50]), p99, top))
        if self.file is not None:
            self.file.close()
        return out


def _rank(q: float, n: int) -> int:
    """The index of the nearest-rank q-quantile among n sorted values
    (ingest.derive.interval_order.nearest_rank's)."""
    return max(1, int(np.ceil(q * n))) - 1


@dataclass
class _Threads:
    parts: list[tuple[Arr, ...]] = field(default_factory=list)

    def merged(self, spill: TransitionSpill) -> tuple[Arr, ...]:
        """(m, first, last, transitions, Running ns, Syscall ns, syscalls) by
        m: the sums of every part's, the first and last times the spill's
        (those of the thread's first and last transition in Go's order)."""
        if not self.parts:
            return tuple(np.zeros(0, np.int64) for _ in range(7))
        cols = [np.concatenate([p[i] for p in self.parts]) for i in range(7)]
        m, inv = np.unique(cols[0], return_inverse=True)
        k = len(m)
        ids = m.tolist()
        first = np.array([spill.thread_first[i] for i in ids], np.int64).reshape(k)
        last = np.array([spill.thread_last[i] for i in ids], np.int64).reshape(k)
        sums = []
        for i in (3, 4, 5, 6):
            acc = np.zeros(k, np.int64)
            np.add.at(acc, inv, cols[i])
            sums.append(acc)
        return (m.astype(np.int64), first, last, *sums)


#: Transitions up to which the next bucket is read ahead: one more bucket in
#: memory, +100 MB on the 200 MB trace, which the 1 GB trace (100.6 M
#: transitions, 1304 of its 1536 MiB) is not given.
READ_AHEAD_MAX_ROWS = 48_000_000


class BucketTables:
    """(table name, columns) of the transitions' tables, bucket by bucket:
    ``intervals`` and ``syscalls`` in parts (the next rows each time), then
    ``goroutines``, ``state_edges``, ``procs`` and ``proc_runs`` whole; then
    :meth:`thread_sums` has every thread's sums (the threads' table also
    needs the events')."""

    def __init__(self, spill: TransitionSpill, last_ts: int, stack_functions: dict[int, str],
                 tstack_seq: Arr, tstack_id: Arr, timings: Timings) -> None:
        self.spill = spill
        self.last_ts = last_ts
        # The stacks' functions as a lookup, made once for every bucket.
        self.stack_functions = derive.FunctionCodes.of(stack_functions)
        self.tstack_seq, self.tstack_id = tstack_seq, tstack_id
        self.timings = timings
        self.kind_rows, self._lut, self._nr = _kinds(spill)
        self.thread_parts = _Threads()
        self.edges = _Edges(spill.spill_dir)
        #: The goroutines table's coded columns' books, carried from part to part.
        self._books = {name: CodeBook() for name in CODED["goroutines"].sources}
        #: The procs' steals (steals_only), made before the first bucket.
        self._steals: tuple[Bucket, Ordered] | None = None
        #: Each bucket read and ordered while the one before is derived
        #: (:func:`_read_ahead`): a spilled trace up to READ_AHEAD_MAX_ROWS.
        self.read_ahead = spill.spill_dir is not None and spill.rows <= READ_AHEAD_MAX_ROWS
        #: Rows per bucket (None: transition_spill.BUCKET_ROWS).
        self.bucket_rows: int | None = None

    def frame_plans(self) -> dict[str, FramePlan]:
        """The tables yielded in parts, with their rows and bounds."""
        b = self.spill.bounds
        n = self.spill.rows
        ids = {"rid": b.get("id", (0, 0)), "m": b.get("m", (0, 0)), "p": b.get("p", (0, 0)),
               "g": b.get("g", (0, 0)), "stack_id": b.get("stack_id", (0, 0)),
               "kind": (0, max(len(self.kind_rows) - 1, 0)), "seq": (0, max(n - 1, 0))}
        syscalls = sum(r[-1] for r in self.kind_rows
                       if r[1] == RESOURCE_NAMES[GOROUTINE] and r[3] == STATE_NAMES[SYSCALL])
        m_lo, m_hi = ids["m"]
        return {"intervals": FramePlan(n, ids),
                "syscalls": FramePlan(syscalls, {
                    "row": (0, max(n - 1, 0)), "start_known": (0, 1), "p_lost": (0, 1),
                    "stolen_by_m": (min(m_lo, -1), max(m_hi, -1)),
                    "outcome": (0, len(derive.SYSCALL_OUTCOMES) - 1)})}

    def kind_of(self, tr: Transitions) -> Arr:
        """Each row's kind number (transition_counts.kind)."""
        nk = len(self.kind_rows)
        kinds = np.empty(len(tr), np.int8 if nk <= 127 else np.int16)
        c = optional_extension("ingest.derive._summaries")
        if (c is not None and tr.res.dtype == np.int8 and tr.frm.dtype == np.int8
                and tr.to.dtype == np.int8 and tr.reason.dtype in (np.int8, np.int16)):
            c.kind_numbers(tr.res, tr.frm, tr.to, tr.reason, self._nr, self._lut, kinds)
            return kinds
        code = ((tr.res.astype(np.int64) * 8 + tr.frm) * 8 + tr.to) * self._nr + tr.reason
        kinds[:] = self._lut[code]
        return kinds

    def __iter__(self) -> Iterator[tuple[str, Columns]]:
        procs = self.spill.procs()
        with self.timings.phase("order"):
            op = derive.order_intervals(procs.tr, self.last_ts)

        if len(procs.tr):  # kept apart: a spilled trace
            # Before any bucket is in memory: each bucket's syscalls need them.
            self._steals = steals_only(procs, op)
        # The procs' rows, when kept apart, are the last bucket.
        def order(b: Bucket, procs: Bucket = procs, op: Ordered = op) -> Ordered:
            return op if b is procs else self._order(b.tr)

        every = _read_ahead(itertools.chain(
            self.spill.buckets(self.bucket_rows,
                               extra=self._steals[0] if self._steals is not None else None),
            [procs] if len(procs.tr) else []), order, ahead=self.read_ahead)
        gor_parts: list[Columns] = []
        prc: Columns = {}
        # A trace too big to read ahead sorts its Ps' runs one at a time: two
        # at once held the 1 GB trace's peak at the load's end (1406-1524 MiB
        # of its 1536 from run to run, bench/RESULTS.md).
        runs = _Runs(self.spill.spill_dir, threads=2 if self.read_ahead else 1)
        runs_on: dict[int, int] = {}
        base = 0
        summarised = False
        for bucket, o in every:
            tr = bucket.tr
            for p, k in derive.runs_per_proc(tr).items():
                runs_on[p] = runs_on.get(p, 0) + k
            # The procs' rows come after every goroutine's: their runs are
            # all counted by then.
            gor, prc_part = derive.resource_summaries(
                tr, o, self.stack_functions, self.tstack_seq, self.tstack_id, seq=bucket.seq,
                runs_on=runs_on)
            for cols in (gor, prc_part):
                if cols:
                    cols["first_interval"] = cols["first_interval"] + base
                    cols["last_interval"] = cols["last_interval"] + base
            if gor and len(gor["goid"]):
                if self.spill.spill_dir is None:
                    gor_parts.append(gor)  # stored with the other summaries
                else:
                    # A goroutine's rows are all in its bucket, the buckets
                    # in goroutine order: its part of the table, stored now
                    # rather than held until the last bucket, its texts
                    # coded as the whole table's would be.
                    for name, book in self._books.items():
                        gor[name] = in_book(gor[name], book)
                    yield "goroutines", gor
            if prc_part and len(prc_part["pid"]):
                prc = prc_part
            del gor, prc_part
            self.thread_parts.parts.append(derive.thread_sums(tr, o))
            self.edges.add(tr, o)
            if self.spill.spill_dir is None:
                # In memory, the one bucket is the trace: its summaries go
                # (and are stored) before its intervals are gathered, its
                # proc runs made as of a whole trace.
                whole = derive.proc_runs(tr, o)
                yield from self._summaries(gor_parts, prc, {
                    "p": whole["p"], "interval_row": whole["interval_row"]})
                summarised = True
                del whole
            else:
                runs.add(*_runs(tr, o, base))
            yield "intervals", self._interval_part(bucket, o)
            calls = self._syscall_part(bucket, o, procs, op, base)
            if calls:
                yield "syscalls", calls
            base += len(tr)
            del bucket, tr, o, calls
        del every, procs, op
        if not summarised:  # spilled, or no transitions at all
            proc_runs = runs.columns()
            del runs
            yield from self._summaries(gor_parts, prc, proc_runs)

    def _summaries(self, gor_parts: list[Columns], prc: Columns,
                   proc_runs: Columns) -> Iterator[tuple[str, Columns]]:
        """goroutines (those not yielded bucket by bucket), state_edges, procs
        and proc_runs, once every bucket's parts are in (``gor_parts`` is
        emptied)."""
        # (None left: an empty part, so that the table is always counted.)
        yield "goroutines", _concat(gor_parts)
        gor_parts.clear()
        yield "state_edges", _rows_cols(
            ("resource", "from_state", "to_state", "count", "dwell_count", "dwell_mean_ns",
             "dwell_p50_ns", "dwell_p99_ns", "dwell_max_ns"), self.edges.rows())
        if prc:
            lo, hi = derive.run_ranges(proc_runs["p"], prc["pid"])
            prc["first_run"], prc["last_run"] = lo, hi
        yield "procs", prc
        yield "proc_runs", proc_runs

    def _order(self, tr: Transitions) -> Ordered:
        with self.timings.phase("order"):
            return derive.order_intervals(tr, self.last_ts)

    def thread_sums(self) -> tuple[Arr, ...]:
        """Every bucket's thread sums merged (ingest.derive.intervals.thread_sums')."""
        return self.thread_parts.merged(self.spill)

    def _interval_part(self, bucket: Bucket, o: Ordered) -> Columns:
        cols = interval_columns(bucket.tr, o, self.kind_of(bucket.tr))
        if bucket.seq is not None:
            cols["seq"] = bucket.seq[o.order]
        return cols

    def _syscall_part(self, bucket: Bucket, o: Ordered, procs: Bucket, op: Ordered,
                      base: int) -> Columns:
        """The bucket's syscalls: derived with the procs' steals beside its
        own rows (whose P was stolen, by which M, is in them)."""
        if bucket is procs or not len(procs.tr):
            # The procs' rows are in this bucket (or there are none).
            return self._offset(derive.syscalls(bucket.tr, o), bucket.seq, base)
        assert self._steals is not None  # made with the procs' rows, before the buckets
        steals, op = self._steals
        if not len(steals.tr):  # no P was stolen: the bucket's rows alone
            return self._offset(derive.syscalls(bucket.tr, o), bucket.seq, base)
        # The bucket was read with the steals after its rows (TransitionSpill.buckets' extra).
        both, seqs = bucket.joined, bucket.joined_seq
        assert both is not None and seqs is not None
        n = len(bucket.tr)
        ob = Ordered(order=np.concatenate([o.order, (op.order + n).astype(o.order.dtype)]),
                     first=np.concatenate([o.first, op.first]),
                     last=np.concatenate([o.last, op.last]),
                     starts=np.concatenate([o.starts, op.starts + n]), ts=both.ts,
                     last_ts=self.last_ts)
        return self._offset(derive.syscalls(both, ob), seqs, base)

    @staticmethod
    def _offset(cols: Columns, seqs: Arr | None, base: int) -> Columns:
        """A bucket's syscalls with their transition numbers and interval rows
        the trace's."""
        if cols:
            if seqs is not None:
                cols["seq"] = seqs[cols["seq"]]
            cols["interval_row"] = cols["interval_row"].astype(np.int64) + base
        return cols


def interval_columns(tr: Transitions, o: Ordered, kind_of: Any) -> Columns:
    """The intervals' columns: rows in (resource, id, time) order, each
    resource's rows consecutive. Gathered and computed part by part when
    stored and written: no reordered copy of the trace, and no array of the
    ends (8 bytes a row), is ever in memory."""
    order = o.order
    return {
        "rid": Gather(tr.rid, order), "start_ts": Gather(tr.ts, order), "seq": order,
        "end_ts": Computed(lambda a, b: o.ends_of(np.arange(a, b)), len(order)),
        "kind": Gather(kind_of, order), "m": Gather(tr.m, order), "p": Gather(tr.p, order),
        "g": Gather(tr.g, order), "stack_id": Gather(tr.stack, order)}



def _kinds(spill: TransitionSpill) -> tuple[list[tuple[Any, ...]], Arr, int]:
    """transition_counts' rows (numbered as ingest.derive.intervals.transition_kinds
    numbers them), the code -> kind table and the reasons' count."""
    reasons = spill.reasons
    nr = max(len(reasons), 1)
    counts = spill.kind_counts()
    if len(counts) > 32767:
        raise ValueError(f"too many distinct transition kinds ({len(counts)})")
    lut = np.zeros(2 * 8 * 8 * nr, np.int16)
    rows: list[tuple[Any, ...]] = []
    for kind, (edge, reason) in enumerate(sorted(counts)):
        lut[edge * nr + reason] = kind
        rest, to = divmod(edge, 8)
        res, frm = divmod(rest, 8)
        rows.append((kind, RESOURCE_NAMES[res], STATE_NAMES[frm], STATE_NAMES[to],
                     reasons[reason] if reasons else "", counts[(edge, reason)]))
    return rows, lut, nr


def _runs(tr: Transitions, o: Ordered, base: int) -> tuple[Arr, Arr, Arr]:
    """The bucket's goroutine runs (Running with a P): (p, start, interval row)."""
    order = o.order
    run = tr.res == GOROUTINE  # in the rows' order (no gathers), then once through the order
    run &= tr.to == RUNNING
    run &= tr.p >= 0
    sel = np.flatnonzero(run[order])
    del run
    seq = order[sel]
    rows = sel + base
    return (tr.p[seq].astype(np.int16 if tr.p.dtype == np.int16 else np.int32), tr.ts[seq],
            rows.astype(np.int32) if not len(rows) or int(rows[-1]) < 2**31 else rows)


@dataclass
class _Runs:
    """Every bucket's goroutine runs, kept per P in an unnamed temporary file
    as they come, made into proc_runs' columns at the end a P at a time: a
    big trace's runs are never all in memory at once, nor sorted at once."""

    spill_dir: Path | None  # (None: in memory, where no runs are added)
    #: P -> (start times, interval rows) of each bucket's segment.
    parts: dict[int, list[tuple[Spilled, Spilled]]] = field(default_factory=dict)
    p_type: Any = np.int16
    #: Ps sorted at once at the end (each one's starts, rows and order in memory).
    threads: int = 2

    def __post_init__(self) -> None:
        self.file = SpillFile(self.spill_dir, "runs-") if self.spill_dir is not None else None

    def add(self, p: Arr, ts: Arr, row: Arr) -> None:
        """A bucket's runs (p, start, interval row), in interval order."""
        if not len(p):
            return
        self.p_type = np.result_type(self.p_type, p.dtype)
        # Stable by P: each P's runs keep their interval order.
        by = np.argsort(p, kind="stable")
        p, ts, row = p[by], ts[by], row[by]
        cut = np.flatnonzero(p[1:] != p[:-1]) + 1
        assert self.file is not None
        for a, b in zip([0, *cut.tolist()], [*cut.tolist(), len(p)], strict=True):
            self.parts.setdefault(int(p[a]), []).append(
                (self.file.keep(ts[a:b]), self.file.keep(row[a:b])))

    def columns(self) -> Columns:
        """proc_runs' columns: every run by (P, start), runs of one start in
        interval order (as ingest.derive.intervals.proc_runs orders them)."""
        file = self.file

        def by_start(segments: list[tuple[Spilled, Spilled]]) -> Arr:
            assert file is not None
            ts = np.concatenate([file.back(t) for t, _ in segments])
            row = np.concatenate([file.back(r) for _, r in segments])
            return row[np.argsort(ts, kind="stable")]

        # Two Ps at a time (``threads``): the reads, the sorts and the gathers
        # give up the GIL, and this runs alone after the last bucket (the
        # 200 MB trace's 7.9 M runs: 0.3-0.6 s on one core).
        pvs = sorted(self.parts)
        with ThreadPoolExecutor(self.threads, thread_name_prefix="gmpscope-runs") as pool:
            rows = list(pool.map(by_start, [self.parts.pop(pv) for pv in pvs]))
        ps = [np.full(len(r), pv, self.p_type) for pv, r in zip(pvs, rows, strict=True)]
        if self.file is not None:
            self.file.close()
        p = np.concatenate(ps) if ps else np.zeros(0, np.int32)
        row = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        small = np.int32 if not len(row) or int(row.max()) < 2**31 else np.int64
        return {"p": p, "interval_row": row.astype(small)}


def _read_ahead(buckets: Iterator[Bucket], order: Callable[[Bucket], Ordered],
                ahead: bool) -> Iterator[tuple[Bucket, Ordered]]:
    """Each bucket with its interval order; with ``ahead``, the next bucket
    read from the spill and ordered on a thread while this one is derived
    (the reads and the sorts give up the GIL: the 200 MB trace's ~1 s of
    them beside the derivation instead of before each bucket's), at the
    cost of one more bucket in memory."""
    if not ahead:
        for b in buckets:
            yield b, order(b)
        return

    def make() -> tuple[Bucket, Ordered] | None:
        b = next(buckets, None)
        return None if b is None else (b, order(b))

    with ThreadPoolExecutor(1, thread_name_prefix="gmpscope-bucket") as pool:
        coming = pool.submit(make)
        while (got := coming.result()) is not None:
            coming = pool.submit(make)
            yield got
            del got


#: Rows of the procs' looked at a time for their steals.
STEAL_SLICE = 1 << 20


def steals_only(procs: Bucket, op: Ordered) -> tuple[Bucket, Ordered]:
    """The procs' rows a syscall's P can be found stolen by: each steal (a
    P's Running->Idle by another M than the one its Running before it came
    with; ingest/csrc/summaries.c's is_steal) and that row before it, each
    P's pairs in interval order. A steal is a fact of the procs' rows alone,
    so every bucket's syscalls find the same steals among these as among
    all the procs' rows (millions on a big trace, concatenated to each
    bucket's before)."""
    tr, order = procs.tr, op.order
    found: list[Arr] = []
    # A slice of the rows at a time: the temporaries stay small beside a
    # big trace's millions of procs' rows.
    for a in range(1, len(order), STEAL_SLICE):
        b = min(a + STEAL_SLICE, len(order))
        q, prev = order[a:b], order[a - 1:b - 1]
        steal = op.last[a - 1:b - 1] == 0
        steal &= tr.res[q] == PROC
        steal &= tr.frm[q] == RUNNING
        steal &= tr.to[q] == IDLE
        steal &= tr.to[prev] == RUNNING
        steal &= tr.m[prev] >= 0
        steal &= tr.m[q] != tr.m[prev]
        found.append(np.flatnonzero(steal) + a)
    # Each steal's place in the interval order.
    at = np.concatenate(found) if found else np.zeros(0, np.int64)
    # The pairs never overlap: a steal goes to Idle, the row before one to Running.
    keep = np.empty(2 * len(at), np.int64)
    keep[0::2], keep[1::2] = at - 1, at
    rows = order[keep]
    sub = Transitions(ts=tr.ts[rows], res=tr.res[rows], rid=tr.rid[rows], frm=tr.frm[rows],
                      to=tr.to[rows], reason=tr.reason[rows], m=tr.m[rows], p=tr.p[rows],
                      g=tr.g[rows], stack=tr.stack[rows], reasons=tr.reasons)
    n = len(rows)
    first = np.ones(n, bool)
    if n > 1:
        first[1:] = (sub.res[1:] != sub.res[:-1]) | (sub.rid[1:] != sub.rid[:-1])
    last = np.ones(n, bool)
    last[:-1] = first[1:]
    ordered = Ordered(order=np.arange(n, dtype=order.dtype), first=first.astype(op.first.dtype),
                      last=last.astype(op.last.dtype),
                      starts=np.flatnonzero(first).astype(op.starts.dtype), ts=sub.ts,
                      last_ts=op.last_ts)
    assert procs.seq is not None
    return Bucket(sub, procs.seq[rows]), ordered


def _concat(parts: list[Columns]) -> Columns:
    """Column-wise concatenation of tables with the same columns."""
    if not parts:
        return {}
    if len(parts) == 1:
        return parts[0]
    out: Columns = {}
    for name, first in parts[0].items():
        cols = [p[name] for p in parts]
        if isinstance(first, Nullable):
            out[name] = Nullable(np.concatenate([c.values for c in cols]),
                                 np.concatenate([c.null for c in cols]))
        elif isinstance(first, list):
            out[name] = [v for c in cols for v in c]
        else:
            out[name] = np.concatenate(cols)
    return out


def _rows_cols(names: tuple[str, ...], rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    return {n: [r[i] for r in rows] for i, n in enumerate(names)}
