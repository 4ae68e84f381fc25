"""The ingest HTTP API through a real server process, on SQLite and PostgreSQL.

Each test talks HTTP (requests) to ``python -m gmpscope ingest-server`` started on a
free port against a real database: an SQLite file, or a fresh database in the
private PostgreSQL cluster of ``tools/postgres.py``. Uploads are the committed real
traces; expected counts come from the server's own answers, from the database,
or from Go's reference parser (``go tool trace -d=parsed``, tests marked slow).
"""

from __future__ import annotations

import collections
import concurrent.futures
import hashlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import threading
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import sqlalchemy as sa

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools import postgres  # noqa: E402

TRACES = sorted((REPO / "tests" / "data" / "traces").glob("*.trace"))
TRACE = REPO / "tests" / "data" / "traces" / "go1.22-workers.trace"
SMALL = REPO / "tests" / "data" / "traces" / "go1.19-mixed.trace"
#: A guard against a server that never comes up: a hang, not a speed limit.
START_GUARD_S = 120.0


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------
# databases


class Database:
    """A fresh, empty database for a test (module), and direct SQL access to it."""

    def __init__(self, kind: str, tmp: Path) -> None:
        self.kind = kind
        self._pg_name = ""
        if kind == "sqlite":
            self.url = f"sqlite:///{tmp / 'gmpscope.db'}"
        else:
            self._pg_name = f"gmpscope_t_{uuid.uuid4().hex[:12]}"
            self.url = postgres.create_database(self._pg_name)
        self._engine: sa.Engine | None = None

    @property
    def engine(self) -> sa.Engine:
        if self._engine is None:
            self._engine = sa.create_engine(self.url, poolclass=sa.pool.NullPool)
        return self._engine

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
        if self._pg_name:
            postgres.drop_database(self._pg_name)

    def tables(self) -> list[str]:
        return sorted(t for t in sa.inspect(self.engine).get_table_names()
                      if t != "alembic_version")

    def row_counts(self) -> dict[str, int]:
        """Rows in every table: the whole database's state, cheaply compared."""
        with self.engine.connect() as c:
            return {t: c.execute(sa.text(f'SELECT COUNT(*) FROM "{t}"')).scalar_one()
                    for t in self.tables()}

    def trace_shas(self) -> list[str]:
        with self.engine.connect() as c:
            return [r[0] for r in c.execute(sa.text("SELECT sha256 FROM traces"))]

    def orphans(self) -> dict[str, int]:
        """Rows that belong to no committed trace, per table (should be none)."""
        insp = sa.inspect(self.engine)
        out: dict[str, int] = {}
        with self.engine.connect() as c:
            for t in self.tables():
                cols = {col["name"] for col in insp.get_columns(t)}
                if t == "traces" or "trace_id" not in cols:
                    continue
                n = c.execute(sa.text(
                    f'SELECT COUNT(*) FROM "{t}" WHERE trace_id NOT IN (SELECT id FROM traces)'
                )).scalar_one()
                if n:
                    out[t] = n
        return out


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def db_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    if kind == "postgresql":
        try:
            postgres.start()
        except postgres.PostgresError as e:  # pragma: no cover - setup problem
            pytest.fail(f"PostgreSQL for tests: {e} (run `make test-setup`)")
    return kind


def new_db(kind: str, tmp: Path) -> Database:
    return Database(kind, tmp)


# --------------------------------------------------------------------------
# servers


class Server:
    """``gmpscope ingest-server`` in its own process group, on a free port."""

    def __init__(self, db: Database, data_dir: Path, *args: str,
                 token: str | None = None) -> None:
        self.db = db
        self.data_dir = data_dir
        self.args = args
        self.token = token
        self.log = data_dir / "server.log"
        self.url = ""
        self.start()

    def start(self) -> None:
        env = dict(os.environ)
        env.pop("GMPSCOPE_TOKEN", None)
        if self.token is not None:
            env["GMPSCOPE_TOKEN"] = self.token
        cmd = [sys.executable, "-m", "gmpscope", "ingest-server", "--db", self.db.url,
               "--data-dir", str(self.data_dir), "--port", "0", *self.args]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                         stderr=log, start_new_session=True)
        found: list[str] = []

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                m = re.search(rb"serving (http://\S+)", line)
                if m:
                    found.append(m.group(1).decode())
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(START_GUARD_S)
        if not found:
            self.kill9()
            pytest.fail(f"ingest-server did not start: {self.log.read_text()[-3000:]}")
        self.url = found[0]

    def api(self, path: str) -> str:
        return self.url + path

    def stop(self) -> int:
        """SIGTERM and wait; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(START_GUARD_S)
            except subprocess.TimeoutExpired:  # pragma: no cover - a hang
                self.kill9()
        return self.proc.wait()

    def kill9(self) -> None:
        """SIGKILL the master and every worker at once, as a crash would."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


def auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def post_raw(server: Server, path: Path | bytes, name: str = "t",
             token: str | None = None, chunked: bool = False) -> requests.Response:
    data = path.read_bytes() if isinstance(path, Path) else path
    body: Any = data
    if chunked:
        body = (data[i:i + 65536] for i in range(0, len(data), 65536))
    return requests.post(server.api("/api/traces"), params={"name": name}, data=body,
                         headers={"Content-Type": "application/octet-stream",
                                  **auth(token or server.token)})


def post_multipart(server: Server, path: Path, token: str | None = None,
                   route: str = "/api/traces", **fields: str) -> requests.Response:
    with open(path, "rb") as f:
        return requests.post(server.api(route), files={"file": (path.name, f)},
                             data=fields, headers=auth(token or server.token))


@pytest.fixture(scope="module")
def shared(db_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server per database kind for the tests that do not need their own."""
    tmp = tmp_path_factory.mktemp(f"ingest-{db_kind}")
    db = new_db(db_kind, tmp)
    server = Server(db, tmp / "data")
    yield server
    assert server.stop() == 0
    db.close()


@pytest.fixture
def own_db(db_kind: str, tmp_path: Path) -> Iterator[Database]:
    db = new_db(db_kind, tmp_path)
    yield db
    db.close()


# --------------------------------------------------------------------------
# uploads


def test_healthz(shared: Server) -> None:
    r = requests.get(shared.api("/healthz"))
    assert r.status_code == 200
    assert r.json()["status"] == "ok"


def test_upload_raw_multipart_chunked_and_duplicates(shared: Server) -> None:
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
def test_every_committed_trace_multipart(shared: Server, trace: Path) -> None:
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
def test_garbage_is_400_and_leaves_db_alone(shared: Server, kind: str) -> None:
    before = shared.db.row_counts()
    r = post_raw(shared, GARBAGE[kind]())
    assert r.status_code == 400, r.text
    assert r.headers["Content-Type"].startswith("application/json")
    assert r.json()["error"]
    assert shared.db.row_counts() == before
    assert not list((shared.data_dir / "tmp").glob(".upload-*"))


def test_errors_are_json(shared: Server) -> None:
    for method, path, status in [("GET", "/api/traces/999999", 404),
                                 ("DELETE", "/api/traces/999999", 404),
                                 ("GET", "/api/nothing", 404),
                                 ("PUT", "/api/traces", 405),
                                 ("GET", "/api/traces/abc", 404)]:
        r = requests.request(method, shared.api(path))
        assert r.status_code == status, (method, path, r.text)
        assert r.headers["Content-Type"].startswith("application/json")
        assert r.json()["error"]


def test_bad_multipart_is_400(shared: Server) -> None:
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


def post_archive(server: Server, data: bytes, multipart: bool = False,
                 name: str = "pq") -> requests.Response:
    if multipart:
        return requests.post(server.api("/api/traces/parquet"), params={"name": name},
                             files={"file": ("d.zip", data)}, headers=auth(server.token))
    return requests.post(server.api("/api/traces/parquet"), params={"name": name}, data=data,
                         headers={"Content-Type": "application/octet-stream",
                                  **auth(server.token)})


def test_parquet_archives(shared: Server, tmp_path: Path) -> None:
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


def test_bad_archives(shared: Server, tmp_path: Path) -> None:
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


def test_list_summary_delete(shared: Server) -> None:
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
def test_stategraph_and_summary_match_go(shared: Server, trace: Path) -> None:
    from support.goparsed import go_parsed

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


def test_stategraph_formats(shared: Server) -> None:
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


# --------------------------------------------------------------------------
# limits and tokens (servers of their own)


def test_size_limit(own_db: Database, tmp_path: Path) -> None:
    limit = 100 * 1024
    assert SMALL.stat().st_size < limit < TRACE.stat().st_size
    server = Server(own_db, tmp_path / "data", "--max-upload", "100k")
    try:
        before = own_db.row_counts()
        over = [post_raw(server, TRACE), post_raw(server, TRACE, chunked=True),
                post_multipart(server, TRACE),
                post_archive(server, TRACE.read_bytes())]
        for r in over:
            assert r.status_code == 413, r.text
            assert "limit" in r.json()["error"]
        # A zip under the upload limit that expands past what an archive may
        # write (20 x the limit, at least 64 MiB): a compression bomb.
        bomb = io.BytesIO()
        with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("meta.json", b"\0" * (80 << 20))
        assert len(bomb.getvalue()) < limit
        r = post_archive(server, bomb.getvalue())
        assert r.status_code == 413 and "bomb" in r.json()["error"], r.text
        assert own_db.row_counts() == before
        assert post_raw(server, SMALL).status_code == 201
        assert not list((tmp_path / "data" / "tmp").glob(".upload-*"))
    finally:
        assert server.stop() == 0


def test_token_for_writes(own_db: Database, tmp_path: Path) -> None:
    server = Server(own_db, tmp_path / "data", token="s3cret-tök")
    try:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"},
                        {"Authorization": "Basic czNjcmV0"}):
            r = requests.post(server.api("/api/traces"), data=SMALL.read_bytes(),
                              headers=headers)
            assert r.status_code == 401, r.text
            assert r.json()["error"]
        assert own_db.row_counts()["traces"] == 0
        ok = requests.post(server.api("/api/traces"), data=SMALL.read_bytes(),
                           headers={"Authorization": "Bearer s3cret-tök".encode()})
        assert ok.status_code == 201, ok.text
        tid = ok.json()["id"]
        assert requests.get(server.api("/api/traces")).status_code == 200
        assert requests.get(server.api(f"/api/traces/{tid}")).status_code == 200
        assert requests.delete(server.api(f"/api/traces/{tid}")).status_code == 401
        assert requests.delete(server.api(f"/api/traces/{tid}"),
                               headers={"Authorization": "Bearer s3cret-tök".encode()}
                               ).status_code == 200
    finally:
        assert server.stop() == 0


# --------------------------------------------------------------------------
# concurrency and crashes


_CLIENT = """
import sys, urllib.error, urllib.request
req = urllib.request.Request(sys.argv[1], data=open(sys.argv[2], "rb").read(), method="POST",
                             headers={"Content-Type": "application/octet-stream"})
try:
    with urllib.request.urlopen(req) as r:
        status, body = r.status, r.read()
except urllib.error.HTTPError as e:
    status, body = e.code, e.read()
sys.stdout.write(str(status) + "\\n" + body.decode())
"""


def upload_from_process(server: Server, trace: Path) -> tuple[int, str]:
    """Upload from another process (urllib), as a separate client program would."""
    out = subprocess.run([sys.executable, "-c", _CLIENT, server.api("/api/traces"), str(trace)],
                         capture_output=True, text=True, check=True).stdout
    status, _, body = out.partition("\n")
    return int(status), body


def test_concurrent_uploads(own_db: Database, tmp_path: Path) -> None:
    server = Server(own_db, tmp_path / "data", "--workers", "3", "--threads", "4")
    try:
        jobs = [t for t in TRACES for _ in range(3)]  # every trace three times at once
        health: list[int] = []
        stop = threading.Event()

        def probe() -> None:
            while not stop.is_set():
                health.append(requests.get(server.api("/healthz")).status_code)

        def upload(i_trace: tuple[int, Path]) -> tuple[int, str]:
            i, trace = i_trace
            if i % 4 == 0:
                r = post_multipart(server, trace)
            elif i % 4 == 3:
                return upload_from_process(server, trace)
            else:
                r = post_raw(server, trace, chunked=i % 4 == 2)
            return r.status_code, r.text

        prober = threading.Thread(target=probe)
        prober.start()
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
            answers = list(pool.map(upload, enumerate(jobs)))
        stop.set()
        prober.join()
        for status, text in answers:
            assert status in (200, 201), text
            assert "locked" not in text
        by_sha: dict[str, set[int]] = collections.defaultdict(set)
        created: collections.Counter[str] = collections.Counter()
        for status, text in answers:
            body = json.loads(text)
            by_sha[body["sha256"]].add(body["id"])
            created[body["sha256"]] += status == 201
        assert set(by_sha) == {sha256(t) for t in TRACES}
        assert all(len(ids) == 1 for ids in by_sha.values())
        assert all(n == 1 for n in created.values()), created
        assert sorted(own_db.trace_shas()) == sorted(by_sha)
        assert health and set(health) == {200}
        assert own_db.orphans() == {}
    finally:
        assert server.stop() == 0


def _wait_for_spool(data_dir: Path, size: int, proc: subprocess.Popen[bytes]) -> bool:
    """Poll until an upload spool file in the data dir has all ``size`` bytes."""
    tmp = data_dir / "tmp"
    while proc.poll() is None:
        for p in tmp.glob(".upload-*") if tmp.is_dir() else ():
            try:
                if p.stat().st_size == size:
                    return True
            except FileNotFoundError:
                continue
        time.sleep(0.001)
    return False


def test_kill9_mid_ingest_then_restart(own_db: Database, tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = Server(own_db, data, "--workers", "1")
    big = max(TRACES, key=lambda p: p.stat().st_size)
    size = big.stat().st_size
    killed_mid_ingest = 0
    for _attempt in range(3):
        answer: list[requests.Response | Exception] = []

        def upload() -> None:
            try:
                answer.append(post_raw(server, big))  # noqa: B023
            except requests.RequestException as e:
                answer.append(e)  # noqa: B023

        t = threading.Thread(target=upload)
        t.start()
        assert _wait_for_spool(data, size, server.proc)
        server.kill9()
        t.join()
        if isinstance(answer[0], Exception):
            killed_mid_ingest += 1
        if own_db.kind == "sqlite":
            with own_db.engine.connect() as c:
                assert c.execute(sa.text("PRAGMA integrity_check")).scalar_one() == "ok"
        assert own_db.orphans() == {}
        assert own_db.trace_shas().count(sha256(big)) <= 1
        server.start()  # the same database and data directory
        if killed_mid_ingest:
            break
        # The ingest won the race against the kill: start over with an empty DB.
        tid = requests.get(server.api("/api/traces")).json()
        for tr in tid["traces"] if isinstance(tid, dict) else tid:
            requests.delete(server.api(f"/api/traces/{tr['id']}"))
    try:
        assert killed_mid_ingest, "the server answered before every kill"
        r = post_raw(server, big)
        assert r.status_code == 201, r.text
        assert own_db.trace_shas() == [sha256(big)]
        assert post_raw(server, big).status_code == 200
        assert own_db.orphans() == {}
    finally:
        assert server.stop() == 0
