"""OS recordings through a real ``gmpscope serve``: uploads (attach, standalone,
token, bad archives leave the database unchanged), the JSON API, the pages (the
Dash routing callback, as the browser calls it) and the exported diagrams.

Data: the real strace captures in tests/data/strace/ and the Go trace of the
same httpnet run.
"""

from __future__ import annotations

import io
import json
import sqlite3
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from tests.support.poller_recordings import GO_TRACE, make_recording
from tests.support.server import Served

TOKEN = "poller-t0ken"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def recs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("recs")
    return {"httpnet": make_recording("httpnet", root / "httpnet"),
            "httpnet+go": make_recording("httpnet", root / "httpnet-go", with_go_trace=True),
            "pollmix": make_recording("pollmix", root / "pollmix"),
            "connleak": make_recording("connleak", root / "connleak")}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("srv") / "data", [GO_TRACE], token=TOKEN) as s:
        yield s


@pytest.fixture(scope="module")
def go_id(served: Served) -> int:
    (tid,) = served.ingested
    return tid


def zipped(directory: Path, prefix: str = "") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for p in sorted(directory.iterdir()):
            zf.write(p, prefix + p.name)
    return buf.getvalue()


def tarred(directory: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        tf.add(directory, arcname=directory.name)
    return buf.getvalue()


def db_state(served: Served) -> dict[str, Any]:
    con = sqlite3.connect(f"file:{served.data_dir / 'gmpscope.db'}?mode=ro", uri=True)
    try:
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall()
                for t in ("poller_events", "poller_recordings")} | {
            "traces": con.execute("SELECT id, sha256 FROM traces ORDER BY id").fetchall()}
    finally:
        con.close()


def render(served: Served, path: str, search: str = "") -> str:
    """The page at ``path`` as the browser gets it: the router callback's JSON."""
    body = {"output": "page-content.children",
            "outputs": {"id": "page-content", "property": "children"},
            "inputs": [{"id": "url", "property": "pathname", "value": path},
                       {"id": "url", "property": "search", "value": search}],
            "changedPropIds": ["url.pathname"], "state": []}
    r = served.post("/_dash-update-component", json=body, headers=AUTH)
    assert r.status_code == 200, r.text[:500]
    return r.text


def test_attach_needs_the_token_and_stores_it(served: Served, go_id: int,
                                              recs: dict[str, Path]) -> None:
    before = db_state(served)
    r = served.post(f"/api/traces/{go_id}/poller", data=zipped(recs["httpnet"]))
    assert r.status_code == 401 and db_state(served) == before
    r = served.post(f"/api/traces/{go_id}/poller", data=zipped(recs["httpnet"]), headers=AUTH)
    assert r.status_code == 201, r.text
    got = r.json()
    assert got["id"] == go_id and got["attach"]["method"] == "clock-snapshot"
    rows = pq.read_metadata(recs["httpnet"] / "poller.parquet").num_rows
    assert got["attach"]["rows"] == rows
    again = served.post(f"/api/traces/{go_id}/poller", data=zipped(recs["httpnet"]),
                        headers=AUTH)
    assert again.status_code == 200 and not again.json()["attach"]["created"]
    al = served.get(f"/api/traces/{go_id}/poller/alignment").json()
    assert al["rows"] == rows and al["offset_ns"] == got["attach"]["offset_ns"]
    assert served.post("/api/traces/9999/poller", data=zipped(recs["httpnet"]),
                       headers=AUTH).status_code == 404


def test_standalone_upload(served: Served, recs: dict[str, Path]) -> None:
    r = served.post("/api/recordings?name=pollmix-run", data=tarred(recs["pollmix"]),
                    headers=AUTH)
    assert r.status_code == 201, r.text
    got = r.json()
    assert got["recording"] == "standalone" and got["go_version"] == "n/a"
    tr = served.get(f"/api/traces/{got['id']}").json()
    assert tr["source"] == "poller" and tr["family"] == "os" and tr["name"] == "pollmix-run"
    page = served.get(f"/api/traces/{got['id']}/poller").json()
    assert page["rows"] == pq.read_metadata(recs["pollmix"] / "poller.parquet").num_rows
    assert page["alignment"]["method"] == "wall-clock"
    assert served.post("/api/recordings", data=tarred(recs["pollmix"])).status_code == 401


def test_upload_with_its_go_trace_attaches(served: Served, go_id: int,
                                           recs: dict[str, Path]) -> None:
    """The archive holds the Go trace meta.json names: found by hash, attached to it."""
    r = served.post("/api/recordings", data=zipped(recs["httpnet+go"], "rec/"), headers=AUTH)
    assert r.status_code in (200, 201), r.text
    assert r.json()["recording"] == "attached" and r.json()["id"] == go_id


def test_meta_naming_a_server_file_is_not_read(served: Served, tmp_path: Path,
                                               recs: dict[str, Path]) -> None:
    """A meta.json that names a Go trace elsewhere on the server: never ingested."""
    d = tmp_path / "rec"
    d.mkdir()
    (d / "poller.parquet").write_bytes((recs["connleak"] / "poller.parquet").read_bytes())
    meta = json.loads((recs["connleak"] / "meta.json").read_text())
    meta["go_trace"] = {"path": str(GO_TRACE.resolve()), "name": "x.trace", "exists": True}
    (d / "meta.json").write_text(json.dumps(meta))
    r = served.post("/api/recordings", data=zipped(d), headers=AUTH)
    assert r.status_code == 201 and r.json()["recording"] == "standalone"


def _bad_archives(recs: dict[str, Path], tmp: Path) -> dict[str, bytes]:
    no_parquet = io.BytesIO()
    with zipfile.ZipFile(no_parquet, "w") as zf:
        zf.writestr("meta.json", "{}")
    corrupt = io.BytesIO()
    with zipfile.ZipFile(corrupt, "w") as zf:
        zf.writestr("poller.parquet", b"PAR1 this is not parquet PAR1")
    link = io.BytesIO()
    with tarfile.open(fileobj=link, mode="w") as tf:
        info = tarfile.TarInfo("poller.parquet")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tf.addfile(info)
    bad_meta = io.BytesIO()
    with zipfile.ZipFile(bad_meta, "w") as zf:
        zf.write(recs["pollmix"] / "poller.parquet", "poller.parquet")
        zf.writestr("meta.json", "{not json")
    two = io.BytesIO()
    with zipfile.ZipFile(two, "w") as zf:
        for sub in ("a", "b"):
            zf.write(recs["pollmix"] / "poller.parquet", f"{sub}/poller.parquet")
    return {"not an archive": b"just some bytes", "no poller.parquet": no_parquet.getvalue(),
            "corrupt parquet": corrupt.getvalue(), "symlink": link.getvalue(),
            "meta not json": bad_meta.getvalue(), "two recordings": two.getvalue(),
            "truncated": zipped(recs["pollmix"])[:300]}


def test_bad_archives_answer_400_and_change_nothing(served: Served, go_id: int, tmp_path: Path,
                                                    recs: dict[str, Path]) -> None:
    for what, blob in _bad_archives(recs, tmp_path).items():
        for url in ("/api/recordings", f"/api/traces/{go_id}/poller"):
            before = db_state(served)
            r = served.post(url, data=blob, headers=AUTH)
            assert r.status_code == 400, (what, url, r.status_code, r.text)
            assert "error" in r.json()
            assert str(served.data_dir) not in r.json()["error"], r.json()
            assert db_state(served) == before, (what, url)


def test_json_api(served: Served, go_id: int, recs: dict[str, Path]) -> None:
    served.post(f"/api/traces/{go_id}/poller", data=zipped(recs["httpnet"]), headers=AUTH)
    tr = served.get(f"/api/traces/{go_id}").json()
    marks = served.get(f"/api/traces/{go_id}/poller/marks?max=20").json()
    assert marks["merged"] and sum(m["count"] for m in marks["marks"]) == marks["total"]
    os_ = served.get(f"/api/traces/{go_id}/poller/os-syscalls?limit=5").json()
    assert os_["joined"] and len(os_["slowest"]) == 5
    assert served.get(f"/api/traces/{go_id}/poller/marks?t1=5&t2=5").status_code == 400
    assert served.get(f"/api/traces/{go_id}/poller/marks?t1=x").status_code == 400
    assert served.get("/api/traces/9999/poller/marks").status_code == 404
    # An M lane mark lies within the trace.
    assert all(tr["first_ts"] - m["duration_ns"] <= m["ts"] <= tr["last_ts"]
               for m in marks["marks"] if m["duration_ns"] is not None)


def test_no_recording_is_a_clear_404(served: Served, recs: dict[str, Path]) -> None:
    other = Path(__file__).resolve().parents[3] / "samples" / "go1.27-syscallblock.trace"
    r = served.post("/api/traces", data=other.read_bytes(), headers=AUTH)
    tid = r.json()["id"]
    got = served.get(f"/api/traces/{tid}/poller")
    assert got.status_code == 404 and "no OS recording" in got.json()["error"]
    assert "has no OS recording" in render(served, f"/traces/{tid}/poller")
    assert "OS calls (strace)" not in render(served, f"/traces/{tid}/timeline", "?mode=m")


def test_pages(served: Served, go_id: int, recs: dict[str, Path]) -> None:
    r = served.post(f"/api/traces/{go_id}/poller", data=zipped(recs["httpnet"]), headers=AUTH)
    assert r.status_code in (200, 201), r.text  # 200: attached by an earlier test
    page = render(served, f"/traces/{go_id}/poller")
    for text in ("clock-snapshot", "poller-epoll", "Which made the runtime hand off a P",
                 "poller-os-handoff-table", "timeout jitter"):
        assert text.lower() in page.lower(), text
    # The timeline's tiles by M carry the OS marks (the calls, on their thread's
    # lane); by P they do not.
    def marks(mode: str) -> list[dict[str, object]]:
        tile = served.get(f"/api/traces/{go_id}/timeline/tiles", params={
            "mode": mode, "level": 0, "index": 0, "lanes": "0-200", "format": "json"}).json()
        got: list[dict[str, object]] = tile["marks"]
        return got
    by_m = marks("m")
    assert len(by_m) > 100 and {"futex", "epoll_pwait"} <= {mk["syscall"] for mk in by_m}
    assert marks("p") == []
    alone = served.post("/api/recordings", data=zipped(recs["connleak"]), headers=AUTH).json()
    sid = alone["id"]
    assert "readiness waits" in render(served, f"/traces/{sid}/poller")
    for sub in ("overview", "timeline", "states", "goroutines", "syscalls", "latency",
                "annotations", "goroutines/1"):
        assert "OS recording without a Go trace" in render(served, f"/traces/{sid}/{sub}"), sub
    listed = {t["id"]: t for t in served.get("/api/traces").json()["traces"]}
    assert listed[sid]["source"] == "poller" and listed[sid]["go_version"] == "n/a"
    assert listed[sid]["name"] == "connleak (OS recording)"  # named after its program


@pytest.mark.parametrize("diagram", ["poller-waits", "poller-fds", "poller-epoll",
                                     "poller-epoll-ctl", "poller-errors", "poller-io-uring",
                                     "poller-events-per-wakeup", "os-syscalls"])
def test_exported_diagrams(served: Served, go_id: int, recs: dict[str, Path],
                           diagram: str) -> None:
    served.post(f"/api/traces/{go_id}/poller", data=zipped(recs["httpnet"]), headers=AUTH)
    r = served.get(f"/api/traces/{go_id}/export?diagram={diagram}&format=svg")
    assert r.status_code == 200 and r.text.lstrip().startswith("<svg"), r.text[:300]
