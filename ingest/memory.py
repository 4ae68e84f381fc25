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

Between a load's steps the process gives memory back only once it holds
:data:`KEEP_FREE_BELOW` or more (:func:`give_back_if_big`): below that, what
one step frees is reused by the next instead of being returned and faulted
in (and zeroed) afresh. The 200 MB benchmark trace: wall 0.93 of trimming at
every step, its peak 632 -> 660 MiB; the 1 GB trace's 1395 -> 1426 MB
(bench/RESULTS.md; a mark of 768 MiB raised that one to 1822 MB: what the
decode's threads freed stayed, and the regions' pairing came on top). A
server gives it all back when a job ends (:func:`give_back_free_memory`).
"""

from __future__ import annotations

import ctypes
import os
from functools import cache

#: Resident memory from which a load's steps hand freed memory back: half
#: the 200 MB trace's 1 GB target (issue 24).
KEEP_FREE_BELOW = 512 << 20
#: The same for each of two processes deriving side by side (a load's forked
#: events' side, ingest.load.event_side): their sum is what the target bounds
#: (the 200 MB trace's summed peak 916-988 MiB with the whole mark each,
#: 873-937 with half: bench/RESULTS.md, session 36).
KEEP_FREE_BELOW_OF_TWO = KEEP_FREE_BELOW // 2


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


def resident_bytes() -> int | None:
    """The process's resident memory now (None where /proc cannot say)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def give_back_if_big(keep_below: int = KEEP_FREE_BELOW) -> bool:
    """Between a load's steps: :func:`give_back_free_memory` once the process
    holds ``keep_below`` bytes or more (or cannot tell); whether it did."""
    rss = resident_bytes()
    if rss is not None and rss < keep_below:
        return False
    give_back_free_memory()
    return True
