"""A trace as a Perfetto protobuf trace (track events), streamed.

:func:`stream` yields the file's bytes a chunk at a time: what the CLI
(``gmpscope export ID --format perfetto``) writes and the API
(``GET /api/traces/<id>/perfetto``) sends. The file opens in the Perfetto UI
(ui.perfetto.dev) and in its trace processor's SQL (docs/perfetto.md):

- a track per P (the goroutines it ran), per M (the goroutines running or in
  a syscall on it), and per goroutine, under a track per goroutine group
  (start function), all under three top-level tracks;
- the goroutines' states as slices, wake-ups as flows, and counter tracks
  (runtime metrics, goroutines, threads in a syscall).

Every packet is on one trusted sequence (1), whose interned event names
(state names, goroutine labels) keep each slice's name to a varint. A
track's events are written in its time order, track after track (Perfetto's
trace processor sorts the whole file by time, keeping file order for equal
times). What is in the tracks is :mod:`ingest.views.perfetto_data`'s; the
bulk packets are encoded by :mod:`ingest.views.perfetto_proto`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb  # type: ignore[import-untyped]
from sqlalchemy import Engine

from ingest.derive.frames import TraceFrames
from ingest.views import perfetto_data as pd
from ingest.views import perfetto_proto as pp

I64 = npt.NDArray[np.int64]

SEQUENCE = 1
#: Rows per chunk: a chunk's events take ~300 bytes each while they are
#: ordered and encoded, so this bounds the export's working memory (~80 MB).
CHUNK_ROWS = 1 << 17
#: Names or descriptors per packet batch.
_BATCH = 20_000

ROOT_P, ROOT_M, ROOT_G = 1, 2, 3
_FIRST_UUID = 16

_UNITS = {"bytes": pb.CounterDescriptor.UNIT_SIZE_BYTES, "count": pb.CounterDescriptor.UNIT_COUNT}
_EXPLICIT = pb.TrackDescriptor.EXPLICIT


@dataclass
class Layout:
    """Track uuids and interned name ids of one export."""

    counters: list[tuple[int, str, str]] = field(default_factory=list)  # uuid, name, unit
    p_ids: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    p_base: int = 0
    m_base: int = 0
    group_base: int = 0
    g_base: int = 0
    wake_iid: int = 0
    label_base: int = 0  # goroutine i: label_base + 2i (running), + 2i + 1 (syscall)


def stream(engine: Engine, frames: TraceFrames,
           progress: Callable[[str], None] | None = None) -> Iterator[bytes]:
    """The Perfetto trace of ``frames``' trace, chunk by chunk."""
    say = progress or (lambda _stage: None)
    gs = pd.goroutines(engine, frames)
    state_names, name_of_kind = pd.kind_names(frames)
    lay = Layout()
    yield _interned_states(state_names, lay)
    say("tracks")
    threads = pd.thread_rows(frames)
    metrics = pd.metric_names(engine, frames.trace_id)
    yield from _descriptors(frames, gs, threads, metrics, lay)
    yield from _labels(gs, lay)
    say("goroutines")
    wake = pd.wakeups(frames)
    yield from _goroutine_events(frames, gs, name_of_kind, wake, lay)
    del wake
    # Each section reads whole columns: their pages go back to the page cache
    # after it, or the process would hold the trace's columns at the end.
    frames.release()
    say("procs")
    yield from _proc_events(frames, gs, lay)
    frames.release()
    say("threads")
    yield from _thread_events(frames, gs, threads, lay)
    del threads
    frames.release()
    say("counters")
    yield from _counter_events(engine, frames, metrics, lay)
    frames.release()


def write(engine: Engine, frames: TraceFrames, out: BinaryIO) -> int:
    """Write the trace to ``out``; returns the bytes written."""
    n = 0
    for chunk in stream(engine, frames):
        out.write(chunk)
        n += len(chunk)
    return n


# --------------------------------------------------------------------------
# small packets, through the perfetto package's protos


def _packets(items: list[Any]) -> bytes:
    # Each packet serialized on its own: copying 10^5 messages into one Trace
    # (extend) costs ten times more than the encoding.
    return b"".join(pp.packet_field(p.SerializeToString()) for p in items)


def _interned_states(names: list[str], lay: Layout) -> bytes:
    """The sequence's first packet: its incremental state cleared, the state
    names interned (iids 1..), then the wake-up instants' name."""
    pkt = pb.TracePacket(trusted_packet_sequence_id=SEQUENCE,
                         sequence_flags=pp.SEQ_INCREMENTAL_STATE_CLEARED)
    for i, name in enumerate(names):
        pkt.interned_data.event_names.add(iid=i + 1, name=name)
    lay.wake_iid = len(names) + 1
    pkt.interned_data.event_names.add(iid=lay.wake_iid, name="wake-up")
    lay.label_base = lay.wake_iid + 1
    return _packets([pkt])


def _track(uuid: int, name: str, parent: int = 0, rank: int | None = None,
           ordering: int | None = None, unit: str | None = None) -> Any:
    pkt = pb.TracePacket(trusted_packet_sequence_id=SEQUENCE)
    d = pkt.track_descriptor
    d.uuid = uuid
    d.name = name
    if parent:
        d.parent_uuid = parent
    if rank is not None:
        d.sibling_order_rank = rank
    if ordering is not None:
        d.child_ordering = ordering
    if unit is not None:
        d.counter.unit = _UNITS[unit]
    return pkt


def _descriptors(frames: TraceFrames, gs: pd.Goroutines, threads: pd.ThreadRows,
                 metrics: list[tuple[str, int]], lay: Layout) -> Iterator[bytes]:
    nxt = _FIRST_UUID
    counters = [(name, pd.metric_unit(name)) for name, _ in metrics]
    counters += [("Goroutines", "count"), ("Threads in syscall", "count")]
    for name, unit in counters:
        lay.counters.append((nxt, name, unit))
        nxt += 1
    lay.p_ids = np.unique(np.asarray(frames.proc_runs["p"], np.int64))
    lay.p_base = nxt
    nxt += len(lay.p_ids)
    lay.m_base = nxt
    nxt += len(threads.ms)
    lay.group_base = nxt
    nxt += len(gs.groups)
    lay.g_base = nxt
    items = [_track(u, name, rank=i, unit=unit) for i, (u, name, unit) in enumerate(lay.counters)]
    n_c = len(items)
    items += [_track(ROOT_P, "Procs (P)", rank=n_c, ordering=_EXPLICIT),
              _track(ROOT_M, "Threads (M)", rank=n_c + 1, ordering=_EXPLICIT),
              _track(ROOT_G, "Goroutines by start function", rank=n_c + 2,
                     ordering=_EXPLICIT)]
    items += [_track(lay.p_base + i, f"P{p}", ROOT_P, rank=i)
              for i, p in enumerate(lay.p_ids.tolist())]
    items += [_track(lay.m_base + i, f"M{m}", ROOT_M, rank=i)
              for i, m in enumerate(threads.ms.tolist())]
    sizes = np.bincount(gs.group, minlength=len(gs.groups))
    items += [_track(lay.group_base + i, f"{fn or '(unknown start)'} ({int(sizes[i])})",
                     ROOT_G, rank=i, ordering=_EXPLICIT) for i, fn in enumerate(gs.groups)]
    yield _packets(items)
    for a in range(0, len(gs.ids), _BATCH):
        ids = gs.ids[a:a + _BATCH].tolist()
        grp = gs.group[a:a + _BATCH].tolist()
        yield _packets([_track(lay.g_base + goid, f"G{goid}", lay.group_base + g, rank=a + i)
                        for i, (goid, g) in enumerate(zip(ids, grp, strict=True))])


def _labels(gs: pd.Goroutines, lay: Layout) -> Iterator[bytes]:
    """Each goroutine's two labels interned: running, and in a syscall."""
    for a in range(0, len(gs.ids), _BATCH):
        pkt = pb.TracePacket(trusted_packet_sequence_id=SEQUENCE,
                             sequence_flags=pp.SEQ_NEEDS_INCREMENTAL_STATE)
        names = pkt.interned_data.event_names
        ids = gs.ids[a:a + _BATCH].tolist()
        grp = gs.group[a:a + _BATCH].tolist()
        for i, (goid, g) in enumerate(zip(ids, grp, strict=True)):
            label = pd.goroutine_label(goid, gs.groups[g])
            iid = lay.label_base + 2 * (a + i)
            names.add(iid=iid, name=label)
            names.add(iid=iid + 1, name=f"syscall: {label}")
        yield _packets([pkt])


# --------------------------------------------------------------------------
# bulk packets


def _goroutine_events(frames: TraceFrames, gs: pd.Goroutines, name_of_kind: I64,
                      wake: pd.Wakeups, lay: Layout) -> Iterator[bytes]:
    """Each goroutine's slices in its time order, with the wake-ups it made
    as instants (each a flow's start) inside them: row r's begin, its
    instants, its end, keyed 3r, 3r + 1, 3r + 2."""
    iv = frames.intervals
    n = pd.n_goroutine_rows(frames)
    for a in range(0, n, CHUNK_ROWS):
        b = min(a + CHUNK_ROWS, n)
        name = name_of_kind[np.asarray(iv["kind"][a:b])]
        keep = np.flatnonzero(name >= 0)
        rows = keep + a
        track = lay.g_base + np.asarray(iv["rid"][a:b], np.int64)[keep]
        start = np.asarray(iv["start_ts"][a:b], np.int64)[keep]
        end = np.maximum(np.asarray(iv["end_ts"][a:b], np.int64)[keep], start)
        term = np.where(wake.ends[rows], rows, 0)
        lo, hi = np.searchsorted(wake.waker_row, [a, b])
        w_row = wake.waker_row[lo:hi]
        k = len(rows)
        key = np.concatenate([3 * rows, 3 * rows + 2, 3 * w_row + 1])
        ts = np.concatenate([start, end, wake.ts[lo:hi]])
        typ = np.concatenate([np.full(k, pp.SLICE_BEGIN), np.full(k, pp.SLICE_END),
                              np.full(hi - lo, pp.INSTANT)])
        trk = np.concatenate([track, track,
                              lay.g_base + np.asarray(iv["rid"][w_row], np.int64)])
        nm = np.concatenate([name[keep] + 1, np.zeros(k, np.int64),
                             np.full(hi - lo, lay.wake_iid)])
        flow = np.concatenate([np.zeros(2 * k, np.int64), wake.source[lo:hi] + 1])
        tflow = np.concatenate([term, np.zeros(k + hi - lo, np.int64)])
        order = np.argsort(key, kind="stable")
        yield pp.encode_events(pp.events(ts[order], typ[order], trk[order], nm[order],
                                         flow[order], tflow[order]), SEQUENCE)


def _slices(track: I64, start: I64, end: I64, name: I64) -> bytes:
    """Begin/end pairs of slices already in each track's time order."""
    k = len(start)
    ts = np.empty(2 * k, np.int64)
    ts[0::2], ts[1::2] = start, end
    typ = np.tile(np.array([pp.SLICE_BEGIN, pp.SLICE_END], np.int64), k)
    nm = np.zeros(2 * k, np.int64)
    nm[0::2] = name
    return pp.encode_events(pp.events(ts, typ, np.repeat(track, 2), nm), SEQUENCE)


def _label_iid(gs: pd.Goroutines, lay: Layout, goid: I64, syscall: Any) -> I64:
    gi = gs.index(goid)
    iid = lay.label_base + 2 * gi + np.asarray(syscall, np.int64)
    return np.where(gi >= 0, iid, 0).astype(np.int64)  # 0: no name (no such goroutine)


def _proc_events(frames: TraceFrames, gs: pd.Goroutines, lay: Layout) -> Iterator[bytes]:
    """Each P's goroutine runs (``proc_runs``, in (p, time) order)."""
    pr = frames.proc_runs
    n = len(pr)
    for a in range(0, n, CHUNK_ROWS):
        b = min(a + CHUNK_ROWS + 1, n)  # one row ahead, to cut the last end
        p = np.asarray(pr["p"][a:b], np.int64)
        start = np.asarray(pr["start_ts"][a:b], np.int64)
        end = np.asarray(pr["end_ts"][a:b], np.int64)
        same = np.r_[p[1:] == p[:-1], False]
        cut = np.where(same, pd.clipped_ends(start, end), np.maximum(end, start))
        m = min(CHUNK_ROWS, n - a)
        track = lay.p_base + np.searchsorted(lay.p_ids, p[:m])
        name = _label_iid(gs, lay, np.asarray(pr["g"][a:a + m], np.int64), 0)
        yield _slices(track, start[:m], cut[:m], name)


def _thread_events(frames: TraceFrames, gs: pd.Goroutines, threads: pd.ThreadRows,
                   lay: Layout) -> Iterator[bytes]:
    """Each M's goroutine Running and Syscall intervals, in time order."""
    iv = frames.intervals
    syscall_kind = np.zeros(max(frames.kinds, default=0) + 1, np.int64)
    for code, k in frames.kinds.items():
        syscall_kind[code] = k.to_state == "Syscall"
    for j in range(len(threads.ms)):
        lo, hi = int(threads.off[j]), int(threads.off[j + 1])
        for a in range(lo, hi, CHUNK_ROWS):
            b = min(a + CHUNK_ROWS + 1, hi)
            rows = threads.rows[a:b].astype(np.int64)
            start = np.asarray(iv["start_ts"][rows], np.int64)
            end = pd.clipped_ends(start, np.asarray(iv["end_ts"][rows], np.int64))
            m = min(CHUNK_ROWS, hi - a)
            rows = rows[:m]
            name = _label_iid(gs, lay, np.asarray(iv["rid"][rows], np.int64),
                              syscall_kind[np.asarray(iv["kind"][rows])])
            yield _slices(np.full(m, lay.m_base + j, np.int64), start[:m], end[:m], name)


def _counter_events(engine: Engine, frames: TraceFrames, metrics: list[tuple[str, int]],
                    lay: Layout) -> Iterator[bytes]:
    uuid = {name: u for u, name, _ in lay.counters}
    for name, _count in metrics:
        for ts, value in pd.metric_chunks(engine, frames.trace_id, name):
            yield pp.encode_events(pp.events(ts, pp.COUNTER, uuid[name],
                                             counter_value=value), SEQUENCE)
    for c in (pd.goroutine_counter(frames), pd.syscall_counter(frames)):
        for a in range(0, len(c.ts), CHUNK_ROWS):
            yield pp.encode_events(pp.events(c.ts[a:a + CHUNK_ROWS], pp.COUNTER, uuid[c.name],
                                             counter_value=c.value[a:a + CHUNK_ROWS]), SEQUENCE)
