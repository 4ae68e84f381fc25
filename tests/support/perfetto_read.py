"""A Perfetto trace read back with the ``perfetto`` package's protos, and put
together as Perfetto's trace processor does for track events: packets sorted
by timestamp (file order kept for equal times), interned event names resolved
per sequence, each track's begin/end events paired into slices (an end
without a begin, or a begin never ended, fails), flows matched by id from the
slice or instant that starts them to the one that ends them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

BEGIN, END, INSTANT, COUNTER = 1, 2, 3, 4


@dataclass
class Track:
    uuid: int
    name: str
    parent: int
    is_counter: bool
    unit: int
    #: (start, end, name, depth)
    slices: list[tuple[int, int, str, int]] = field(default_factory=list)
    #: (ts, name)
    instants: list[tuple[int, str]] = field(default_factory=list)
    #: (ts, value)
    counts: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class Flow:
    """A flow from a slice or instant (its track and time) to a slice's begin."""

    source_track: int
    source_ts: int
    dest_track: int = 0
    dest_ts: int = -1
    dest_name: str = ""


@dataclass
class PerfettoTrace:
    tracks: dict[int, Track]
    flows: dict[int, Flow]
    packets: int

    def by_name(self, name: str, parent: int | None = None) -> Track:
        found = [t for t in self.tracks.values()
                 if t.name == name and (parent is None or t.parent == parent)]
        assert len(found) == 1, (name, len(found))
        return found[0]

    def children(self, uuid: int) -> list[Track]:
        return [t for t in self.tracks.values() if t.parent == uuid]


def read(path: Path | bytes) -> PerfettoTrace:
    """The trace at ``path`` (or its bytes), checked and put together."""
    data = path if isinstance(path, bytes) else Path(path).read_bytes()
    trace = pb.Trace()
    trace.ParseFromString(data)
    tracks: dict[int, Track] = {}
    names: dict[tuple[int, int], str] = {}
    events: list[tuple[int, int, pb.TrackEvent]] = []
    cleared: set[int] = set()
    for i, pkt in enumerate(trace.packet):
        seq = pkt.trusted_packet_sequence_id
        if pkt.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
            cleared.add(seq)
            names = {k: v for k, v in names.items() if k[0] != seq}
        if pkt.HasField("interned_data"):
            assert seq in cleared, "interned data before the sequence's state was cleared"
            for n in pkt.interned_data.event_names:
                names[(seq, n.iid)] = n.name
        if pkt.HasField("track_descriptor"):
            d = pkt.track_descriptor
            assert d.uuid not in tracks, f"track {d.uuid} described twice"
            tracks[d.uuid] = Track(d.uuid, d.name, d.parent_uuid, d.HasField("counter"),
                                   d.counter.unit)
        if pkt.HasField("track_event"):
            ev = pkt.track_event
            if ev.name_iid:
                assert (seq, ev.name_iid) in names, f"name iid {ev.name_iid} not interned"
                ev.name = names[(seq, ev.name_iid)]
            events.append((pkt.timestamp, i, ev))
    events.sort(key=lambda e: (e[0], e[1]))
    open_: dict[int, list[tuple[int, str]]] = {}
    flows: dict[int, Flow] = {}
    for ts, _, ev in events:
        assert ev.track_uuid in tracks, f"event on undescribed track {ev.track_uuid}"
        t = tracks[ev.track_uuid]
        stack = open_.setdefault(t.uuid, [])
        if ev.type == BEGIN:
            stack.append((ts, ev.name))
            for fid in ev.terminating_flow_ids:
                assert fid in flows and flows[fid].dest_ts < 0, f"flow {fid} ends unstarted"
                flows[fid].dest_track, flows[fid].dest_ts = t.uuid, ts
                flows[fid].dest_name = ev.name
        elif ev.type == END:
            assert stack, f"end without begin on {t.name} at {ts}"
            start, name = stack.pop()
            t.slices.append((start, ts, name, len(stack)))
        elif ev.type == INSTANT:
            t.instants.append((ts, ev.name))
            for fid in ev.flow_ids:
                assert fid not in flows, f"flow {fid} started twice"
                flows[fid] = Flow(t.uuid, ts)
        elif ev.type == COUNTER:
            assert t.is_counter, f"counter value on {t.name}"
            t.counts.append((ts, ev.counter_value))
    for uuid, stack in open_.items():
        assert not stack, f"{len(stack)} slices never ended on {tracks[uuid].name}"
    for fid, f in flows.items():
        assert f.dest_ts >= 0, f"flow {fid} never ends"
    for t in tracks.values():
        t.slices.sort()
    return PerfettoTrace(tracks, flows, len(trace.packet))
