"""A small tmpfs mounted for a test: a disk that fills up for real (root only,
as `make test` runs)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_tmpfs(parent: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (mount's spelling: ``12m``) at ``parent/disk``,
    unmounted after."""
    disk = parent / "disk"
    disk.mkdir()
    if os.geteuid() != 0:
        pytest.fail("this test mounts a tmpfs and needs root (make test runs as root)")
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)],
                   check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
