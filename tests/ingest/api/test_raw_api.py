"""The kept raw trace through a real server (``GET /api/traces/<id>/trace``):
an uploaded trace and a trace loaded at start come back byte for byte, though
kept compressed; unknown traces and Parquet uploads (no raw file) are JSON 404s."""

from __future__ import annotations

from pathlib import Path

from ingest.load.raw_copy import raw_path
from tests.support.server import REPO, Served

SAMPLE = REPO / "samples" / "go1.27-syscallblock.trace"
UPLOAD = REPO / "samples" / "go1.27-timers.trace"


def test_raw_trace_comes_back_as_it_was_stored(tmp_path: Path) -> None:
    with Served(tmp_path / "data", [SAMPLE]) as srv:
        (first,) = srv.ingested
        up = srv.post("/api/traces", data=UPLOAD.read_bytes(),
                      params={"name": UPLOAD.name},
                      headers={"Content-Type": "application/octet-stream"})
        assert up.status_code in (200, 201), up.text
        second = up.json()["id"]
        for tid, src in ((first, SAMPLE), (second, UPLOAD)):
            r = srv.get(f"/api/traces/{tid}/trace")
            assert r.status_code == 200
            assert r.content == src.read_bytes()
            assert r.headers["Content-Disposition"] == \
                f'attachment; filename="{src.name}"'
            sha = srv.get(f"/api/traces/{tid}").json()["sha256"]
            kept = raw_path(srv.data_dir, sha)
            assert kept.stat().st_size < src.stat().st_size  # kept compressed
        missing = srv.get("/api/traces/9999/trace")
        assert missing.status_code == 404 and "no trace with id 9999" in missing.json()["error"]


def test_a_trace_without_its_raw_file_is_a_clear_404(tmp_path: Path) -> None:
    with Served(tmp_path / "data", [SAMPLE]) as srv:
        (tid,) = srv.ingested
        sha = srv.get(f"/api/traces/{tid}").json()["sha256"]
        raw_path(srv.data_dir, sha).unlink()
        r = srv.get(f"/api/traces/{tid}/trace")
        assert r.status_code == 404
        assert r.json()["error"] == \
            f"trace {tid}: no raw trace file is kept (it was loaded as trace)"
