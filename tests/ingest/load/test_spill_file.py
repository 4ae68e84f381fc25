"""The loader's spill file (``ingest.load.spill_file.SpillFile``): arrays kept
are read back whole, from two threads at once; a full disk is raised to the
loader.

The arrays are a real trace's columns (the committed Go 1.27 sample, decoded
by the C decoder); the full disk is a real 1 MB tmpfs (root, as `make test`
runs)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from ingest.load.spill_file import SpillFile
from tests.support.tmpfs import small_tmpfs

REPO = Path(__file__).resolve().parents[3]
TRACE = REPO / "samples" / "go1.27-httpnet-2MB.trace"


@pytest.fixture(scope="module")
def columns() -> list[np.ndarray]:
    """Every transitions row group's columns of the sample, in decode order."""
    from collectors.gotrace import columnar

    if not columnar.available():
        pytest.skip("C decoder not built")
    out: list[np.ndarray] = []
    for name, table in columnar.ChunkDecoder(TRACE.read_bytes()).chunks():
        if name == "transitions":
            for c in ("ts", "g", "m", "p"):
                out.append(table.column(c).to_numpy())
            out.append(table.column("ts").to_numpy() > 0)  # a bool column too
    assert len(out) > 10
    return out


def test_kept_arrays_come_back_whole(columns: list[np.ndarray], tmp_path: Path) -> None:
    f = SpillFile(tmp_path, "test-")
    try:
        parts = [f.keep(c) for c in columns]
        # Read back from two threads at once, the last ones first.
        with ThreadPoolExecutor(2) as pool:
            got = list(pool.map(f.back, parts[::-1]))[::-1]
        for want, back in zip(columns, got, strict=True):
            assert back.dtype == want.dtype
            assert np.array_equal(back, want)
        # A range of rows of one part, and a part kept after reads.
        assert np.array_equal(f.back(parts[0], 5, 17), columns[0][5:17])
        late = f.keep(columns[1][::-1])
        assert np.array_equal(f.back(late), columns[1][::-1])
    finally:
        f.close()


def test_empty_arrays(tmp_path: Path) -> None:
    f = SpillFile(tmp_path, "empty-")
    part = f.keep(np.zeros(0, np.int64))
    assert f.back(part).shape == (0,)
    f.close()


@pytest.fixture()
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path, "1m") as disk:
        yield disk


def test_a_full_disk_is_raised_to_the_loader(columns: list[np.ndarray],
                                             tiny_disk: Path) -> None:
    f = SpillFile(tiny_disk, "full-")
    try:
        with pytest.raises(OSError, match="No space left"):
            # 2 MB of columns at a time into 1 MB: a keep says so.
            parts = [f.keep(np.concatenate(columns[:4])) for _ in range(4)]
            f.back(parts[-1])
    finally:
        f.close()
