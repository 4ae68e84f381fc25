"""Who may read and who may write: the tokens, the login form and the session cookie.

With no token configured every request is served (a server on the loopback
address, for one user). With ``GMPSCOPE_TOKEN`` (the write token) set, every
request needs a token, reads included: a trace holds stacks, file paths and log
strings, and the SQL page reaches all of it. ``GMPSCOPE_READ_TOKEN`` beside it
grants reads only; the write token grants both.

A client proves it holds a token in one of two ways:

- ``Authorization: Bearer <token>`` (API clients, collectors, scripts);
- a session cookie the ``/login`` form sets once the token is typed: signed
  (itsdangerous) with a key derived from the tokens, so that every worker and
  every restart reads it and changing a token ends every session; HttpOnly,
  SameSite=Lax, and Secure when the request came over HTTPS. A cookie carries
  its role (read or write); a cookie write is taken only from a same-origin
  request (``Sec-Fetch-Site`` or ``Origin``), so a page on another port of the
  same host cannot write with it.

The guard is one ``before_request`` on the whole Flask app, so it covers routes
added later by anyone (blueprints, Dash's own routes): every route needs a read,
every POST/PUT/PATCH/DELETE a write, except what the app declares with
:func:`allow_open` (``/healthz``, the login form, static assets without data)
and :func:`allow_read_posts` (POSTs that only read, such as Dash's callback
endpoint). Denied, a browser's page request goes to ``/login?next=...``; any
other request gets one JSON 401 (or 403: a read token asking to write).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import quote, urlsplit

from flask import Blueprint, Flask, Response, current_app, jsonify, redirect, request
from itsdangerous import BadSignature, URLSafeTimedSerializer
from markupsafe import escape

from ingest.config import Settings

Role = Literal["read", "write"]

EXTENSION = "gmpscope_auth"
COOKIE = "gmpscope_session"
#: How long a login lasts. The cookie is signed, not stored: logging out removes it
#: from the browser, and changing a token ends every session at once.
SESSION_SECONDS = 12 * 3600
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: Endpoints every app serves without a token: the health check (no data) and the form.
OPEN_ENDPOINTS = frozenset({"gmpscope_ingest.healthz", "gmpscope_auth.login",
                            "gmpscope_auth.logout"})

UNAUTHORIZED = ("this server needs a token: send 'Authorization: Bearer <token>' "
                "(GMPSCOPE_TOKEN, or GMPSCOPE_READ_TOKEN for reads) or log in at /login")
WRONG = "wrong token: send 'Authorization: Bearer <token>' with the server's token"
READ_ONLY = "this token may only read: writes need the write token (GMPSCOPE_TOKEN)"

bp = Blueprint("gmpscope_auth", __name__)


@dataclass
class AuthState:
    """The tokens and the routes' exemptions, kept on the Flask app."""

    write_token: str | None
    read_token: str | None
    open_endpoints: set[str] = field(default_factory=lambda: set(OPEN_ENDPOINTS))
    read_posts: set[str] = field(default_factory=set)

    @property
    def enabled(self) -> bool:
        return self.write_token is not None

    def serializer(self) -> URLSafeTimedSerializer:
        """Signs session cookies with a key only the holders of the tokens can derive."""
        assert self.write_token is not None
        key = hmac.new(self.write_token.encode(), b"gmpscope session v1\0"
                       + (self.read_token or "").encode(), hashlib.sha256).hexdigest()
        return URLSafeTimedSerializer(key, salt="gmpscope-session")

    def role_of_token(self, given: bytes) -> Role | None:
        """The role ``given`` (the bytes the client sent) grants, compared in constant time."""
        write = self.write_token is not None and hmac.compare_digest(
            given, self.write_token.encode("utf-8"))
        read = self.read_token is not None and hmac.compare_digest(
            given, self.read_token.encode("utf-8"))
        return "write" if write else "read" if read else None


def init_app(app: Flask, settings: Settings) -> None:
    """Guard every route of ``app`` with ``settings``' tokens and mount /login, /logout."""
    app.extensions[EXTENSION] = AuthState(settings.token, settings.read_token)
    app.register_blueprint(bp)
    app.before_request(_guard)


def allow_open(app: Flask, endpoints: Iterable[str]) -> None:
    """Serve ``endpoints`` without a token: static assets that carry no data."""
    _auth(app).open_endpoints.update(endpoints)


def allow_read_posts(app: Flask, endpoints: Iterable[str]) -> None:
    """Take POSTs to ``endpoints`` as reads (they compute answers, they store nothing)."""
    _auth(app).read_posts.update(endpoints)


def _auth(app: Flask) -> AuthState:
    state: AuthState = app.extensions[EXTENSION]
    return state


# --------------------------------------------------------------------------
# the guard


def needed_role(state: AuthState, endpoint: str | None, method: str) -> Role | None:
    """What a request needs: None (open), read or write. An unknown route needs a
    read, so that probing paths says nothing without a token."""
    if endpoint in state.open_endpoints:
        return None
    if method in WRITE_METHODS and endpoint not in state.read_posts:
        return "write"
    return "read"


def _bearer() -> bytes | None:
    """The token of an ``Authorization`` header, as the bytes the client sent
    (WSGI hands headers over latin-1 decoded: a UTF-8 token stays comparable),
    b"" for a header of another scheme, None when there is none."""
    header = request.headers.get("Authorization")
    if header is None:
        return None
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer":
        return b""
    return given.strip().encode("latin-1", "replace")


def same_origin() -> bool:
    """Whether the browser says this request comes from a page of this server."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        return site == "same-origin"
    origin = request.headers.get("Origin")
    return origin is not None and origin.rstrip("/") == request.host_url.rstrip("/")


def session_role(state: AuthState) -> Role | None:
    """The role of this request's session cookie, if it holds a valid one."""
    raw = request.cookies.get(COOKIE)
    if not raw or not state.enabled:
        return None
    try:
        data = state.serializer().loads(raw, max_age=SESSION_SECONDS)
    except BadSignature:  # tampered, expired, or signed before a token changed
        return None
    role = data.get("role") if isinstance(data, dict) else None
    if role == "write":
        return "write"
    if role == "read" and state.read_token is not None:
        return "read"
    return None


def _wants_page() -> bool:
    """A browser asking for a page (sent to the login form), not for data."""
    return (request.method in ("GET", "HEAD")
            and not request.path.startswith(("/api/", "/_"))
            and request.path != "/healthz")


def _json_error(status: int, message: str) -> Response:
    resp = jsonify({"error": message})
    resp.status_code = status
    if status == 401:
        resp.headers["WWW-Authenticate"] = 'Bearer realm="gmpscope"'
    return resp


def _guard() -> Response | None:
    state = _auth(current_app)
    if not state.enabled:
        return None
    endpoint = request.url_rule.endpoint if request.url_rule is not None else None
    need = needed_role(state, endpoint, request.method)
    if need is None:
        return None
    given = _bearer()
    if given is not None:
        role = state.role_of_token(given)
        if role is None:
            return _json_error(401, WRONG)
    else:
        role = session_role(state)
        if role == "write" and need == "write" and not same_origin():
            return _json_error(403, "a write with the session cookie must come from this "
                               "server's own pages; send 'Authorization: Bearer <token>'")
    if role is None:
        if _wants_page():
            return _redirect_to_login()
        return _json_error(401, UNAUTHORIZED)
    if need == "write" and role != "write":
        return _json_error(403, READ_ONLY)
    return None


def _redirect_to_login() -> Response:
    here = request.full_path if request.query_string else request.path
    resp = redirect("/login?next=" + quote(here, safe="/"), code=302)
    return resp  # type: ignore[return-value]  # werkzeug's Response is Flask's base


# --------------------------------------------------------------------------
# the login form


def safe_next(value: str | None) -> str:
    """``value`` when it is a path of this server, else ``/``: the form never sends
    a browser elsewhere (``//host``, ``/\\host``, ``http://...``)."""
    if not value or not value.startswith("/") or value.startswith(("//", "/\\")):
        return "/"
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return "/"
    return value


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>gmpscope: log in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
.login {{ max-width: 26rem; margin: 4rem auto; padding: 1.5rem 2rem; border: 1px solid #d0d7de;
         border-radius: 8px; font-family: system-ui, sans-serif; }}
.login h1 {{ font-size: 1.3rem; margin-top: 0; }}
.login input[type=password] {{ width: 100%; box-sizing: border-box; padding: 0.45rem;
                              margin: 0.3rem 0 0.8rem; font-size: 1rem; }}
.login button {{ padding: 0.45rem 1.2rem; font-size: 1rem; }}
.login .error {{ color: #b3261e; }}
.login .hint {{ color: #57606a; font-size: 0.9rem; }}
</style></head>
<body><main class="login">
<h1>gmpscope</h1>
<p>This server needs a token to show its traces.</p>
{message}
<form method="post" action="/login">
<label for="token">Token</label>
<input id="token" name="token" type="password" autocomplete="current-password" autofocus required>
<input type="hidden" name="next" value="{next}">
<button type="submit" id="login-submit">Log in</button>
</form>
<p class="hint">The read token (GMPSCOPE_READ_TOKEN) shows everything; the write token
(GMPSCOPE_TOKEN) also uploads and deletes. The login lasts {hours} hours.</p>
</main></body></html>
"""


def _form(next_path: str, message: str = "", status: int = 200) -> Response:
    note = f'<p class="error" id="login-error">{escape(message)}</p>' if message else ""
    html = _PAGE.format(message=note, next=escape(next_path), hours=SESSION_SECONDS // 3600)
    resp = Response(html, status=status, mimetype="text/html")
    resp.headers["Cache-Control"] = "no-store"
    return resp


@bp.route("/login", methods=["GET", "POST"])
def login() -> Response:
    """The form (GET); the token checked, the cookie set and the browser sent on (POST)."""
    state = _auth(current_app)
    next_path = safe_next(request.values.get("next"))
    if not state.enabled:
        return redirect(next_path)  # type: ignore[return-value]
    if request.method == "GET":
        return _form(next_path)
    if request.headers.get("Sec-Fetch-Site") == "cross-site":
        return _form(next_path, "log in from this server's own form", 403)
    given = request.form.get("token", "").strip().encode("utf-8")
    role = state.role_of_token(given) if given else None
    if role is None:
        return _form(next_path, "wrong token", 401)
    resp = redirect(next_path, code=303)
    resp.set_cookie(COOKIE, state.serializer().dumps({"role": role}),
                    max_age=SESSION_SECONDS, httponly=True, samesite="Lax",
                    secure=request.is_secure, path="/")
    return resp  # type: ignore[return-value]


@bp.get("/logout")
def logout() -> Response:
    """Forget this browser's session and show the form again."""
    resp = redirect("/login", code=303)
    resp.delete_cookie(COOKIE, path="/", httponly=True, samesite="Lax")
    return resp  # type: ignore[return-value]
