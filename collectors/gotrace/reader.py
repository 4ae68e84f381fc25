"""Entry point: detect the trace family from the header and dispatch."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from collectors.gotrace.errors import TraceFormatError
from collectors.gotrace.model import Event, StackTable, TraceInfo

#: On-disk versions of the old family (Go 1.11 through 1.21).
V1_VERSIONS = ("1.11", "1.19", "1.21")
#: On-disk versions of the new family (Go 1.22 and later; 1.26 and 1.27 write 1.26).
V2_VERSIONS = ("1.22", "1.23", "1.25", "1.26")

_HEADER_LEN = 16
_HEADER_RE = re.compile(rb"go 1\.(\d+) trace\x00*")


def read_header(data: bytes | memoryview) -> tuple[str, str]:
    """Return (on-disk version such as "1.22", family "v1" or "v2").

    Raises TraceFormatError naming what was found when the header is not one
    we read.
    """
    head = bytes(data[:_HEADER_LEN])
    if len(head) < _HEADER_LEN:
        raise TraceFormatError(0, f"file too short for a Go trace header ({len(head)} bytes)")
    m = _HEADER_RE.fullmatch(head)
    if m is None:
        shown = head.split(b"\x00", 1)[0][:16].decode("ascii", "replace")
        raise TraceFormatError(0, f"not a Go execution trace: header is {shown!r}")
    version = f"1.{int(m.group(1))}"
    if version in V1_VERSIONS:
        return version, "v1"
    if version in V2_VERSIONS:
        return version, "v2"
    raise TraceFormatError(
        0,
        f"unsupported Go trace version {version} (this build reads "
        f"{', '.join(V1_VERSIONS + V2_VERSIONS)})",
    )


@dataclass
class DecodedTrace:
    """A trace being decoded: iterate ``events()`` once; ``info`` and
    ``stacks`` are complete after the iteration has finished."""

    info: TraceInfo
    stacks: StackTable = field(default_factory=StackTable)
    _events: Callable[[], Iterator[Event]] | None = None

    def events(self) -> Iterator[Event]:
        if self._events is None:
            raise RuntimeError("events() can be iterated only once")
        gen, self._events = self._events, None
        return gen()


def open_trace(data: bytes | memoryview) -> DecodedTrace:
    """Prepare to decode a whole trace held in memory (bytes or mmap)."""
    view = memoryview(data)
    version, family = read_header(view)
    info = TraceInfo(go_version=version, family=family)
    trace = DecodedTrace(info=info)
    if family == "v2":
        from collectors.gotrace.v2.decode import decode_v2

        trace._events = lambda: decode_v2(view, version, trace.stacks, info)
    else:
        from collectors.gotrace.v1.decode import decode_v1

        trace._events = lambda: decode_v1(view, version, trace.stacks, info)
    return trace
