"""Who may read: every route of both servers, through real servers with both tokens set
(on SQLite, and on PostgreSQL when GMPSCOPE_TEST_PG_URL is set).

The routes are not listed here: they are read from each Flask app's url_map
(the ingest API, the figure downloads, SQL, pprof, flame, Perfetto, Dash's own
``/_dash-*`` routes and pages), so a route added later is checked too. What this
file does list is the few routes meant to be open (no data) and the one POST that
only reads (Dash's callbacks); a route wrongly left open fails here. For every
rule and method it sends no token, a wrong one, the read token and the write
token: guarded reads answer 401 (a page: a redirect to /login) without a valid
token and pass with either token; writes answer 401 without, 403 with the read
token and pass with the write token. Writes aim at ids that exist nowhere, so
nothing stored changes (checked by the trace list).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from flask import Flask
from werkzeug.routing import Rule

from app.server import create_app as create_ui_app
from ingest.api import auth
from ingest.api.server import create_app as create_ingest_app
from ingest.config import Settings
from tests.support.ingest_fixtures import backends, make_db_url
from tests.support.server import Served

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "samples" / "go1.27-syscallblock.trace"
WRITE_TOKEN = "w-5ecret-token"
READ_TOKEN = "r-5ecret-token"
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
WRITES = {"POST", "PUT", "PATCH", "DELETE"}
#: Routes that carry no data and are served to anyone: the health check, the login
#: form, Dash's scripts and the assets folder (static/).
OPEN = {"/healthz", "/login", "/logout", "/assets/<path:filename>", "/_favicon.ico",
        "/_dash-component-suites/<string:package_name>/<path:fingerprinted_path>"}
#: POSTs that only read: Dash's callbacks (none writes: test_reliability_token.py).
READ_POSTS = {"/_dash-update-component"}
#: Routes another change of issue 27 added today, which must be among those checked.
NEW_DATA_ROUTES = {"/api/sql", "/api/traces/<int:trace_id>/pprof",
                   "/api/traces/<int:trace_id>/flame", "/api/traces/<int:trace_id>/perfetto",
                   "/api/traces/<int:trace_id>/flame/goroutines"}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def rules_of(app: Flask) -> list[tuple[str, Rule]]:
    """(method, rule) for every rule of ``app`` (HEAD and OPTIONS are Flask's own)."""
    return [(m, r) for r in app.url_map.iter_rules() for m in METHODS if m in (r.methods or ())]


def url_of(rule: Rule, trace_id: int, write: bool) -> str:
    """``rule`` with its arguments filled in: the stored trace for reads, an id that
    exists nowhere for writes (so that they change nothing), and a query a few reads need."""
    values: dict[str, object] = {
        "trace_id": 999999 if write else trace_id, "goid": 1, "name": "goroutines",
        "segment": 999999,
        "upload_id": "0" * 32, "job_id": "0" * 32, "path": f"traces/{trace_id}/overview",
        "filename": "gmpscope.css", "package_name": "dash",
        "fingerprinted_path": "no-such-file.js"}
    missing = set(rule.arguments) - set(values)
    assert not missing, f"{rule.rule}: no example value for {missing}; add one here"
    built: str = rule.build({a: values[a] for a in rule.arguments},  # type: ignore[index]
                            append_unknown=False)[1]
    if rule.rule == "/api/sql":
        built += "?sql=SELECT%20count(*)%20AS%20n%20FROM%20traces"
    return built


def render_body(trace_id: int) -> dict[str, Any]:
    """The router callback Dash's page script sends to draw a trace's overview."""
    return {"output": "page-content.children",
            "outputs": {"id": "page-content", "property": "children"},
            "inputs": [{"id": "url", "property": "pathname",
                        "value": f"/traces/{trace_id}/overview"},
                       {"id": "url", "property": "search", "value": ""}],
            "changedPropIds": ["url.pathname"], "state": []}


def send(srv: Served, method: str, rule: Rule, trace_id: int,
         headers: dict[str, str]) -> requests.Response:
    url = url_of(rule, trace_id, method in WRITES and rule.rule not in READ_POSTS)
    if rule.rule in READ_POSTS:
        return requests.post(srv.url + url, json=render_body(trace_id), headers=headers,
                             timeout=300, allow_redirects=False)
    return requests.request(method, srv.url + url, data=b"x" if method in WRITES else None,
                            headers=headers, timeout=300, allow_redirects=False)


def is_page(method: str, rule: Rule) -> bool:
    return method == "GET" and not rule.rule.startswith(("/api/", "/_"))


GUARD_ERRORS = ({"error": auth.UNAUTHORIZED}, {"error": auth.WRONG}, {"error": auth.READ_ONLY})


def is_guard_answer(r: requests.Response) -> bool:
    """Whether the guard answered ``r`` (a refusal or a redirect to the form)."""
    if r.status_code == 302 and r.headers.get("Location", "").startswith("/login?"):
        return True
    if r.headers.get("Content-Type", "").startswith("application/json"):
        return r.status_code in (401, 403) and r.json() in GUARD_ERRORS
    return False


def check_route(srv: Served, method: str, rule: Rule, trace_id: int) -> list[str]:
    """What is wrong with ``method rule``'s answers to the four kinds of client."""
    bad: list[str] = []
    label = f"{method} {rule.rule}"

    def expect(ok: bool, what: str, r: requests.Response) -> None:
        if not ok:
            bad.append(f"{label} {what}: {r.status_code} {r.text[:120]!r}")

    none = send(srv, method, rule, trace_id, {})
    if rule.rule in OPEN:
        # Its own answer (the form's POST says "wrong token" itself), not the guard's.
        expect(not is_guard_answer(none), "open route refused", none)
        return bad
    if is_page(method, rule):
        where = none.headers.get("Location", "")
        expect(none.status_code == 302 and where.startswith("/login?next=/"),
               "page without a token not sent to /login", none)
    else:
        expect(none.status_code == 401 and none.json() == {"error": auth.UNAUTHORIZED}
               and none.headers.get("WWW-Authenticate", "").startswith("Bearer"),
               "without a token not a JSON 401", none)
    wrong = send(srv, method, rule, trace_id, bearer("not-the-token"))
    expect(wrong.status_code == 401 and wrong.json() == {"error": auth.WRONG},
           "wrong token not a JSON 401", wrong)
    writes = method in WRITES and rule.rule not in READ_POSTS
    read = send(srv, method, rule, trace_id, bearer(READ_TOKEN))
    if writes:
        expect(read.status_code == 403 and read.json() == {"error": auth.READ_ONLY},
               "read token writing not a JSON 403", read)
    else:
        expect(read.status_code not in (401, 403) and read.status_code < 500,
               "read token refused", read)
    write = send(srv, method, rule, trace_id, bearer(WRITE_TOKEN))
    expect(write.status_code not in (401, 403, 405) and write.status_code < 500,
           "write token refused", write)
    return bad


@pytest.fixture(scope="module", params=[(kind, backend) for kind in ("serve", "ingest-server")
                                        for backend in backends()],
                ids=lambda p: f"{p[0]}-{p[1]}")
def server(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Flask]]:
    """A real server (on SQLite, and PostgreSQL when configured) with both tokens and
    one stored trace, and an app of the same kind built in-process for its url_map."""
    kind, backend = request.param
    data = tmp_path_factory.mktemp(f"auth-{kind}")
    settings = Settings.from_env({}, data_dir=data / "map", token=WRITE_TOKEN,
                                 read_token=READ_TOKEN)
    app = create_ui_app(settings) if kind == "serve" else create_ingest_app(settings)
    for url in make_db_url(backend, data):
        srv = Served(data / "data", [SAMPLE] if kind == "serve" else [], db_url=url,
                     token=WRITE_TOKEN, read_token=READ_TOKEN, subcommand=kind)
        try:
            if kind == "ingest-server":
                r = requests.post(srv.url + "/api/traces?name=" + SAMPLE.name,
                                  data=SAMPLE.read_bytes(), headers=bearer(WRITE_TOKEN),
                                  timeout=300)
                assert r.status_code == 201, r.text
                srv.ingested.append(int(r.json()["id"]))
            yield srv, app
        finally:
            srv.stop()


def test_every_route_needs_its_token(server: tuple[Served, Flask]) -> None:
    srv, app = server
    (trace_id,) = srv.ingested
    routes = rules_of(app)
    names = {r.rule for _, r in routes}
    # The enumeration is the app's own, so it holds the routes added today.
    assert NEW_DATA_ROUTES <= names
    assert OPEN - {"/assets/<path:filename>", "/_favicon.ico", "/logout",
                   "/_dash-component-suites/<string:package_name>/<path:fingerprinted_path>"
                   } <= names
    if srv.subcommand == "serve":
        assert {"/", "/<path:path>", "/_dash-layout", "/_dash-dependencies",
                "/_dash-update-component", "/api/traces/<int:trace_id>/export"} <= names
    before = srv.get("/api/traces").json()
    bad = [line for method, rule in routes for line in check_route(srv, method, rule, trace_id)]
    assert bad == []
    assert srv.get("/api/traces").json() == before  # the writes changed nothing
    assert len(routes) >= (60 if srv.subcommand == "serve" else 50)


def test_data_flows_with_the_read_token(server: tuple[Served, Flask]) -> None:
    """Past the check the answers are the real ones: the SQL page's rows, a pprof
    file, a Perfetto trace, a table; a wrong token gets none of it."""
    srv, _ = server
    (tid,) = srv.ingested
    read = bearer(READ_TOKEN)
    r = srv.get("/api/sql", params={"sql": "SELECT count(*) AS n FROM traces"}, headers=read)
    assert r.status_code == 200 and r.json()["rows"] == [[1]], r.text
    pb = srv.get(f"/api/traces/{tid}/pprof", params={"type": "syscall"}, headers=read)
    assert pb.status_code == 200 and pb.content[:2] == b"\x1f\x8b", pb.text[:200]
    perfetto = srv.get(f"/api/traces/{tid}/perfetto", headers=read)
    assert perfetto.status_code == 200 and len(perfetto.content) > 1000
    csv = srv.get(f"/api/traces/{tid}/tables/goroutines.csv", headers=read)
    assert csv.status_code == 200 and csv.text.startswith("goid,")
    for path in ("/api/sql?sql=SELECT%201", f"/api/traces/{tid}/pprof?type=syscall",
                 f"/api/traces/{tid}/perfetto", f"/api/traces/{tid}/tables/goroutines.csv"):
        assert srv.get(path, headers=bearer("nope")).status_code == 401
        assert srv.get(path, headers={"Authorization": READ_TOKEN}).status_code == 401
    # An unknown API path says nothing without a token, and is a JSON 404 with one.
    assert srv.get("/api/no-such-thing", headers={"Authorization": ""}).status_code == 401
    nf = srv.get("/api/no-such-thing", headers=read)
    assert nf.status_code == 404 and "error" in nf.json()
    # /healthz stays open and holds no data.
    assert requests.get(srv.url + "/healthz", timeout=60).json() == {"status": "ok"}


def test_the_tokens_do_their_writes(server: tuple[Served, Flask]) -> None:
    """A real upload and delete: refused with the read token, done with the write one."""
    srv, _ = server
    blob = (REPO / "samples" / "go1.27-timers.trace").read_bytes()
    r = srv.post("/api/traces?name=t", data=blob, headers=bearer(READ_TOKEN))
    assert r.status_code == 403 and r.json() == {"error": auth.READ_ONLY}
    r = srv.post("/api/traces?name=t", data=blob, headers=bearer(WRITE_TOKEN))
    assert r.status_code == 201, r.text
    tid = r.json()["id"]
    assert srv.get(f"/api/traces/{tid}").json()["name"] == "t"
    gone = requests.delete(f"{srv.url}/api/traces/{tid}", headers=bearer(READ_TOKEN), timeout=60)
    assert gone.status_code == 403 and srv.get(f"/api/traces/{tid}").status_code == 200
    gone = requests.delete(f"{srv.url}/api/traces/{tid}", headers=bearer(WRITE_TOKEN),
                           timeout=60)
    assert gone.status_code == 200 and srv.get(f"/api/traces/{tid}").status_code == 404
