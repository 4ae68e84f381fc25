"""One pass over an old-family trace: split it into per-P batches of raw events.

Go's reference parser reads the file twice: an indexing pass that only
steps over arguments, then one batch at a time with full checks. We decode
everything once, here, and keep the checks that only the second reading
makes as *deferred* errors on the raw event, raised when (and if) the batch
is loaded, so that which error wins is the same as in Go.

A raw event is a tuple ``(type, args, text, offset, deferred error)``;
String entries carry ``[id]`` and their text. Strings that precede the first
batch are never read by Go's second reading and are dropped.
"""

from __future__ import annotations

from collectors.gotrace.errors import TraceFormatError
from collectors.gotrace.v1.wire import (
    DESCS,
    EV_BATCH,
    EV_COUNT,
    EV_CPU_SAMPLE,
    EV_NONE,
    EV_STRING,
    EV_USER_LOG,
    MALFORMED_VARINT,
    MASK64,
    MAX_ARG_BLOCK,
    MAX_STRING,
    Malformed,
    uvarint,
)

Raw = tuple[int, list[int], str | None, int, str | None]

_MIN_VERSION = tuple(d.min_version for d in DESCS)


def as_text(raw: bytes) -> str:
    # Go keeps the bytes as they are; surrogateescape round-trips invalid UTF-8.
    return raw.decode("utf-8", "surrogateescape")


def _block(data: bytes, off: int, end: int) -> list[int]:
    out: list[int] = []
    while off < end:
        b = data[off]
        if b < 0x80:
            out.append(b)
            off += 1
        else:
            v, off = uvarint(data, off, end)
            out.append(v)
    return out


class Scan:
    """Batches per P (in first-seen P order) and the CPU samples' raw args."""

    def __init__(self) -> None:
        self.batches: dict[int, list[list[Raw]]] = {}
        self.cpu_samples: list[tuple[int, list[int]]] = []


def scan(data: bytes, start: int, minor: int) -> Scan:
    """Split ``data[start:]`` into batches, failing where Go's indexing pass fails."""
    out = Scan()
    batches = out.batches
    end = len(data)
    off = start
    cur: list[Raw] | None = None
    cur_p = 0
    min_version = _MIN_VERSION
    while off < end:
        at = off
        b = data[off]
        off += 1
        typ = b & 0x3F
        narg = (b >> 6) + 1
        if typ == EV_NONE or typ >= EV_COUNT or min_version[typ] > minor:
            raise TraceFormatError(at, f"unknown event type {typ}")
        err: str | None = None
        text: str | None = None
        if typ == EV_STRING:
            try:
                sid, off = uvarint(data, off, end)
                ln, off = uvarint(data, off, end)
            except Malformed:
                raise TraceFormatError(at, MALFORMED_VARINT) from None
            if ln > end - off:
                raise TraceFormatError(at, "failed to read trace: EOF")
            if ln == 0:
                err = "string has invalid length 0"
            elif ln > MAX_STRING:
                err = f"string has too large length {ln}"
            else:
                text = as_text(data[off : off + ln])
            off += ln
            if cur is not None:
                cur.append((EV_STRING, [sid], text, at, err))
            continue
        if typ == EV_BATCH:
            if narg != 2:
                raise TraceFormatError(
                    at, f"EvBatch has wrong number of arguments: got {narg}, want 2"
                )
            try:
                pid, off = uvarint(data, off, end)
                if pid != MASK64 and pid > 0x7FFFFFFF:
                    raise TraceFormatError(
                        at, f"processor ID {pid} is larger than maximum of {MASK64}"
                    )
                ticks, off = uvarint(data, off, end)
            except Malformed:
                raise TraceFormatError(at, MALFORMED_VARINT) from None
            cur_p = -1 if pid == MASK64 else pid
            cur = []
            batches.setdefault(cur_p, []).append(cur)
            cur.append((EV_BATCH, [pid, ticks], None, at, None))
            continue
        args: list[int] = []
        if narg <= 3:
            try:
                for _ in range(narg):
                    if off < end and data[off] < 0x80:
                        args.append(data[off])
                        off += 1
                    else:
                        v, off = uvarint(data, off, end)
                        args.append(v)
            except Malformed:
                raise TraceFormatError(
                    at, f"failed to read event {typ} argument: {MALFORMED_VARINT}"
                ) from None
            if typ == EV_CPU_SAMPLE:
                # Go's indexing pass drops inline arguments, a sample's too.
                raise TraceFormatError(
                    at, "CPU sample has wrong number of arguments: want 5, got 0"
                )
        else:
            try:
                size, off = uvarint(data, off, end)
            except Malformed:
                raise TraceFormatError(
                    at, f"failed to read event {typ} argument: {MALFORMED_VARINT}"
                ) from None
            if size > MAX_ARG_BLOCK:
                raise TraceFormatError(
                    at,
                    f"failed to read event {typ} argument: length-prefixed argument too big: "
                    f"{size} bytes, limit is {MAX_ARG_BLOCK}",
                )
            if size > end - off or off >= end:
                # Go refuses even an empty block starting at the very end, but
                # only when it reads the block (CPU samples: right away).
                if typ == EV_CPU_SAMPLE:
                    raise TraceFormatError(at, "failed to read trace: unexpected EOF")
                if size > end - off:
                    raise TraceFormatError(at, "failed to read trace: EOF")
                err = "failed to read trace: unexpected EOF"
            else:
                try:
                    args = _block(data, off, off + size)
                except Malformed:
                    if typ == EV_CPU_SAMPLE:
                        raise TraceFormatError(at, MALFORMED_VARINT) from None
                    err = MALFORMED_VARINT
            off += size
            if typ == EV_USER_LOG:
                # A UserLog's message follows its arguments as a length-prefixed string.
                try:
                    ln, off = uvarint(data, off, end)
                except Malformed:
                    raise TraceFormatError(at, MALFORMED_VARINT) from None
                if ln > MAX_STRING:
                    err = err or f"string is too large (len={ln})"
                elif ln > end - off:
                    err = err or "failed to read trace: unexpected EOF"
                else:
                    text = as_text(data[off : off + ln])
                if ln > end - off:
                    # Go's indexing pass takes this for the end of the data
                    # (loading the batch later fails on it).
                    if cur is not None:
                        cur.append((typ, args, text, at, err))
                    break
                off += ln
        if cur is None:
            raise TraceFormatError(
                at, f"read event {typ} with current P of {cur_p}, but P has no batches yet"
            )
        if typ == EV_CPU_SAMPLE:
            if len(args) != 5:
                raise TraceFormatError(
                    at, f"CPU sample has wrong number of arguments: want 5, got {len(args)}"
                )
            out.cpu_samples.append((at, args))
            continue
        cur.append((typ, args, text, at, err))
    return out
