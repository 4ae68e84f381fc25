"""Memory-mapped ``.npy`` files whose header is read without ``ast``.

numpy's reader parses a header's dict with ``ast.literal_eval``, which on
CPython 3.11 fails now and then when threads parse at once ("SystemError: AST
constructor recursion depth mismatch", python/cpython#106905): a server's
request threads and its warm steps open frames and caches together, and a
clean-clone test run saw a warm step fail so under load. The headers gmpscope
reads are the ones numpy's writer makes (a dict of ``descr``, ``fortran_order``
and ``shape``): they are read here with a pattern, and only a header of another
form (a structured ``descr``) goes to numpy's reader.
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

#: numpy's writer sorts the keys and ends with ", }" and padding.
_HEADER = re.compile(
    r"\{'descr': '([^']+)', 'fortran_order': False, 'shape': \(([0-9, ]*)\), *\}\s*$")


def save_npy(path: Path, a: npt.NDArray[Any], durable: bool = False) -> None:
    """Write ``a`` to ``path`` as ``np.save`` does (the same bytes), through
    Python's file writes, whose full disk is an OSError with ENOSPC (numpy's
    own short write is "N requested and M written", with no errno);
    ``durable``: flushed to the disk before it returns."""
    if a.dtype.hasobject:
        np.save(path, a)  # pickled: never a gmpscope column
        return
    if not a.flags.c_contiguous and not a.flags.f_contiguous:
        a = a.copy(order="C")
    header = np.lib.format.header_data_from_array_1_0(a)
    flat = (a.T if header["fortran_order"] else a).reshape(-1)  # a view: contiguous
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        f.write(flat.view(np.uint8).data)
        if durable:
            f.flush()
            os.fsync(f.fileno())


def map_npy(path: Path) -> npt.NDArray[Any]:
    """The array in the ``.npy`` file ``path``, memory-mapped read-only (in
    memory when it has no element: a file region of 0 bytes cannot be
    mapped); ValueError when the file is not one."""
    with open(path, "rb") as f:
        magic = f.read(8)
        if len(magic) < 8 or magic[:6] != b"\x93NUMPY" or magic[6] not in (1, 2, 3):
            raise ValueError(f"{path}: not a .npy file")
        size = 2 if magic[6] == 1 else 4
        raw = f.read(size)
        if len(raw) < size:
            raise ValueError(f"{path}: a truncated .npy header")
        (length,) = struct.unpack("<H" if size == 2 else "<I", raw)
        header = f.read(length).decode("latin1" if magic[6] < 3 else "utf8")
    m = _HEADER.match(header)
    if m is None:  # not a header numpy's writer makes of a plain array
        return np.load(path, mmap_mode="r", allow_pickle=False)  # type: ignore[no-any-return]
    dtype = np.dtype(m.group(1))
    shape = tuple(int(x) for x in m.group(2).replace(" ", "").split(",") if x)
    if not all(shape):
        return np.zeros(shape, dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=8 + size + length, shape=shape)
