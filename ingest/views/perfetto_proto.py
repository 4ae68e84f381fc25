"""Perfetto track events encoded as protobuf bytes, millions at a time, in numpy.

A Perfetto trace is a ``Trace`` message: a run of ``packet`` fields (field 1),
each a ``TracePacket``. Writing 10^7 packets through protobuf objects costs
microseconds each in Python; here a batch of track events (slice begins and
ends, instants with a flow, counter values) is laid out with vectorized
varint writes instead: lengths first, offsets by a cumulative sum, then one
numpy pass per byte of each field. The few other packets (track descriptors,
interned names) are built with the ``perfetto`` package's own protos
(:mod:`ingest.views.perfetto`), and the tests read everything back with them.

Field numbers are those of ``perfetto/trace/trace_packet.proto`` and
``track_event.proto``; :func:`encode_events`' output parses as ``Trace``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
Arr = npt.NDArray[Any]

# TrackEvent.Type
SLICE_BEGIN = 1
SLICE_END = 2
INSTANT = 3
COUNTER = 4

# TracePacket.SequenceFlags
SEQ_INCREMENTAL_STATE_CLEARED = 1
SEQ_NEEDS_INCREMENTAL_STATE = 2

_VARINT, _FIXED64, _LEN = 0, 1, 2


def _tag(field: int, wire: int) -> bytes:
    return varint_bytes(field << 3 | wire)


def varint_bytes(value: int) -> bytes:
    """One unsigned varint."""
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


# Trace.packet; TracePacket: timestamp, trusted_packet_sequence_id, sequence_flags,
# track_event; TrackEvent: type, track_uuid, name_iid, flow_ids, terminating_flow_ids,
# counter_value.
_T_PACKET = _tag(1, _LEN)
_P_TS = _tag(8, _VARINT)
_P_SEQ = _tag(10, _VARINT)
_P_FLAGS = _tag(13, _VARINT)
_P_TE = _tag(11, _LEN)
_E_TYPE = _tag(9, _VARINT)
_E_TRACK = _tag(11, _VARINT)
_E_NAME = _tag(10, _VARINT)
_E_FLOW = _tag(47, _FIXED64)
_E_TERM = _tag(48, _FIXED64)
_E_COUNTER = _tag(30, _VARINT)


def varint_len(v: U64) -> I64:
    """Bytes of each value's varint (1 to 10)."""
    n = np.ones(len(v), np.int64)
    top = int(v.max()) if len(v) else 0
    for k in range(1, 10):
        if top < 1 << (7 * k):
            break
        n += v >= np.uint64(1 << (7 * k))
    return n


def _put_varint(buf: Arr, pos: I64, v: U64, n: I64) -> None:
    """Write varint ``v[i]`` (``n[i]`` bytes) at ``buf[pos[i]]``."""
    if not len(v):
        return
    v = v.copy()
    for k in range(int(n.max())):
        live = n > k
        byte = (v & np.uint64(0x7F)).astype(np.uint8)
        byte |= np.where(n > k + 1, 0x80, 0).astype(np.uint8)
        if live.all():
            buf[pos + k] = byte
        else:
            buf[pos[live] + k] = byte[live]
        v >>= np.uint64(7)


def _put_bytes(buf: Arr, pos: I64, data: bytes) -> None:
    for k, b in enumerate(data):
        buf[pos + k] = b


def _put_fixed64(buf: Arr, pos: I64, v: U64) -> None:
    raw = v.astype("<u8").view(np.uint8).reshape(-1, 8)
    for k in range(8):
        buf[pos + k] = raw[:, k]


def _u64(a: npt.ArrayLike) -> U64:
    return np.asarray(a).astype(np.int64, copy=False).view(np.uint64)


@dataclass
class Events:
    """A batch of track events, one entry per packet, in file order.

    ``name_iid``, ``flow_id`` and ``terminating_flow_id`` are left out of a
    packet where 0; ``counter_value`` is written for the COUNTER events only.
    """

    ts: I64
    type: npt.NDArray[np.integer[Any]]
    track_uuid: I64
    name_iid: I64
    flow_id: I64
    terminating_flow_id: I64
    counter_value: I64

    def __len__(self) -> int:
        return len(self.ts)


def events(ts: npt.ArrayLike, type_: npt.ArrayLike, track_uuid: npt.ArrayLike,
           name_iid: npt.ArrayLike | None = None, flow_id: npt.ArrayLike | None = None,
           terminating_flow_id: npt.ArrayLike | None = None,
           counter_value: npt.ArrayLike | None = None) -> Events:
    """An :class:`Events` batch (missing columns absent: zeros); scalars broadcast."""
    t = np.asarray(ts, np.int64)
    n = len(t)

    def col(a: npt.ArrayLike | None) -> I64:
        if a is None:
            return np.zeros(n, np.int64)
        return np.broadcast_to(np.asarray(a, np.int64), (n,))

    return Events(t, col(type_), col(track_uuid), col(name_iid), col(flow_id),
                  col(terminating_flow_id), col(counter_value))


def encode_events(ev: Events, sequence_id: int, flags: int = SEQ_NEEDS_INCREMENTAL_STATE
                  ) -> bytes:
    """The batch as ``Trace.packet`` fields: each a ``TracePacket`` with
    ``timestamp``, ``trusted_packet_sequence_id``, ``sequence_flags`` (when
    ``flags``) and a ``TrackEvent`` (``type``, ``track_uuid``, and where
    given ``name_iid``, ``flow_ids``, ``terminating_flow_ids``,
    ``counter_value``)."""
    n = len(ev)
    if n == 0:
        return b""
    ts = _u64(ev.ts)
    typ = _u64(ev.type)
    track = _u64(ev.track_uuid)
    name = _u64(ev.name_iid)
    counter = _u64(ev.counter_value)
    has_name = ev.name_iid != 0
    has_flow = ev.flow_id != 0
    has_term = ev.terminating_flow_id != 0
    has_counter = np.asarray(ev.type) == COUNTER

    n_type, n_track, n_name, n_counter = (varint_len(typ), varint_len(track),
                                          varint_len(name), varint_len(counter))
    te_len = (len(_E_TYPE) + n_type + len(_E_TRACK) + n_track
              + has_name * (len(_E_NAME) + n_name)
              + has_flow * (len(_E_FLOW) + 8) + has_term * (len(_E_TERM) + 8)
              + has_counter * (len(_E_COUNTER) + n_counter))
    n_te_len = varint_len(_u64(te_len))
    n_ts = varint_len(ts)
    head = (len(_P_SEQ) + len(varint_bytes(sequence_id))
            + (len(_P_FLAGS) + len(varint_bytes(flags)) if flags else 0))
    pkt_len = len(_P_TS) + n_ts + head + len(_P_TE) + n_te_len + te_len
    n_pkt_len = varint_len(_u64(pkt_len))
    total = len(_T_PACKET) + n_pkt_len + pkt_len
    start = np.zeros(n, np.int64)
    np.cumsum(total[:-1], out=start[1:])
    buf = np.empty(int(start[-1] + total[-1]), np.uint8)

    pos = start
    _put_bytes(buf, pos, _T_PACKET)
    pos = pos + len(_T_PACKET)
    _put_varint(buf, pos, _u64(pkt_len), n_pkt_len)
    pos += n_pkt_len
    _put_bytes(buf, pos, _P_TS)
    pos += len(_P_TS)
    _put_varint(buf, pos, ts, n_ts)
    pos += n_ts
    fixed = _P_SEQ + varint_bytes(sequence_id)
    if flags:
        fixed += _P_FLAGS + varint_bytes(flags)
    _put_bytes(buf, pos, fixed)
    pos += len(fixed)
    _put_bytes(buf, pos, _P_TE)
    pos += len(_P_TE)
    _put_varint(buf, pos, _u64(te_len), n_te_len)
    pos += n_te_len
    _put_bytes(buf, pos, _E_TYPE)
    pos += len(_E_TYPE)
    _put_varint(buf, pos, typ, n_type)
    pos += n_type
    _put_bytes(buf, pos, _E_TRACK)
    pos += len(_E_TRACK)
    _put_varint(buf, pos, track, n_track)
    pos += n_track
    _optional_varint(buf, pos, has_name, _E_NAME, name, n_name)
    pos += has_name * (len(_E_NAME) + n_name)
    _optional_fixed64(buf, pos, has_flow, _E_FLOW, _u64(ev.flow_id))
    pos += has_flow * (len(_E_FLOW) + 8)
    _optional_fixed64(buf, pos, has_term, _E_TERM, _u64(ev.terminating_flow_id))
    pos += has_term * (len(_E_TERM) + 8)
    _optional_varint(buf, pos, has_counter, _E_COUNTER, counter, n_counter)
    return buf.tobytes()


def _optional_varint(buf: Arr, pos: I64, present: Arr, tag: bytes, v: U64, n: I64) -> None:
    if not present.any():
        return
    p = pos[present]
    _put_bytes(buf, p, tag)
    _put_varint(buf, p + len(tag), v[present], n[present])


def _optional_fixed64(buf: Arr, pos: I64, present: Arr, tag: bytes, v: U64) -> None:
    if not present.any():
        return
    p = pos[present]
    _put_bytes(buf, p, tag)
    _put_fixed64(buf, p + len(tag), v[present])


def packet_field(packet: bytes) -> bytes:
    """One serialized ``TracePacket`` as a ``Trace.packet`` field."""
    return _T_PACKET + varint_bytes(len(packet)) + packet
