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
def libc() -> ctypes.CDLL | None:
    """The C library through the process's own symbols (no
    ctypes.util.find_library: it runs ldconfig in a subprocess, ~15 ms), with
    ``errno`` kept for ctypes.get_errno; None where it cannot be loaded."""
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def give_back_free_memory() -> None:
    """Return what Arrow's pool and glibc's heap keep of freed memory."""
    import pyarrow as pa  # type: ignore[import-untyped]

    pa.default_memory_pool().release_unused()
    c = libc()
    trim = getattr(c, "malloc_trim", None) if c is not None else None
    if trim is not None:  # glibc only
        trim(0)
