"""gmpscope's own SQLite library, loaded in place of the system's.

Python's ``_sqlite3`` module links ``libsqlite3.so.0`` dynamically. When a
library with that SONAME is already loaded, the dynamic loader uses it for
``_sqlite3`` (and for the loader's binder, ``ingest.store._sqlitebulk``, which
checks that both use the same library) instead of opening the system's. So
:func:`preload`, called by every gmpscope process before anything imports
``sqlite3``, loads ``ingest/lib/libsqlite3.so.0`` (built by ``python -m
tools.sqlite_lib build``: SQLite 3.52.0 with SQLite's recommended options,
against Debian's 3.40.1 built with SECURE_DELETE and without lookaside) and
SQLite's file format is the same for both. Without the file, after
``sqlite3`` was imported, or with ``GMPSCOPE_SYSTEM_SQLITE=1``, the system's
library is used. docs/ingest.md measures the difference.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

#: Set to 1 to use the system's SQLite even where gmpscope's is built.
SYSTEM_ENV = "GMPSCOPE_SYSTEM_SQLITE"
LIBRARY = Path(__file__).resolve().parent / "lib" / "libsqlite3.so.0"


def preload(library: Path = LIBRARY) -> str | None:
    """Load ``library`` for this process's SQLite; its version, or None when
    the system's is used (no such file, disabled, or too late: ``sqlite3``
    already imported)."""
    if os.environ.get(SYSTEM_ENV, "") not in ("", "0") or "_sqlite3" in sys.modules:
        return None
    if not sys.platform.startswith("linux") or not library.is_file():
        return None
    try:
        lib = ctypes.CDLL(str(library), mode=os.RTLD_NOW | os.RTLD_GLOBAL)
    except OSError:
        return None
    libversion = lib.sqlite3_libversion
    libversion.restype = ctypes.c_char_p
    version = libversion()
    return version.decode() if isinstance(version, bytes) else None
