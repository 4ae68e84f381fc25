"""The login form's session cookie, through a real ``gmpscope serve`` (HTTP, no browser:
the Chromium flow is tests/app/browser/test_login.py).

The cookie's flags, its role (a read login reads, cannot write; a write login writes
only from this server's own pages), where the form sends the browser (never off the
server), a tampered or foreign cookie, logging out, and a server without tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from ingest.api import auth
from tests.support.server import Served

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "samples" / "go1.27-syscallblock.trace"
WRITE_TOKEN = "w-cookie-5ecret"
READ_TOKEN = "r-cookie-5ecret"


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("session") / "data", [SAMPLE], token=WRITE_TOKEN,
                read_token=READ_TOKEN) as s:
        yield s


def login(srv: Served, token: str, next_path: str = "/") -> tuple[requests.Session,
                                                                     requests.Response]:
    s = requests.Session()
    r = s.post(srv.url + "/login", data={"token": token, "next": next_path},
               allow_redirects=False, timeout=60)
    return s, r


def test_pages_send_the_browser_to_the_form_and_back(srv: Served) -> None:
    (tid,) = srv.ingested
    page = f"/traces/{tid}/states?view=thread"
    r = requests.get(srv.url + page, allow_redirects=False, timeout=60)
    assert r.status_code == 302
    assert r.headers["Location"] == "/login?next=/traces/" + f"{tid}/states%3Fview%3Dthread"
    form = requests.get(srv.url + r.headers["Location"], timeout=60)
    assert form.status_code == 200 and 'name="token"' in form.text
    assert f'value="{page}"' in form.text.replace("&amp;", "&")  # where it goes after

    s, r = login(srv, READ_TOKEN, page)
    assert r.status_code == 303 and r.headers["Location"] == page
    cookie = r.headers["Set-Cookie"]
    assert cookie.startswith(f"{auth.COOKIE}=")
    flags = {f.strip().split("=")[0].lower() for f in cookie.split(";")[1:]}
    assert {"httponly", "samesite", "path", "max-age", "expires"} <= flags
    assert "SameSite=Lax" in cookie and "Path=/" in cookie
    assert f"Max-Age={auth.SESSION_SECONDS}" in cookie
    assert "secure" not in flags  # plain HTTP here: a Secure cookie would never come back
    got = s.get(srv.url + page, timeout=60)
    assert got.status_code == 200 and "react-entry-point" in got.text
    assert s.get(srv.url + f"/api/traces/{tid}", timeout=60).json()["id"] == tid


def test_a_wrong_token_sets_nothing(srv: Served) -> None:
    s, r = login(srv, "not-the-token")
    assert r.status_code == 401 and "wrong token" in r.text and "Set-Cookie" not in r.headers
    assert s.get(srv.url + "/api/traces", timeout=60).status_code == 401
    s, r = login(srv, "")
    assert r.status_code == 401 and "Set-Cookie" not in r.headers


@pytest.mark.parametrize("target", ["//evil.example/x", "/\\evil.example", "http://evil.example/",
                                    "javascript:alert(1)", "", "traces"])
def test_the_form_never_sends_the_browser_away(srv: Served, target: str) -> None:
    _, r = login(srv, READ_TOKEN, target)
    assert r.status_code == 303 and r.headers["Location"] == "/"


def test_read_login_reads_and_cannot_write(srv: Served) -> None:
    (tid,) = srv.ingested
    s, _ = login(srv, READ_TOKEN)
    assert s.get(srv.url + "/api/sql?sql=SELECT%20id%20FROM%20traces", timeout=60
                 ).json()["rows"] == [[tid]]
    same = {"Sec-Fetch-Site": "same-origin"}
    r = s.delete(srv.url + f"/api/traces/{tid}", headers=same, timeout=60)
    assert r.status_code == 403 and r.json() == {"error": auth.READ_ONLY}
    # The write token in the header still writes (the library's Token field).
    r = s.delete(srv.url + "/api/traces/999999", timeout=60,
                 headers={**same, "Authorization": f"Bearer {WRITE_TOKEN}"})
    assert r.status_code == 404
    assert s.get(srv.url + f"/api/traces/{tid}", timeout=60).status_code == 200


def test_write_login_writes_only_from_its_own_pages(srv: Served) -> None:
    s, _ = login(srv, WRITE_TOKEN)
    url = srv.url + "/api/traces/999999"
    for headers in ({"Sec-Fetch-Site": "same-origin"}, {"Origin": srv.url}):
        assert s.delete(url, headers=headers, timeout=60).status_code == 404  # past the guard
    for headers in ({"Sec-Fetch-Site": "same-site"}, {"Sec-Fetch-Site": "cross-site"},
                    {"Origin": "http://127.0.0.1:1"}, {}):
        r = s.delete(url, headers=headers, timeout=60)
        assert r.status_code == 403 and "own pages" in r.json()["error"], headers
    # Reads need no such proof.
    assert s.get(srv.url + "/api/traces", headers={"Sec-Fetch-Site": "cross-site"},
                 timeout=60).status_code == 200


def test_tampered_cookies_are_refused(srv: Served) -> None:
    s, _ = login(srv, READ_TOKEN)
    good = s.cookies[auth.COOKIE]
    payload, _, sig = good.partition(".")
    # {"role":"write"} with the read login's signature.
    forged = "eyJyb2xlIjoid3JpdGUifQ" + good[len(payload):]
    for value in (forged, good[:-2] + ("AA" if not good.endswith("AA") else "BB"), "x", ""):
        r = requests.get(srv.url + "/api/traces", cookies={auth.COOKIE: value}, timeout=60)
        assert r.status_code == 401, value
    assert sig  # a signed value: payload, time and signature


def test_logout_forgets_the_session(srv: Served) -> None:
    s, _ = login(srv, READ_TOKEN)
    assert s.get(srv.url + "/api/traces", timeout=60).status_code == 200
    r = s.get(srv.url + "/logout", allow_redirects=False, timeout=60)
    assert r.status_code == 303 and r.headers["Location"] == "/login"
    assert "Max-Age=0" in r.headers["Set-Cookie"]
    assert s.get(srv.url + "/api/traces", timeout=60).status_code == 401


def test_another_servers_cookie_is_refused(srv: Served, tmp_path: Path) -> None:
    """A cookie is signed with a key derived from the tokens: another server's (other
    tokens), or this one's after a token changed, is worth nothing."""
    with Served(tmp_path / "other", token="another-token") as other:
        s, r = login(other, "another-token")
        assert r.status_code == 303
        foreign = s.cookies[auth.COOKIE]
    r = requests.get(srv.url + "/api/traces", cookies={auth.COOKIE: foreign}, timeout=60)
    assert r.status_code == 401


def test_without_tokens_the_form_steps_aside(tmp_path: Path) -> None:
    with Served(tmp_path / "open") as s:
        r = requests.get(s.url + "/login?next=/sql", allow_redirects=False, timeout=60)
        assert r.status_code == 302 and r.headers["Location"] == "/sql"
        assert requests.get(s.url + "/api/traces", timeout=60).status_code == 200
        page = requests.get(s.url + "/", timeout=60).text
        assert "react-entry-point" in page
