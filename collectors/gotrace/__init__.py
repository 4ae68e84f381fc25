"""Decoder for Go execution traces (the files ``runtime/trace`` writes)."""

from collectors.gotrace.errors import TraceFormatError
from collectors.gotrace.model import Event, Frame, StackTable, TraceInfo
from collectors.gotrace.reader import DecodedTrace, open_trace, read_header

__all__ = [
    "DecodedTrace",
    "Event",
    "Frame",
    "StackTable",
    "TraceFormatError",
    "TraceInfo",
    "open_trace",
    "read_header",
]
