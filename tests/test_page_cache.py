"""ingest.derive.page_cache: the same bytes as plain writes, and the pages gone from
the page cache once the file is closed (asked of the kernel with mincore)."""

from __future__ import annotations

import ctypes
import io
import mmap
import os
from pathlib import Path

import numpy as np
import pytest

from ingest.derive import page_cache
from ingest.derive.frame_writer import write_column
from ingest.derive.page_cache import DroppingFile, save_npy

LIBC = ctypes.CDLL("libc.so.6", use_errno=True)
LIBC.mmap.restype = ctypes.c_void_p
LIBC.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
LIBC.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
LIBC.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def resident_pages(path: Path) -> int:
    """How many of the file's pages are in the page cache."""
    return sum(residency(path))


def residency(path: Path) -> list[int]:
    """Whether each of the file's pages is in the page cache (1) or not (0)."""
    size = path.stat().st_size
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    vec = (ctypes.c_ubyte * max(pages, 1))()
    fd = os.open(path, os.O_RDONLY)
    try:
        p = LIBC.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert p is not None and p != ctypes.c_void_p(-1).value
        try:
            assert LIBC.mincore(p, size, vec) == 0
        finally:
            LIBC.munmap(p, size)
    finally:
        os.close(fd)
    return [v & 1 for v in vec[:pages]]


@pytest.fixture
def small_window(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(page_cache, "WINDOW", 64 << 10)
    return 64 << 10


@pytest.mark.parametrize("pieces", [[], [1], [65535], [65536], [65537],
                                    [1000, 70000, 3, 200000, 65536, 17]])
def test_same_bytes_as_a_plain_write(tmp_path: Path, small_window: int,
                                     pieces: list[int]) -> None:
    rng = np.random.default_rng(len(pieces))
    parts = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in pieces]
    with DroppingFile(tmp_path / "f") as f:
        for part in parts:
            assert f.write(part) == len(part)
    assert (tmp_path / "f").read_bytes() == b"".join(parts)


@pytest.mark.parametrize("array", [
    np.arange(10**6, dtype=np.int64), np.zeros(0, np.int32), np.arange(7, dtype=np.int8),
    np.arange(3 * 5, dtype=np.int64).reshape(5, 3), np.ones((4, 2), np.int64)[:, 1],
    np.array([True, False, True])])
@pytest.mark.parametrize("wait", [True, False])
def test_save_npy_writes_what_np_save_writes(tmp_path: Path, small_window: int,
                                             array: np.ndarray, wait: bool) -> None:
    ours = tmp_path / "ours.npy"
    save_npy(ours, array, wait)
    theirs = io.BytesIO()
    np.save(theirs, array, allow_pickle=False)
    assert ours.read_bytes() == theirs.getvalue()
    np.testing.assert_array_equal(np.load(ours, mmap_mode="r"), array)


def test_written_pages_leave_the_page_cache(tmp_path: Path) -> None:
    data = np.random.default_rng(0).integers(0, 2**62, 6 << 20, dtype=np.int64)  # 48 MB
    plain = tmp_path / "plain.npy"
    np.save(plain, data)
    if resident_pages(plain) == 0:
        pytest.skip("this file system keeps no written pages in the page cache")
    # What a plain write leaves even once on disk, against what ours leaves.
    fd = os.open(plain, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    dropped = tmp_path / "dropped.npy"
    save_npy(dropped, data)
    assert resident_pages(plain) > 0.9 * plain.stat().st_size / mmap.PAGESIZE
    assert resident_pages(dropped) < 0.05 * dropped.stat().st_size / mmap.PAGESIZE
    np.testing.assert_array_equal(np.load(dropped), data)


def test_the_first_page_stays_for_the_header(tmp_path: Path) -> None:
    """np.load reads a .npy file's header each time the frames are mapped:
    that page stays in the page cache, the rest goes."""
    data = np.random.default_rng(1).integers(0, 2**62, 2 << 20, dtype=np.int64)  # 16 MB
    plain = tmp_path / "plain.npy"
    np.save(plain, data)
    if resident_pages(plain) == 0:
        pytest.skip("this file system keeps no written pages in the page cache")
    dropped = tmp_path / "dropped.npy"
    save_npy(dropped, data)
    pages = residency(dropped)
    assert page_cache.KEEP_HEAD == mmap.PAGESIZE and pages[0] == 1
    assert sum(pages[1:]) < 0.05 * len(pages)


def test_frame_columns_are_the_same_dropped_or_kept(tmp_path: Path, small_window: int) -> None:
    col = np.arange(300_000, dtype=np.int64) * 3 - 7
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    write_column(tmp_path / "a", "intervals", "g", col, len(col), drop=False)
    write_column(tmp_path / "b", "intervals", "g", col, len(col), drop=True)
    assert (tmp_path / "a" / "intervals.g.npy").read_bytes() == \
        (tmp_path / "b" / "intervals.g.npy").read_bytes()


def test_a_file_that_cannot_be_made_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        DroppingFile(tmp_path / "no such dir" / "f")
