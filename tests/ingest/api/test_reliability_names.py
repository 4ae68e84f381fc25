"""Hostile upload names never become paths, and come back as text.

A real ``gmpscope serve`` keeps its data directory inside a parent folder the
test watches: after uploads named with ``../``, absolute paths, 10k characters,
control characters, NUL, an RTL override and ``<script>`` (as a query
parameter, as a multipart file name, and through the chunked API), every file
added under the parent is inside the data directory, raw traces are named
``<sha256>.trace``, and the name reads back from /api/traces as the
label rule of docs/reliability.md makes it (control characters removed,
trimmed, cut to 255 characters).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from ingest.api.chunked import clean_name
from tests.support.server import Served

REPO = Path(__file__).resolve().parents[3]
TRACE = REPO / "samples" / "go1.27-syscallblock.trace"
NAMES = [
    "../../escape.trace",
    "../" * 40 + "etc/passwd",
    "/etc/passwd",
    "/tmp/gmpscope-rel-absolute.trace",
    "..",
    "C:\\Windows\\..\\..\\win.ini",
    "%2e%2e%2fencoded.trace",
    "a" * 10_000,
    "ctrl\x01\x07\x1b[31mred\r\nline.trace",
    "nul\x00byte.trace",
    "rtl\u202egnp.trace",
    "<script>window.__pwned=1</script>.trace",
    "\"quotes' & <b>bold</b> \U0001F600.trace",
]
JOB_GUARD_S = 300.0


def files_under(root: Path) -> set[Path]:
    """Every path under ``root``, but the values derived from a stored trace
    (frames/*/derived-v*/: named by what they hold, and written by the server's
    background warm-up of the previous upload while this test looks)."""
    out: set[Path] = set()
    for dirpath, dirnames, filenames in os.walk(root):  # tolerates entries vanishing
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if not d.startswith("derived-v")]
        out.update(here / n for n in dirnames + filenames)
    return out


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Path]]:
    parent = tmp_path_factory.mktemp("rel-names")
    with Served(parent / "data", extra_args=("--workers", "1", "--threads", "4")) as srv:
        yield srv, parent


#: gunicorn's limit on the request line: a longer name cannot travel in the URL.
URL_LIMIT = 4094


def name_ok(sent: str, shown: str, how: str) -> bool:
    """The documented label of the name, whichever door it came through. A
    multipart file name is an HTTP quoted string: its parser drops a backslash
    before any character, and clients encode CR, LF and '"' in it as %0D, %0A
    and %22 (HTML5's form encoding, which urllib3 and browsers use)."""
    ok = {clean_name(sent)}
    if how == "multipart":
        html5 = sent.replace("\r", "%0D").replace("\n", "%0A").replace('"', "%22")
        ok |= {clean_name(html5), clean_name(html5.replace("\\", ""))}
    return shown in ok


def one_shot_query(srv: Served, name: str, data: bytes) -> requests.Response:
    return srv.post("/api/traces", params={"name": name}, data=data,
                    headers={"Content-Type": "application/octet-stream"})


def one_shot_multipart(srv: Served, name: str, data: bytes) -> requests.Response:
    return srv.post("/api/traces", files={"file": (name, data, "application/octet-stream")})


def chunked(srv: Served, name: str, data: bytes) -> dict[str, Any]:
    r = srv.post("/api/uploads", params={"name": name, "size": len(data)})
    assert r.status_code == 201, r.text
    up = r.json()["upload_id"]
    assert re.fullmatch(r"[0-9a-f]{32}", up)
    assert name_ok(name, r.json()["name"], "chunked")
    r = requests.put(f"{srv.url}/api/uploads/{up}", params={"offset": 0}, data=data, timeout=60)
    assert r.status_code == 200, r.text
    r = srv.post(f"/api/uploads/{up}/complete")
    assert r.status_code == 202, r.text
    guard = time.monotonic() + JOB_GUARD_S
    while time.monotonic() < guard:
        job: dict[str, Any] = srv.get(f"/api/jobs/{r.json()['job_id']}").json()
        if job["state"] in ("done", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job still running: {job}")


@pytest.mark.parametrize("how", ["query", "multipart", "chunked"])
def test_hostile_names(served: tuple[Served, Path], how: str) -> None:
    srv, parent = served
    data = TRACE.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    for t in srv.get("/api/traces").json()["traces"]:  # a failed run's leftovers
        requests.delete(f"{srv.url}/api/traces/{t['id']}", timeout=60)
    for name in NAMES:
        before = files_under(parent)
        if how != "multipart" and len(requests.utils.quote(name)) > URL_LIMIT:
            path = "/api/uploads" if how == "chunked" else "/api/traces"
            r = srv.post(path, params={"name": name, "size": len(data)}, data=data)
            assert r.status_code == 414, r.text  # refused before the app sees it
            assert files_under(parent) == before
            continue
        if how == "chunked":
            job = chunked(srv, name, data)
            assert job["state"] == "done", (name, job)
            tid = job["trace_id"]
        else:
            send = one_shot_query if how == "query" else one_shot_multipart
            r = send(srv, name, data)
            assert r.status_code == 201, (name[:80], r.status_code, r.text[:300])
            tid = r.json()["id"]
        listed = [t for t in srv.get("/api/traces").json()["traces"] if t["id"] == tid]
        detail = srv.get(f"/api/traces/{tid}").json()
        assert name_ok(name, listed[0]["name"], how), (name[:80], listed[0]["name"][:80])
        assert detail["name"] == listed[0]["name"]
        added = files_under(parent) - before
        outside = [p for p in added if not p.is_relative_to(parent / "data")]
        assert outside == [], (name[:80], outside)
        raws = sorted(p.name for p in (parent / "data" / "traces").iterdir())
        assert raws == [f"{sha}.trace.zst"], raws
        # Nothing in the data directory is named after the upload.
        stem = clean_name(name).strip("./\\")[:40]
        if len(stem) > 3:
            assert not [p for p in files_under(parent / "data") if stem in p.name], name[:80]
        r = requests.delete(f"{srv.url}/api/traces/{tid}", timeout=60)
        assert r.status_code == 200, r.text
    assert not Path("/tmp/gmpscope-rel-absolute.trace").exists()
