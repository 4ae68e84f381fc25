"""Low-level reading of the new trace family: varints and batch framing.

All functions work on an in-memory buffer and report problems with
:class:`WireError`, which carries the byte offset of the problem.
"""

from __future__ import annotations

from typing import NamedTuple

from collectors.gotrace.v2.specs import (
    EV_END_OF_GENERATION,
    EV_EVENT_BATCH,
    EV_EXPERIMENTAL_BATCH,
)

#: Largest batch payload the runtime writes (and Go's reader accepts).
MAX_BATCH_SIZE = 64 << 10
#: Largest string in the string table.
MAX_STRING_SIZE = 1 << 10
#: Largest number of frames in one stack.
MAX_FRAMES = 128

U64_MASK = (1 << 64) - 1
_I64_SIGN = 1 << 63
NO_ID = -1


class WireError(Exception):
    """Malformed trace data at a byte offset."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason


def as_i64(x: int) -> int:
    """Reinterpret a uint64 as int64 (Go's ID types are signed)."""
    return x - (1 << 64) if x >= _I64_SIGN else x


def uvarint(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    """Decode an unsigned LEB128 varint the way Go's ``binary.Uvarint`` does.

    Returns (value, new position); the position is negative when the input
    ends early (-1) or the value overflows 64 bits (-2).
    """
    x = 0
    s = 0
    i = 0
    while pos < end:
        b = buf[pos]
        pos += 1
        if i == 9 and b > 1:
            return 0, -2
        if b < 0x80:
            return x | (b << s), pos
        x |= (b & 0x7F) << s
        s += 7
        i += 1
        if i == 10:
            return 0, -2
    return 0, -1


class Batch(NamedTuple):
    """One framed batch: its header fields and a copy of its payload."""

    m: int  # thread id as Go's signed ThreadID
    time: int  # raw batch base timestamp
    data: bytes
    exp: int  # experiment id, 0 for ordinary batches
    offset: int  # file offset of the batch header
    data_offset: int  # file offset of the payload


class EndOfTrace(Exception):
    """Clean end of input at a batch boundary (Go's ``io.EOF``)."""


def read_batch(buf: bytes | memoryview, pos: int) -> tuple[Batch, int, int]:
    """Frame the batch starting at ``pos``.

    Returns (batch, generation number, position after the batch). Raises
    :class:`EndOfTrace` at a clean end, :class:`WireError` otherwise.
    """
    end = len(buf)
    if pos >= end:
        raise EndOfTrace()
    start = pos
    typ = buf[pos]
    pos += 1
    if typ == EV_END_OF_GENERATION:
        return Batch(NO_ID, 0, bytes((typ,)), 0, start, start), 0, pos
    if typ != EV_EVENT_BATCH and typ != EV_EXPERIMENTAL_BATCH:
        raise WireError(start, f"expected batch event, got event {typ}")
    exp = 0
    if typ == EV_EXPERIMENTAL_BATCH:
        if pos >= end:
            # Go returns the bare end-of-file here, which its reader treats
            # as a clean end of the trace.
            raise EndOfTrace()
        exp = buf[pos]
        pos += 1
    fields = []
    for what in ("gen", "M ID", "timestamp", "size"):
        v, npos = uvarint(buf, pos, min(end, pos + 10))
        if npos < 0:
            if npos == -2:
                raise WireError(
                    pos, f"error reading batch {what}: varint overflows a 64-bit integer"
                )
            # Go's wording: plain "EOF" when not a single byte of the field is there.
            eof = "EOF" if pos >= end else "unexpected EOF"
            raise WireError(pos, f"error reading batch {what}: {eof}")
        fields.append(v)
        pos = npos
    gen, m, ts, size = fields
    if size > MAX_BATCH_SIZE:
        raise WireError(start, f"invalid batch size {size}, maximum is {MAX_BATCH_SIZE}")
    if pos + size > end:
        raise WireError(start, f"failed to read full batch: read {end - pos} but wanted {size}")
    data = bytes(buf[pos : pos + size])
    return Batch(as_i64(m), ts, data, exp, start, pos), gen, pos + size
