"""gmpscope's own SQLite build (tools/sqlite_lib.py, ingest/store/sqlite_lib.py):
every gmpscope process uses it where it is built (``make test-setup`` builds
it), the loader's binder works with it, and the system's library stays one
setting away."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.store import sqlite_lib
from tools import sqlite_lib as build_tool

ROOT = Path(__file__).resolve().parents[1]

PROBE = (
    "import json, sys; from gmpscope import cli; cli.configure_process(); import sqlite3; "
    "c = sqlite3.connect(':memory:'); "
    "print(json.dumps({'version': sqlite3.sqlite_version, "
    "'options': [r[0] for r in c.execute('PRAGMA compile_options')]}))"
)


def _probe(code: str = PROBE, **env: str) -> dict[str, object]:
    base = {k: v for k, v in os.environ.items() if k != sqlite_lib.SYSTEM_ENV}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**base, **env},
                         capture_output=True, text=True, timeout=120, check=True)
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_the_library_is_built() -> None:
    assert sqlite_lib.LIBRARY.is_file(), (
        "ingest/lib/libsqlite3.so.0 is missing: `python -m tools.sqlite_lib build`")


def test_gmpscope_processes_use_it() -> None:
    got = _probe()
    assert got["version"] == build_tool.VERSION
    options = got["options"]
    assert isinstance(options, list)
    assert "DEFAULT_MEMSTATUS=0" in options
    assert not any(o in options for o in ("SECURE_DELETE", "OMIT_LOOKASIDE"))
    # The features users' SQL may use are still there.
    assert {"ENABLE_MATH_FUNCTIONS", "ENABLE_DBSTAT_VTAB", "ENABLE_FTS5"} <= set(options)


def test_the_systems_library_on_request() -> None:
    bare = _probe(PROBE.replace("cli.configure_process(); ", ""))
    assert bare["version"] != build_tool.VERSION  # Debian 12: 3.40.1
    assert _probe(**{sqlite_lib.SYSTEM_ENV: "1"})["version"] == bare["version"]


def test_the_binder_binds_into_it(tmp_path: Path) -> None:
    code = "\n".join((
        "import json",
        "from gmpscope import cli",
        "cli.configure_process()",
        "import sqlite3",
        "from ingest.store.db import make_engine, write_tx",
        "from ingest.store import sqlite_fast",
        f"e = make_engine('sqlite:///{tmp_path / 'x.db'}')",
        "with write_tx(e, bulk=True) as c:",
        "    active = sqlite_fast.column_inserter(c.connection.dbapi_connection) is not None",
        "print(json.dumps({'version': sqlite3.sqlite_version, 'binder': active}))",
    ))
    assert _probe(code) == {"version": build_tool.VERSION, "binder": True}


def test_too_late_once_sqlite3_is_imported() -> None:
    code = ("import json, sqlite3; from ingest.store.sqlite_lib import preload; "
            "print(json.dumps({'version': preload()}))")
    assert _probe(code) == {"version": None}


def test_a_download_that_is_not_the_pinned_one_is_refused() -> None:
    with pytest.raises(build_tool.BuildError, match="sha256"):
        build_tool._checked(b"not sqlite", build_tool.SOURCE_SHA256, "x.tar.gz")
