"""The ingest HTTP API through a real server process, on SQLite and PostgreSQL.

Each test talks HTTP (requests) to ``python -m gmpscope ingest-server`` started on a
free port against a real database: an SQLite file, or a fresh database in the
private PostgreSQL cluster of ``tools/postgres.py``. Uploads are the committed real
traces; expected counts come from the server's own answers, from the database,
or from Go's reference parser (``go tool trace -d=parsed``, tests marked slow).
"""

from __future__ import annotations

import collections
import hashlib
import io
import json
import re
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.support.ingest_service import (  # noqa: E402
    SMALL,
    TRACE,
    TRACES,
    IngestServer,
    post_archive,
    post_multipart,
    post_raw,
    sha256,
)

# --------------------------------------------------------------------------
# uploads


def test_healthz(shared: IngestServer) -> None:
    r = requests.get(shared.api("/healthz"))
    assert r.status_code == 200
    assert r.json()["status"] == "ok"


def test_upload_raw_multipart_chunked_and_duplicates(shared: IngestServer) -> None:
    r = post_raw(shared, TRACE, name="workers")
    assert r.status_code in (200, 201), r.text
    first = r.json()
    assert set(first) >= {"id", "sha256", "go_version", "events", "goroutines"}
    assert first["sha256"] == sha256(TRACE)
    assert first["go_version"] == "1.22"
    assert first["events"] > 0 and first["goroutines"] > 0
    before = shared.db.row_counts()
    for again in (post_raw(shared, TRACE, name="other name"),
                  post_raw(shared, TRACE, chunked=True),
                  post_multipart(shared, TRACE)):
        assert again.status_code == 200, again.text
        assert again.json() == first
    assert shared.db.row_counts() == before
    assert shared.db.trace_shas().count(first["sha256"]) == 1


@pytest.mark.parametrize("trace", TRACES, ids=[t.stem for t in TRACES])
def test_every_committed_trace_multipart(shared: IngestServer, trace: Path) -> None:
    r = post_multipart(shared, trace, name=trace.stem)
    assert r.status_code in (200, 201), r.text
    body = r.json()
    assert body["sha256"] == sha256(trace)
    assert trace.name.startswith(f"go{body['go_version']}") or body["go_version"] in trace.name
    listed = requests.get(shared.api("/api/traces")).json()
    ids = [t["id"] for t in listed["traces"]] if isinstance(listed, dict) else [
        t["id"] for t in listed]
    assert ids.count(body["id"]) == 1


GARBAGE: dict[str, Callable[[], bytes]] = {
    "text": lambda: (REPO / "README.md").read_bytes(),
    "zeros": lambda: b"\0" * 5000,
    "header-only": lambda: b"go 1.22 trace\x00\x00\x00",
    "truncated-header": lambda: TRACE.read_bytes()[:10],
    "random": lambda: hashlib.sha512(b"gmpscope").digest() * 200,
    "empty": lambda: b"",
}


@pytest.mark.parametrize("kind", GARBAGE)
def test_garbage_is_400_and_leaves_db_alone(shared: IngestServer, kind: str) -> None:
    before = shared.db.row_counts()
    r = post_raw(shared, GARBAGE[kind]())
    assert r.status_code == 400, r.text
    assert r.headers["Content-Type"].startswith("application/json")
    assert r.json()["error"]
    assert shared.db.row_counts() == before
    assert not list((shared.data_dir / "tmp").glob(".upload-*"))


def test_errors_are_json(shared: IngestServer) -> None:
    for method, path, status in [("GET", "/api/traces/999999", 404),
                                 ("DELETE", "/api/traces/999999", 404),
                                 ("GET", "/api/nothing", 404),
                                 ("PUT", "/api/traces", 405),
                                 ("GET", "/api/traces/abc", 404)]:
        r = requests.request(method, shared.api(path))
        assert r.status_code == status, (method, path, r.text)
        assert r.headers["Content-Type"].startswith("application/json")
        assert r.json()["error"]


def test_bad_multipart_is_400(shared: IngestServer) -> None:
    before = shared.db.row_counts()
    r = requests.post(shared.api("/api/traces"), files={"notfile": ("x", b"abc")})
    assert r.status_code == 400 and "file" in r.json()["error"]
    r = requests.post(shared.api("/api/traces"), data=b"--xx\r\nnonsense",
                      headers={"Content-Type": "multipart/form-data; boundary=xx"})
    assert r.status_code == 400, r.text
    assert shared.db.row_counts() == before


# --------------------------------------------------------------------------
# Parquet archives


def decoded_dir(trace: Path, out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "gmpscope", "decode", str(trace), "-o", str(out)],
                   cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    return out


def tar_gz(src: Path, top: str = "decoded") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        tf.add(src, arcname=top)
    return buf.getvalue()


def zip_flat(src: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(src.iterdir()):
            zf.write(p, p.name)
    return buf.getvalue()


def test_parquet_archives(shared: IngestServer, tmp_path: Path) -> None:
    trace = REPO / "tests" / "data" / "traces" / "go1.25-workers.trace"
    d = decoded_dir(trace, tmp_path / "dec")
    meta = json.loads((d / "meta.json").read_text())
    r = post_archive(shared, tar_gz(d))
    assert r.status_code in (200, 201), r.text
    body = r.json()
    assert body["sha256"] == meta["source"]["sha256"] == sha256(trace)
    assert body["go_version"] == meta["go_version"]
    assert body["events"] == meta["events"]
    before = shared.db.row_counts()
    for again in (post_archive(shared, zip_flat(d)), post_archive(shared, zip_flat(d), True)):
        assert again.status_code == 200, again.text
        assert again.json()["id"] == body["id"]
    assert shared.db.row_counts() == before


def test_bad_archives(shared: IngestServer, tmp_path: Path) -> None:
    d = decoded_dir(SMALL, tmp_path / "dec")
    before = shared.db.row_counts()
    evil = io.BytesIO()
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("../../escape.json", b"{}")
    no_meta = io.BytesIO()
    with zipfile.ZipFile(no_meta, "w") as zf:
        zf.write(d / "stacks.parquet", "stacks.parquet")
    # A trace never stored (else its sha256 in meta.json finds the stored one).
    meta = json.loads((d / "meta.json").read_text())
    meta["source"]["sha256"] = "ab" * 32
    broken = io.BytesIO()
    with zipfile.ZipFile(broken, "w") as zf:
        for p in d.iterdir():
            if p.suffix == ".parquet":
                zf.writestr(p.name, b"not parquet")
        zf.writestr("meta.json", json.dumps(meta))
    cases = {"traversal": (evil.getvalue(), 400),
             "not-an-archive": (SMALL.read_bytes(), 400),
             "empty-zip": (b"PK\x05\x06" + b"\0" * 18, 400),
             "no-meta": (no_meta.getvalue(), 400),
             "broken-parquet": (broken.getvalue(), 400)}
    for name, (data, status) in cases.items():
        r = post_archive(shared, data)
        assert r.status_code == status, (name, r.text)
        assert r.json()["error"], name
    assert shared.db.row_counts() == before
    assert not (shared.data_dir / "escape.json").exists()
    assert not list((shared.data_dir / "tmp").glob(".extract-*"))


# --------------------------------------------------------------------------
# reading, deleting


def test_list_summary_delete(shared: IngestServer) -> None:
    r = post_raw(shared, SMALL, name="small")
    assert r.status_code in (200, 201)
    tid = r.json()["id"]
    s = requests.get(shared.api(f"/api/traces/{tid}"))
    assert s.status_code == 200, s.text
    summary = s.json()
    assert summary["id"] == tid
    assert summary["sha256"] == sha256(SMALL)
    counts = summary["transition_counts"]
    assert counts and all({"resource", "from", "to", "reason", "count"} <= set(c)
                          for c in counts)
    before = shared.db.row_counts()
    d = requests.delete(shared.api(f"/api/traces/{tid}"))
    assert d.status_code == 200, d.text
    assert requests.get(shared.api(f"/api/traces/{tid}")).status_code == 404
    assert requests.delete(shared.api(f"/api/traces/{tid}")).status_code == 404
    after = shared.db.row_counts()
    assert after["traces"] == before["traces"] - 1
    assert shared.db.orphans() == {}
    # Stored anew (SQLite may hand out the freed id again: the frame cache checks the
    # content hash, see test_frames.py::test_reused_id_never_shows_the_old_trace).
    again = post_raw(shared, SMALL, name="small")
    assert again.status_code == 201
    s2 = requests.get(shared.api(f"/api/traces/{again.json()['id']}"))
    assert s2.status_code == 200 and s2.json()["transition_counts"] == counts


def graph_counts(graph: dict[str, Any]) -> collections.Counter[tuple[str, str]]:
    out: collections.Counter[tuple[str, str]] = collections.Counter()
    for e in graph["edges"]:
        out[(e["source"], e["target"])] += e["count"]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("trace", TRACES, ids=[t.stem for t in TRACES])
def test_stategraph_and_summary_match_go(shared: IngestServer, trace: Path) -> None:
    from tests.support.goparsed import go_parsed

    events, err = go_parsed(trace)
    assert err is None
    go: collections.Counter[tuple[str, str, str, str]] = collections.Counter(
        (e.resource, e.from_state, e.to_state, e.reason)
        for e in events if e.kind == "StateTransition")
    r = post_raw(shared, trace)
    assert r.status_code in (200, 201), r.text
    tid = r.json()["id"]
    summary = requests.get(shared.api(f"/api/traces/{tid}")).json()
    ours = collections.Counter({(c["resource"], c["from"], c["to"], c["reason"]): c["count"]
                                for c in summary["transition_counts"]})
    assert ours == go
    for resource in ("goroutine", "proc"):
        g = requests.get(shared.api(f"/api/traces/{tid}/stategraph"),
                         params={"resource": resource, "format": "json"})
        assert g.status_code == 200, g.text
        want: collections.Counter[tuple[str, str]] = collections.Counter()
        for (res, frm, to, _), n in go.items():
            if res == resource:
                want[(frm, to)] += n
        assert graph_counts(g.json()) == want


def test_stategraph_formats(shared: IngestServer) -> None:
    tid = post_raw(shared, TRACE).json()["id"]
    for resource in ("goroutine", "proc"):
        j = requests.get(shared.api(f"/api/traces/{tid}/stategraph"),
                         params={"resource": resource})
        assert j.status_code == 200 and j.headers["Content-Type"].startswith("application/json")
        graph = j.json()
        states = {n["id"] if isinstance(n, dict) else n for n in graph["nodes"]}
        assert {e["source"] for e in graph["edges"]} | {e["target"] for e in graph["edges"]} \
            <= states
        assert graph["total"] == sum(e["count"] for e in graph["edges"])
        for e in graph["edges"]:
            assert e["count"] > 0
        m = requests.get(shared.api(f"/api/traces/{tid}/stategraph"),
                         params={"resource": resource, "format": "mermaid"})
        assert m.status_code == 200 and m.headers["Content-Type"].startswith("text/plain")
        lines = m.text.strip().splitlines()
        assert lines[0].strip().startswith(("stateDiagram", "flowchart", "graph"))
        assert sum("-->" in ln for ln in lines) == len(graph["edges"])
        d = requests.get(shared.api(f"/api/traces/{tid}/stategraph"),
                         params={"resource": resource, "format": "dot"})
        assert d.status_code == 200 and d.headers["Content-Type"].startswith("text/plain")
        dot = d.text.strip()
        assert re.match(r"^(strict\s+)?digraph\b[^{]*\{", dot) and dot.endswith("}")
        assert dot.count("{") == dot.count("}")
        assert sum("->" in ln for ln in dot.splitlines()) == len(graph["edges"])
    for params in ({"resource": "thread"}, {"format": "svg"}):
        bad = requests.get(shared.api(f"/api/traces/{tid}/stategraph"), params=params)
        assert bad.status_code == 400 and bad.json()["error"]
    assert requests.get(shared.api("/api/traces/999999/stategraph")).status_code == 404
