"""ingest.memory: freed memory handed back between a load's steps only once the
process is big, and whole at the end of a server's job."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest import memory


def _vm_rss() -> int:
    """The kernel's own figure, from /proc/self/status (kB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS line")


def test_resident_bytes_is_the_kernels_figure() -> None:
    got = memory.resident_bytes()
    assert got is not None
    # Two reads a moment apart: within a few MB of each other.
    assert abs(got - _vm_rss()) < 8 << 20, (got, _vm_rss())


def test_given_back_only_at_or_above_the_mark(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(memory, "give_back_free_memory", lambda: calls.append(1))
    rss = memory.resident_bytes()
    assert rss is not None
    assert memory.give_back_if_big(keep_below=rss + (1 << 30)) is False
    assert calls == []
    assert memory.give_back_if_big(keep_below=rss // 2) is True
    assert calls == [1]
    # The default mark: a byte under it keeps, at it gives back.
    monkeypatch.setattr(memory, "resident_bytes", lambda: memory.KEEP_FREE_BELOW - 1)
    assert memory.give_back_if_big() is False and calls == [1]
    monkeypatch.setattr(memory, "resident_bytes", lambda: memory.KEEP_FREE_BELOW)
    assert memory.give_back_if_big() is True and calls == [1, 1]


def test_given_back_when_the_size_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(memory, "give_back_free_memory", lambda: calls.append(1))
    monkeypatch.setattr(memory, "resident_bytes", lambda: None)
    assert memory.give_back_if_big() is True and calls == [1]


def test_trimming_returns_a_freed_heap_to_the_system() -> None:
    """glibc's heap: 200 MB of small blocks freed stay resident until trimmed."""
    if memory.libc() is None or not hasattr(memory.libc(), "malloc_trim"):
        pytest.skip("not glibc")
    blocks = [bytearray(100_000) for _ in range(2000)]  # under the mmap threshold
    for b in blocks:
        b[::4096] = b"\1" * len(b[::4096])  # touched: resident
    keep = bytearray(10)  # above them on the heap, so the top cannot shrink by itself
    del blocks
    before = memory.resident_bytes()
    memory.give_back_free_memory()
    after = memory.resident_bytes()
    assert before is not None and after is not None
    assert before - after > 100 << 20, (before, after)
    del keep
