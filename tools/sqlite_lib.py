"""Build gmpscope's own SQLite library (standard library only).

``python -m tools.sqlite_lib build [--require] [--dest DIR]`` fetches SQLite's
official source release (``sqlite-autoconf-3520000.tar.gz``, SQLite 3.52.0, as
the npm package ``sqlite3`` 6.0.1 carries it; both archives are checked
against pinned SHA-256 sums), compiles its amalgamation into a shared
library with the SONAME ``libsqlite3.so.0`` and SQLite's recommended options,
together with gmpscope's appender (``ingest/csrc/sqlite_append.c``, which
includes the amalgamation: rows appended through SQLite's own b-tree layer),
caches it in ``$GMPSCOPE_CACHE/sqlite`` and copies it to ``ingest/lib/``, where
``ingest.store.sqlite_lib.preload`` finds it (docs/ingest.md, "SQLite library").

Why: the system library of Debian 12 is SQLite 3.40.1 built with
``SECURE_DELETE``, ``OMIT_LOOKASIDE`` (every small allocation a ``malloc``) and
memory statistics (a mutex per allocation); a load's inserts take 15-25% less
time with this build. Without a network or a C compiler ``build`` prints why
and exits 0 (gmpscope then uses the system's SQLite, as before), unless
``--require`` is given.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from ingest.store.sqlite_lib import LIBRARY
from tools.gotoolchains import cache_dir

#: Where the runtime looks for the library (ingest/store/sqlite_lib.py).
DEST = LIBRARY.parent
LIB_NAME = LIBRARY.name

NPM_URL = "https://registry.npmjs.org/sqlite3/-/sqlite3-6.0.1.tgz"
NPM_SHA256 = "ab8d044a93e05bd031d7ea75547c7fa60387cdc259d27f93c0e3e2832c4b1df9"
SOURCE_MEMBER = "package/deps/sqlite-autoconf-3520000.tar.gz"
SOURCE_SHA256 = "f6b50b0c103392af32a8be15b2b9d25959de9a00a70c3979128aafeaa5338b3f"
AMALGAMATION = "sqlite-autoconf-3520000/sqlite3.c"
VERSION = "3.52.0"

#: Those of SQLite's recommended options (sqlite.org/compile.html) that keep
#: every API Python's sqlite3 module calls and every SQL text Debian's build
#: accepts (so not DQS=0: users' SQL may quote strings with "), plus the
#: features Debian's build has and users' SQL may use (math functions, FTS5,
#: R-tree, dbstat, 250000 host parameters). Not SECURE_DELETE, not
#: OMIT_LOOKASIDE.
OPTIONS = (
    "-DSQLITE_DEFAULT_MEMSTATUS=0",
    "-DSQLITE_LIKE_DOESNT_MATCH_BLOBS",
    "-DSQLITE_ENABLE_DBSTAT_VTAB",
    "-DSQLITE_ENABLE_MATH_FUNCTIONS",
    "-DSQLITE_ENABLE_COLUMN_METADATA",
    "-DSQLITE_ENABLE_UNLOCK_NOTIFY",
    "-DSQLITE_ENABLE_FTS5",
    "-DSQLITE_ENABLE_RTREE",
    "-DSQLITE_MAX_VARIABLE_NUMBER=250000",
    "-DSQLITE_USE_URI=1",
    "-DHAVE_ISNAN",
)


class BuildError(RuntimeError):
    """The library could not be fetched or built."""


#: Compiled with the amalgamation (it includes sqlite3.c).
APPENDER = Path(__file__).resolve().parent.parent / "ingest" / "csrc" / "sqlite_append.c"


def _cache() -> Path:
    appender = hashlib.sha256(APPENDER.read_bytes()).hexdigest()
    key = hashlib.sha256(" ".join((SOURCE_SHA256, appender, *OPTIONS)).encode()).hexdigest()[:12]
    return cache_dir() / "sqlite" / f"{VERSION}-{key}"


def _checked(data: bytes, sha256: str, what: str) -> bytes:
    got = hashlib.sha256(data).hexdigest()
    if got != sha256:
        raise BuildError(f"{what}: sha256 {got}, expected {sha256}")
    return data


def fetch_amalgamation() -> bytes:
    """sqlite3.c of the pinned release."""
    try:
        with urllib.request.urlopen(NPM_URL, timeout=120) as r:
            npm = _checked(r.read(), NPM_SHA256, NPM_URL)
    except OSError as e:
        raise BuildError(f"cannot fetch {NPM_URL}: {e}") from None
    with tarfile.open(fileobj=io.BytesIO(npm), mode="r:gz") as outer:
        member = outer.extractfile(SOURCE_MEMBER)
        if member is None:
            raise BuildError(f"{NPM_URL} has no {SOURCE_MEMBER}")
        source = _checked(member.read(), SOURCE_SHA256, SOURCE_MEMBER)
    with tarfile.open(fileobj=io.BytesIO(source), mode="r:gz") as inner:
        c = inner.extractfile(AMALGAMATION)
        if c is None:
            raise BuildError(f"{SOURCE_MEMBER} has no {AMALGAMATION}")
        return c.read()


def build(dest: Path = DEST) -> Path:
    """The library, built (or taken from the cache) and copied into ``dest``."""
    cached = _cache() / LIB_NAME
    if not cached.is_file():
        cc = os.environ.get("CC", "cc")
        if shutil.which(cc) is None:
            raise BuildError(f"no C compiler ({cc})")
        source = fetch_amalgamation()
        cached.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cached.parent) as tmp:
            src = Path(tmp) / "sqlite3.c"
            src.write_bytes(source)
            out = Path(tmp) / LIB_NAME
            cmd = [cc, "-O2", "-fPIC", "-shared", f"-Wl,-soname,{LIB_NAME}", "-o", str(out),
                   f"-I{tmp}", str(APPENDER), *OPTIONS, "-lpthread", "-lm", "-ldl"]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise BuildError(f"{cc} failed: {done.stderr.strip()[-2000:]}")
            os.replace(out, cached)
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / LIB_NAME
    tmp_target = target.with_suffix(".tmp")
    shutil.copyfile(cached, tmp_target)
    os.replace(tmp_target, target)  # a running process keeps its mapped copy
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="fetch, build and install the library")
    b.add_argument("--require", action="store_true",
                   help="fail (exit 1) when it cannot be built, instead of going without")
    b.add_argument("--dest", type=Path, default=DEST)
    args = ap.parse_args(argv)
    try:
        path = build(args.dest)
    except BuildError as e:
        print(f"tools.sqlite_lib: SQLite {VERSION} not built ({e}); "
              "gmpscope uses the system's SQLite", file=sys.stderr)
        return 1 if args.require else 0
    print(f"SQLite {VERSION}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
