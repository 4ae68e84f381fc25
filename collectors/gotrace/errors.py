"""The one exception type the decoder raises for bad input."""

from __future__ import annotations


class TraceFormatError(Exception):
    """The input is not a readable Go execution trace.

    ``offset`` is the byte offset in the file where the problem was found
    (-1 when it is not tied to one place); ``reason`` is a plain sentence.
    """

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(f"at byte {offset}: {reason}" if offset >= 0 else reason)
        self.offset = offset
        self.reason = reason
