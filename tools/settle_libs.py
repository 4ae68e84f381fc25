"""Shared libraries just installed, written back and let go from the page cache.

A library that pip or our build has just written sits in the page cache as
it was written, and on this project's kernels (6.x, large page-cache folios)
a process that maps it gets whole folios of it mapped at once: each gmpscope
process then carries ~35 MB more resident memory of pyarrow's and numpy's
libraries (``RssFile`` 85-89 against 51-55 MiB at an ingest's peak, counted
in ``ru_maxrss``), until the pages leave the cache and are read back from the
disk. That lasts as long as the machine has memory to spare, so the first
benchmark on a new checkout would measure the install, not gmpscope
(docs/ingest.md, "Speed and memory"). ``make setup`` runs this after it
installs or builds anything: each shared library under the roots is written
back (``fdatasync``) and dropped from the page cache
(``posix_fadvise(POSIX_FADV_DONTNEED)``, which leaves pages that a running
process maps). Nothing else changes; the next process reads them from disk.
Elsewhere than Linux it does nothing.

    python -m tools.settle_libs [ROOT ...]   (default: the venv and this checkout)
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def shared_libraries(roots: Iterable[Path]) -> Iterator[Path]:
    """The ``*.so`` and ``*.so.N`` files under ``roots`` (links not followed)."""
    seen: set[Path] = set()
    for root in roots:
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if x not in (".git", "node_modules")]
            for name in files:
                if name.endswith(".so") or ".so." in name:
                    path = Path(d) / name
                    if not path.is_symlink() and path not in seen:
                        seen.add(path)
                        yield path


def settle(path: Path) -> bool:
    """Write ``path`` back and drop it from the page cache; False where the
    system refused (the file gone meanwhile, say)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("roots", nargs="*", type=Path)
    args = ap.parse_args(argv)
    if not hasattr(os, "posix_fadvise"):
        return 0
    # The venv is usually inside the checkout: walked once, not twice.
    venv = Path(sys.prefix).resolve()
    roots = args.roots or ([ROOT] if venv.is_relative_to(ROOT) else [venv, ROOT])
    done = sum(settle(p) for p in shared_libraries(roots))
    print(f"settle_libs: {done} shared libraries written back and dropped from the page cache")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
