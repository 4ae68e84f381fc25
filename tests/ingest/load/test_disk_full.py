"""A full disk during ingest: the client gets a clear error, the database stays intact,
nothing half-stored remains, and the same upload succeeds once there is room.

The server's data directory (SQLite database, raw traces, spools, frames) is a
small tmpfs mounted for the test, grown afterwards with a remount; this needs
root, which `make test` has (it installs Debian packages too).
"""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import Served
from tests.support.tmpfs import small_tmpfs

REPO = Path(__file__).resolve().parents[3]
SMALL = REPO / "samples" / "go1.27-syscallblock.trace"
BIG = REPO / "samples" / "go1.27-httpnet-2MB.trace"


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path, "12m") as disk:
        yield disk


def test_disk_full_during_ingest(small_disk: Path) -> None:
    with Served(small_disk / "data", [SMALL]) as server:
        before = server.get("/api/traces").json()["traces"]
        assert [t["name"] for t in before] == [SMALL.name]
        r = server.post("/api/traces?name=big", data=BIG.read_bytes(),
                        headers={"Content-Type": "application/octet-stream"})
        assert r.status_code == 507, r.text
        assert "disk is full" in r.json()["error"]
        after = server.get("/api/traces").json()["traces"]
        assert after == before
        data = small_disk / "data"
        assert not list((data / "traces").glob("*.trace.zst"))[1:], "only the first raw trace kept"
        assert not list((data / "frames").glob(".staging-*"))
        subprocess.run(["mount", "-o", "remount,size=400m", str(small_disk)], check=True)
        r = server.post("/api/traces?name=big", data=BIG.read_bytes(),
                        headers={"Content-Type": "application/octet-stream"})
        assert r.status_code == 201, r.text
        names = sorted(t["name"] for t in server.get("/api/traces").json()["traces"])
        assert names == sorted([SMALL.name, "big"])
    db = sqlite3.connect(small_disk / "data" / "gmpscope.db")
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("SELECT count(*) FROM traces").fetchone()[0] == 2
    finally:
        db.close()
