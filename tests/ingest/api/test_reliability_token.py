"""With GMPSCOPE_TOKEN set, every write path refuses a request without it.

The write routes are not listed here: they are read from the Flask app's
url_map (every rule taking POST, PUT, PATCH or DELETE), so a write route added
later without the token check makes this test fail. Each one answers 401
without the token or with a wrong one, and gets past the check with it.

The one exemption is Dash's callback endpoint (``/_dash-update-component``): a
POST every page sends, so the read token (or a read login) must reach it, and no
Dash callback may write (tests/ingest/api/test_auth_routes.py checks reads). That
is checked from the source: no module of app/ names a function of ingest/ that
writes (found by following calls from the functions that open a write transaction
or insert, update or delete rows).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask
from werkzeug.routing import Rule

from app.server import create_app
from ingest.api import auth as auth_module
from ingest.config import Settings
from tests.support.consistency import row_counts

REPO = Path(__file__).resolve().parents[3]
TOKEN = "rel-s3cret-token"
WRITE = {"POST", "PUT", "PATCH", "DELETE"}
#: Dash's callback endpoint: readers need it; callbacks are checked to be read-only.
DASH_CALLBACKS = "/_dash-update-component"
#: The login form's POST: it takes the token in its body (ingest/api/auth.py).
LOGIN = "/login"
SMALL = REPO / "samples" / "go1.27-syscallblock.trace"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flask]:
    data = tmp_path_factory.mktemp("rel-token")
    a = create_app(Settings.from_env({}, data_dir=data, token=TOKEN))
    a.config["TESTING"] = True
    yield a


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def example_url(rule: Rule) -> str:
    """The rule with its arguments filled in (ids that exist nowhere)."""
    values: dict[str, object] = {}
    for arg, conv in rule._converters.items():  # noqa: SLF001  # werkzeug has no public map
        values[arg] = 999999 if type(conv).__name__ == "IntegerConverter" else (
            "0" * 32 if arg.endswith("_id") else "rel")
    built: str = rule.build(values, append_unknown=False)[1]  # type: ignore[index]
    return built


def write_rules(app: Flask) -> list[tuple[str, str]]:
    """(method, example URL) of every write rule of the app."""
    out = []
    for rule in app.url_map.iter_rules():
        for method in sorted((rule.methods or set()) & WRITE):
            out.append((method, example_url(rule)))
    return out


def unprotected(app: Flask) -> list[str]:
    """Write rules that do not answer 401 without the token (or with a wrong one)."""
    client = app.test_client()
    bad = []
    for method, url in write_rules(app):
        if url in (DASH_CALLBACKS, LOGIN):
            continue
        for headers in ({}, auth("wrong"), {"Authorization": TOKEN}):
            r = client.open(url, method=method, headers=headers, data=b"x")
            if r.status_code != 401:
                bad.append(f"{method} {url} {headers or 'no token'} -> {r.status_code}")
    return bad


def test_every_write_route_refuses_without_token(app: Flask) -> None:
    rules = write_rules(app)
    assert len(rules) >= 13 and (("POST", DASH_CALLBACKS) in rules)
    before = row_counts(app.extensions["gmpscope_ingest"].engine)
    assert unprotected(app) == []
    assert row_counts(app.extensions["gmpscope_ingest"].engine) == before


def test_every_write_route_accepts_the_token(app: Flask) -> None:
    """With the token, every write route gets past the check (its own answer:
    404 for the made-up ids, 400 for the empty bodies; never 401)."""
    client = app.test_client()
    for method, url in write_rules(app):
        if url in (DASH_CALLBACKS, LOGIN):
            continue
        r = client.open(url, method=method, headers=auth(TOKEN), data=b"x")
        assert r.status_code not in (401, 403, 405, 500), (method, url, r.status_code, r.text)


def test_writes_do_their_work_with_the_token(app: Flask) -> None:
    """The real flows: a one-shot upload, a chunked upload, a delete."""
    client = app.test_client()
    blob = SMALL.read_bytes()
    assert client.post("/api/traces?name=a", data=blob).status_code == 401
    r = client.post("/api/traces?name=a", data=blob, headers=auth(TOKEN))
    assert r.status_code == 201, r.text
    tid = r.json["id"]
    assert client.delete(f"/api/traces/{tid}").status_code == 401
    assert client.get(f"/api/traces/{tid}").status_code == 401  # reads need a token too
    assert client.get(f"/api/traces/{tid}", headers=auth(TOKEN)).status_code == 200
    r = client.post(f"/api/uploads?name=b&size={len(blob)}", headers=auth(TOKEN))
    assert r.status_code == 201, r.text
    up = r.json["upload_id"]
    assert client.put(f"/api/uploads/{up}?offset=0", data=blob).status_code == 401
    r = client.put(f"/api/uploads/{up}?offset=0", data=blob, headers=auth(TOKEN))
    assert r.status_code == 200 and r.json["received"] == len(blob)
    assert client.post(f"/api/uploads/{up}/complete").status_code == 401
    assert client.delete(f"/api/uploads/{up}").status_code == 401
    assert client.delete(f"/api/uploads/{up}", headers=auth(TOKEN)).status_code == 200
    r = client.delete(f"/api/traces/{tid}", headers=auth(TOKEN))
    assert r.status_code == 200 and r.json["deleted"] is True


def test_a_new_unguarded_write_route_is_caught(tmp_path: Path) -> None:
    """The check is not a fixed list: a route added later is guarded by the app-wide
    check on its own, and one declared open by mistake shows up as unprotected."""
    a = create_app(Settings.from_env({}, data_dir=tmp_path, token=TOKEN))

    @a.post("/api/evil/<int:trace_id>")
    def evil(trace_id: int) -> str:
        return "deleted"

    assert unprotected(a) == []
    auth_module.allow_open(a, {"evil"})
    assert unprotected(a) == [
        f"POST /api/evil/999999 {h} -> 200"
        for h in ("no token", auth("wrong"), {"Authorization": TOKEN})]


# --------------------------------------------------------------------------
# Dash callbacks are read-only


def _called(node: ast.AST) -> str | None:
    """The name a call calls (``f(...)`` or ``x.f(...)``)."""
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name):
            return node.func.id
        if isinstance(node.func, ast.Attribute):
            return node.func.attr
    return None


def _writes_directly(fn: ast.AST, sql_verbs: set[str]) -> bool:
    """Opens a write transaction, bulk-inserts, or builds INSERT/UPDATE/DELETE."""
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Name) and sub.id in ("write_tx", "insert_columns",
                                                    "insert_int_arrays"):
            return True
        if not isinstance(sub, ast.Call):
            continue
        f = sub.func
        if isinstance(f, ast.Name) and f.id in sql_verbs:  # sqlalchemy's insert()/delete()
            return True
        if isinstance(f, ast.Attribute) and f.attr == "begin":  # engine.begin()
            return True
        if (isinstance(f, ast.Attribute) and f.attr in ("insert", "update", "delete")
                and isinstance(f.value, ast.Attribute) and isinstance(f.value.value, ast.Name)
                and f.value.value.id == "models"):  # models.<table>.insert()
            return True
    return False


def ingest_writers() -> set[str]:
    """Public names of ingest/ functions that write to the database, transitively
    (through calls by name; the HTTP views in ingest/api/blueprint*.py are left out: the
    token guards them and pages do not call views)."""
    calls: dict[str, set[str]] = {}
    writers: set[str] = set()
    for path in sorted((REPO / "ingest").rglob("*.py")):
        if path.relative_to(REPO / "ingest").parts[0] == "api":
            continue
        tree = ast.parse(path.read_text())
        verbs = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                 and (n.module or "").startswith("sqlalchemy") for a in n.names
                 if a.name in ("insert", "update", "delete")}
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                calls.setdefault(node.name, set()).update(
                    c for c in map(_called, ast.walk(node)) if c)
                if _writes_directly(node, verbs):
                    writers.add(node.name)
    while True:
        more = {n for n, used in calls.items() if used & writers} - writers
        if not more:
            return {w for w in writers if not w.startswith("_")}
        writers |= more


def ingest_names_used(path: Path) -> set[str]:
    """Names a module of app/ takes from ingest: imported from ingest.* or
    reached as attributes of an imported ingest module."""
    tree = ast.parse(path.read_text())
    modules: set[str] = set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "ingest":
            for a in node.names:
                if node.module == "ingest":
                    modules.add(a.asname or a.name)  # from ingest.live import sessions as live
                else:
                    names.add(a.name)
        elif isinstance(node, ast.Import):
            modules.update(a.asname or a.name for a in node.names if a.name.startswith("ingest"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in modules:
            names.add(node.attr)
    return names


def test_dash_callbacks_cannot_write() -> None:
    writers = ingest_writers()
    # The finder finds the writers we know of, so an empty answer cannot pass.
    assert {"ingest_trace_file", "load_parquet_dir", "delete_trace", "delete_session",
            "set_state", "add_segment"} <= writers
    found = []
    for path in sorted((REPO / "app").rglob("*.py")):
        hits = ingest_names_used(path) & writers
        if path == REPO / "app" / "server.py":
            hits -= {"make_engine"}  # opens (and migrates) the database when the app is built
        if hits:
            found.append(f"{path.relative_to(REPO)}: {sorted(hits)}")
    assert found == [], "Dash code names ingest writers (the callback endpoint has no token)"
