"""Keeping a big load's memory peak down: handing freed memory back to the system.

Loading a 4-million-event trace allocates and frees hundreds of MB of numpy
temporaries and Python values. Two allocators keep what is freed for reuse:
Arrow's pool (gmpscope processes use Arrow's system pool, see
gmpscope.cli.configure_process: its mimalloc default kept ~50 MB more of a
load's peak), and glibc's malloc, which by default
raises its mmap threshold after a large block is freed, so that later arrays
of up to 32 MB come from the heap, which only shrinks when trimmed. Measured
on the 25 MB benchmark trace: the load's live data at its heaviest is about
230 MB (tracemalloc), while the process held 670 MB. The loader trims between
its phases (after decoding, before building the views' lane sets). Fixing the
mmap threshold (mallopt) instead saved ~30 MB of peak and cost ~2 s of the
load (every large temporary page-faulted afresh): not done.
"""

from __future__ import annotations

import ctypes
from functools import cache


@cache
def _libc() -> ctypes.CDLL | None:
    # The process's own symbols, the C library's among them (no
    # ctypes.util.find_library: it runs ldconfig in a subprocess, ~15 ms).
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def give_back_free_memory() -> None:
    """Return what Arrow's pool and glibc's heap keep of freed memory."""
    import pyarrow as pa  # type: ignore[import-untyped]

    pa.default_memory_pool().release_unused()
    libc = _libc()
    trim = getattr(libc, "malloc_trim", None) if libc is not None else None
    if trim is not None:  # glibc only
        trim(0)
