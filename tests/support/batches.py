"""Where the batches of a new-format (Go 1.22+) trace start: for cutting
real traces at meaningful points in the truncation tests."""

from __future__ import annotations

from collectors.gotrace.v2.wire import EndOfTrace, WireError, read_batch

HEADER = 16


def batch_starts(data: bytes) -> list[tuple[int, int]]:
    """(offset, generation) of every batch (0 for end-of-generation markers)."""
    out = []
    pos = HEADER
    while True:
        try:
            _, gen, npos = read_batch(data, pos)
        except (EndOfTrace, WireError):
            return out
        out.append((pos, gen))
        pos = npos
