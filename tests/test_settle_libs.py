"""tools.settle_libs: the shared libraries under a root leave the page cache
(asked of the kernel with mincore), other files stay, the bytes are the same."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import pytest

from tests.test_page_cache import resident_pages
from tools import settle_libs


def test_libraries_leave_the_page_cache_and_nothing_else(tmp_path: Path) -> None:
    content = os.urandom(8 << 20)
    (tmp_path / "pkg").mkdir()
    libs = [tmp_path / "libx.so.1", tmp_path / "pkg" / "_ext.cpython-311-x86_64-linux-gnu.so"]
    other = tmp_path / "pkg" / "data.bin"
    for path in (*libs, other):
        path.write_bytes(content)
    (tmp_path / "liblink.so").symlink_to(libs[0])
    if resident_pages(other) == 0:
        pytest.skip("this file system keeps no written pages in the page cache")
    assert sorted(settle_libs.shared_libraries([tmp_path])) == sorted(libs)

    assert settle_libs.main([str(tmp_path)]) == 0

    pages = len(content) // mmap.PAGESIZE
    for lib in libs:
        assert resident_pages(lib) < 0.05 * pages
        assert lib.read_bytes() == content
    assert resident_pages(other) > 0.9 * pages
