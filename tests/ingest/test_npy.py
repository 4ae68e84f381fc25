"""ingest.npy.map_npy reads what numpy's writer wrote: the same
arrays as np.load, mapped, for every shape and type the frames and caches
use; other headers through numpy; not a .npy file is a ValueError.
ingest.npy.save_npy writes the bytes np.save does, and a full disk is ENOSPC."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ingest.npy import map_npy, save_npy

ARRAYS = [
    np.arange(10, dtype=np.int64), np.arange(-5, 5, dtype=np.int16), np.array([1, -1], np.int8),
    np.array([True, False]), np.zeros(0, np.int32), np.arange(12, dtype=np.int32).reshape(3, 4),
    np.array(7, np.int64), np.arange(3, dtype=">i8"), np.linspace(0, 1, 5)]


@pytest.mark.parametrize("array", [*ARRAYS, np.arange(20)[::3],
                                   np.arange(12, dtype=np.int32).reshape(3, 4).T])
def test_save_npy_writes_what_np_save_does(tmp_path: Path, array: np.ndarray) -> None:
    np.save(tmp_path / "numpy.npy", array)
    save_npy(tmp_path / "ours.npy", array, durable=True)
    assert (tmp_path / "ours.npy").read_bytes() == (tmp_path / "numpy.npy").read_bytes()


def test_a_full_disk_is_enospc(tmp_path: Path) -> None:
    """numpy's own writer says "N requested and M written" with no errno."""
    import errno

    from tests.support.tmpfs import small_tmpfs

    with small_tmpfs(tmp_path, "1m") as disk:
        with pytest.raises(OSError) as full:
            save_npy(disk / "big.npy", np.arange(1 << 20))
        assert full.value.errno == errno.ENOSPC


@pytest.mark.parametrize("array", ARRAYS)
def test_same_array_as_numpy(tmp_path: Path, array: np.ndarray) -> None:
    path = tmp_path / "a.npy"
    np.save(path, array)
    got = map_npy(path)
    want = np.load(path)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)
    if array.size:
        assert isinstance(got, np.memmap)


def test_version_2_header_and_structured_dtype(tmp_path: Path) -> None:
    path = tmp_path / "b.npy"
    array = np.arange(4, dtype=np.int32)
    with open(path, "wb") as f:
        np.lib.format.write_array(f, array, version=(2, 0))
    assert np.array_equal(map_npy(path), array)
    rec = np.zeros(3, dtype=[("a", "<i4"), ("b", "<f8")])
    np.save(tmp_path / "c.npy", rec)
    assert map_npy(tmp_path / "c.npy").dtype == rec.dtype


def test_not_npy(tmp_path: Path) -> None:
    (tmp_path / "x.npy").write_bytes(b"PK\x03\x04 not numpy")
    with pytest.raises(ValueError):
        map_npy(tmp_path / "x.npy")
    (tmp_path / "y.npy").write_bytes(b"\x93NUMPY\x01")
    with pytest.raises(ValueError):
        map_npy(tmp_path / "y.npy")
