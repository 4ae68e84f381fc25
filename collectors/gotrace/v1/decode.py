"""Driver for the old trace family (on-disk versions 1.11, 1.19 and 1.21).

Like Go's reference reader, the whole trace is parsed, merged and checked
before the first event comes out: a damaged old trace yields no events but a
TraceFormatError (the format keeps its frequency, strings and stacks at the
end, so a truncated file cannot be decoded sensibly, and Go refuses it too).
"""

from __future__ import annotations

from collections.abc import Iterator

from collectors.gotrace.errors import TraceFormatError
from collectors.gotrace.model import Event, StackTable, TraceInfo
from collectors.gotrace.v1 import wire
from collectors.gotrace.v1.convert import Converter, mark_blocking_syscalls
from collectors.gotrace.v1.order import finish_times, merge
from collectors.gotrace.v1.parser import TS, Ev, Parser, to_int64
from collectors.gotrace.v1.validate import check

HEADER_LEN = 16


def parse_v1(data: bytes, version: str) -> tuple[Parser, list[Ev]]:
    """Parse, merge, time and validate an old trace; return the parser (its
    dictionaries) and the final list of old events."""
    minor = wire.FORMAT_MINOR.get(version)
    if minor is None:
        raise TraceFormatError(0, f"not an old-family trace version: {version}")
    parser = Parser(data, minor, HEADER_LEN)
    parser.index()
    events = merge(parser)
    finish_times(events, parser)
    check(events, parser.stacks)
    return parser, events


def decode_v1(
    data: memoryview, version: str, stacks: StackTable, info: TraceInfo
) -> Iterator[Event]:
    """Yield the events Go 1.27 reports for an old-family trace, in order.

    All the parsing happens before the first event is yielded; errors are
    TraceFormatError only."""
    try:
        parser, events = parse_v1(bytes(data), version)
    except RecursionError:  # pragma: no cover - defensive
        raise TraceFormatError(-1, "trace too deeply nested to decode") from None
    info.ticks_per_sec = parser.ticks_per_sec
    info.generations = 1  # Go treats an old trace as one generation
    conv = Converter(parser, stacks)
    mark_blocking_syscalls(events)
    yield from _emit(events, conv)


def _emit(events: list[Ev], conv: Converter) -> Iterator[Event]:
    syncs = 0
    if events:
        syncs = 1
        yield Event("Sync", to_int64(events[0][TS] - 1), n=1)
    pending: list[Event] = []
    out = pending.append
    last = -1
    convert = conv.convert
    for ev in events:
        convert(ev, out)
        if pending:
            for e in pending:
                t = e.ts
                if t <= last:
                    t = last + 1
                    if t > wire.INT64_MAX:
                        t = wire.INT64_MIN
                    e.ts = t
                last = t
                yield e
            pending.clear()
    yield Event("Sync", to_int64(last + 1), n=syncs + 1)
