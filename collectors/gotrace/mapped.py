"""A trace file read through a read-only memory mapping, given back as it is read.

Reading a 200 MB trace into a ``bytes`` object holds all of it in the
process's memory until the decode ends, when the decoder's output is at its
largest too: that was 200 MB of the ingest's peak. Mapped, the file's pages
come from the page cache as the decoder reaches them, and
:meth:`MappedTrace.release_before` hands back those it has passed
(``MADV_DONTNEED`` on a private read-only file mapping: the pages leave the
process, the page cache keeps them, and a page read again is mapped back from
it, so releasing too much can cost time but never correctness). The decoder
says how far it has come (``Decoder.consumed``: the start of the generation
it is decoding), so at any time the process holds about one generation of
the trace. Only the standard library is imported here.
"""

from __future__ import annotations

import hashlib
import mmap
import os
from pathlib import Path

#: Bytes hashed between two releases of the pages read.
HASH_BLOCK = 8 << 20


class MappedTrace:
    """The whole file ``path`` mapped read-only; ``buffer`` is what the
    decoder reads (it supports the buffer protocol, as ``bytes`` does)."""

    def __init__(self, path: Path) -> None:
        with open(path, "rb") as f:
            self.size = os.fstat(f.fileno()).st_size
            # An empty file cannot be mapped; the decoder says what it is.
            self.buffer: mmap.mmap | bytes = (
                mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if self.size else b"")
        self._released = 0

    def __len__(self) -> int:
        return self.size

    def sha256(self) -> str:
        """The file's sha256, read block by block and each block given back."""
        h = hashlib.sha256()
        view = memoryview(self.buffer)
        try:
            for at in range(0, self.size, HASH_BLOCK):
                h.update(view[at:at + HASH_BLOCK])
                self._drop(at, min(self.size, at + HASH_BLOCK))
        finally:
            view.release()
        return h.hexdigest()

    def release_before(self, offset: int) -> None:
        """Give back the pages wholly before ``offset`` (the decoder will not
        read them again)."""
        end = offset - offset % mmap.PAGESIZE
        if end > self._released:
            self._drop(self._released, end)
            self._released = end

    def close(self) -> None:
        """Unmap the file (once the decoder, which holds a view of it, is gone)."""
        if isinstance(self.buffer, mmap.mmap):
            self.buffer.close()

    def _drop(self, start: int, end: int) -> None:
        start -= start % mmap.PAGESIZE
        if isinstance(self.buffer, mmap.mmap) and end > start:
            self.buffer.madvise(mmap.MADV_DONTNEED, start, end - start)
