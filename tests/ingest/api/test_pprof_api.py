"""The pprof downloads and the flame API through a real server
(``GET /api/traces/<id>/pprof``, ``/flame``, ``/flame/goroutines``), on
SQLite and PostgreSQL, over real workload traces (Go 1.21: the old format;
Go 1.27): each file read by ``go tool pprof -raw`` equals ``go tool trace
-pprof=TYPE``'s; the CLI writes the same bytes; the flame tree holds the
profile's totals and its root's goroutines add up to them; bad parameters
answer 4xx in JSON."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.gopprof import go_trace_pprof, pprof_raw
from tests.support.ingest_fixtures import backends, make_db_url
from tests.support.server import REPO, Served
from tests.support.workload_traces import workload_trace

pytestmark = pytest.mark.slow

TRACES = (("1.21.13", "httpnet"), ("1.27.3", "httpnet"), ("1.27.3", "mutex"))
GO_TYPES = ("net", "sync", "syscall", "sched")


@pytest.fixture(scope="module", params=backends())
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[Served, str, dict[Path, int]]]:
    base = tmp_path_factory.mktemp("pprof-api")
    traces = [workload_trace(v, w) for v, w in TRACES]
    for url in make_db_url(request.param, base):
        with Served(base / "data", traces, db_url=url) as s:
            listed = s.get("/api/traces").json()["traces"]
            ids = {t: next(x["id"] for x in listed if x["name"] == t.name) for t in traces}
            yield s, url, ids


@pytest.mark.parametrize("version, workload", TRACES)
def test_download_equals_go_tool_trace(served: tuple[Served, str, dict[Path, int]],
                                       version: str, workload: str) -> None:
    s, _url, ids = served
    trace = workload_trace(version, workload)
    for kind in GO_TYPES:
        r = s.get(f"/api/traces/{ids[trace]}/pprof", params={"type": kind})
        assert r.status_code == 200, r.text
        assert r.headers["Content-Type"] == "application/octet-stream"
        assert f'filename="trace-{ids[trace]}-{kind}.pb.gz"' in r.headers["Content-Disposition"]
        assert r.content[:2] == b"\x1f\x8b"
        ours, go = pprof_raw(r.content), pprof_raw(go_trace_pprof(trace, kind))
        assert ours.stacks == go.stacks and ours.samples == go.samples, kind


def test_cli_writes_the_same_bytes(served: tuple[Served, str, dict[Path, int]],
                                   tmp_path: Path) -> None:
    s, url, ids = served
    tid = ids[workload_trace("1.27.3", "httpnet")]
    tree = s.get(f"/api/traces/{tid}/flame", params={"kind": "sched"}).json()
    assert tree["count"] > 0
    env = dict(os.environ)
    env.pop("GMPSCOPE_DB", None)
    out = tmp_path / "sched.pb.gz"
    r = subprocess.run([sys.executable, "-m", "gmpscope", "pprof", str(tid), "-t", "sched",
                        "-o", str(out), "--db", url, "--data-dir", str(s.data_dir)],
                       cwd=REPO, env=env, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    api = s.get(f"/api/traces/{tid}/pprof", params={"type": "sched"})
    assert out.read_bytes() == api.content


@pytest.mark.parametrize("kind", ["net", "lock", "chan", "sync", "syscall", "sched", "cpu"])
def test_flame_tree_holds_the_profile(served: tuple[Served, str, dict[Path, int]],
                                      kind: str) -> None:
    s, _url, ids = served
    tid = ids[workload_trace("1.27.3", "httpnet")]
    first = s.get(f"/api/traces/{tid}").json()
    mid = (first["first_ts"] + first["last_ts"]) // 2
    for window in ({}, {"t1": first["first_ts"], "t2": mid}):
        prof = s.get(f"/api/traces/{tid}/pprof",
                     params={"type": kind, "format": "json", **window}).json()
        tree = s.get(f"/api/traces/{tid}/flame", params={"kind": kind, **window}).json()
        nodes = tree["nodes"]
        assert [tree["count"], tree["total_ns"]] == prof["totals"]
        assert (nodes["count"][0], nodes["value"][0]) == (tree["count"], tree["total_ns"])
        # A node holds what its children hold and its own self time.
        for n in nodes["id"]:
            kids = [c for c in nodes["id"] if nodes["parent"][c] == n]
            assert nodes["value"][n] == nodes["self"][n] + sum(nodes["value"][c] for c in kids)
        # Every leaf is a sample's stack (merged by pcs, so a function path may repeat).
        leaves = sum(1 for n in nodes["id"] if nodes["self"][n] > 0 and n > 0)
        assert leaves <= len(prof["samples"])
        if not tree["count"]:
            continue
        root = s.get(f"/api/traces/{tid}/flame/goroutines",
                     params={"kind": kind, "node": 0, **window}).json()
        assert root["goroutine_count"] == tree["goroutines"]
        if root["goroutine_count"] <= len(root["goroutines"]):
            assert sum(g["value_ns"] for g in root["goroutines"]) == tree["total_ns"]
            assert sum(g["count"] for g in root["goroutines"]) == tree["count"]
        heaviest = max(range(1, len(nodes["id"])), key=lambda n: nodes["value"][n])
        node = s.get(f"/api/traces/{tid}/flame/goroutines",
                     params={"kind": kind, "node": heaviest, **window}).json()
        assert node["function"] == nodes["name"][heaviest]
        assert (node["count"], node["value_ns"]) == (nodes["count"][heaviest],
                                                     nodes["value"][heaviest])


@pytest.mark.parametrize("path, params, status, message", [
    ("pprof", {"type": "heap"}, 400, "type must be one of"),
    ("pprof", {}, 400, "type must be one of"),
    ("pprof", {"type": "net", "t1": "x"}, 400, "t1 must be an integer"),
    ("pprof", {"type": "net", "t1": "5", "t2": "3"}, 400, "t2 must be greater than t1"),
    ("pprof", {"type": "net", "format": "svg"}, 400, "format must be pprof or json"),
    ("flame", {"kind": "nope"}, 400, "kind must be one of"),
    ("flame/goroutines", {"kind": "sync"}, 400, "node is required"),
    ("flame/goroutines", {"kind": "sync", "node": "100000"}, 404, "no node 100000"),
])
def test_bad_parameters(served: tuple[Served, str, dict[Path, int]], path: str,
                        params: dict[str, str], status: int, message: str) -> None:
    s, _url, ids = served
    tid = ids[workload_trace("1.27.3", "mutex")]
    r = s.get(f"/api/traces/{tid}/{path}", params=params)
    assert r.status_code == status and message in r.json()["error"], r.text


def test_unknown_trace(served: tuple[Served, str, dict[Path, int]]) -> None:
    s, _url, _ids = served
    for path, params in (("pprof", {"type": "net"}), ("flame", {"kind": "net"})):
        r = s.get(f"/api/traces/999999/{path}", params=params)
        assert r.status_code == 404 and "no trace with id 999999" in r.json()["error"]
