"""The UI server: one Flask app carrying the ingest API and the Dash explorer.

``create_app(settings)`` does all the work when called (engine, migration,
page import, callbacks) and nothing happens at import, so a WSGI server can
import this module in its master and build one app per worker.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import dash
from dash.resources import Resources
from flask import Flask, Response, request

from app import export_api
from app.context import EXTENSION, UIContext
from app.router import load_router, register
from app.shell import shell
from ingest.api import auth
from ingest.api import blueprint as api
from ingest.api import samples as samples_api
from ingest.config import Settings
from ingest.store.db import make_engine

#: Dash's on-demand chunks that every page load fetches at once: the graph
#: component, which nearly every page draws. With ``eager_loading`` alone Dash
#: would also load and run MathJax, markdown, highlighting, the date picker and
#: the data table on every page (3 MB of JavaScript the timeline never uses);
#: those now load when a page first shows such a component. Plotly.js itself
#: is not Dash's full bundle (4.8 MB, ~1.1 s to evaluate in Chromium here) but
#: the basic partial bundle in static/vendor/, which the graph finds as
#: ``window.Plotly`` (static/vendor/README.md).
EAGER_CHUNKS = ("async-graph.js",)

#: Dash's routes that serve code and the assets folder (static/: scripts, styles,
#: vendored libraries), no trace data: open without a token, so the login form's
#: redirect target loads at once. Every other Dash route (the layout, the callbacks'
#: list and answers, the pages) needs a read.
DASH_OPEN_ENDPOINTS = (
    "/_dash-component-suites/<string:package_name>/<path:fingerprinted_path>",
    "_dash_assets.static",
    "/_favicon.ico",
)
#: Dash's callback endpoint is a POST that only reads (no callback writes:
#: tests/ingest/api/test_reliability_token.py checks app/ for it).
DASH_READ_POSTS = ("/_dash-update-component",)


#: Dash's first dependency is Babel's polyfill (core-js 2 and regenerator), for
#: browsers older than any Dash 4 supports: in current ones core-js still wraps
#: built-ins it judges non-conforming (String.prototype.trim among them), and
#: plotly.js then runs through those wrappers. Left out; what Dash's bundles do
#: need of it, the global ``regeneratorRuntime`` their async functions were
#: compiled against, is static/vendor/regenerator-runtime.js (an asset, so it
#: loads before them). Chromium here, 8 alternating pairs: the syscalls,
#: overview and goroutines pages painted in 0.96, 0.95 and 0.92 of the time.
POLYFILL = "polyfill@"


def without_polyfill(s: dict[str, Any]) -> dict[str, Any]:
    """A Dash script resource without :data:`POLYFILL` among its paths."""
    paths = s.get("relative_package_path")
    if not isinstance(paths, list) or not any(POLYFILL in p for p in paths):
        return s
    keep = [i for i, p in enumerate(paths) if POLYFILL not in p]
    out = {**s, "relative_package_path": [paths[i] for i in keep]}
    urls = s.get("external_url")
    if isinstance(urls, list) and len(urls) == len(paths):
        out["external_url"] = [urls[i] for i in keep]
    return out


class EagerGraphOnly(Resources):
    """Dash's script list with only :data:`EAGER_CHUNKS` loaded eagerly, and
    without :data:`POLYFILL`."""

    def _filter_resources(self, all_resources: list[Any],
                          dev_bundles: bool = False) -> list[dict[str, Any]]:
        def lazy(s: dict[str, Any]) -> dict[str, Any]:
            path = str(s.get("relative_package_path", ""))
            if "async" in s and not path.endswith(EAGER_CHUNKS):
                return {**s, "async": "lazy"}
            return s
        resources: list[Any] = [lazy(without_polyfill(s)) for s in all_resources]
        filtered: list[dict[str, Any]] = super()._filter_resources(resources, dev_bundles)
        return filtered


def assets_folder() -> Path:
    """The browser assets: the root folder static/, installed as ``gmpscope_static``."""
    spec = importlib.util.find_spec("gmpscope_static")
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        raise RuntimeError("gmpscope_static (the static/ folder) is not installed; "
                           "reinstall gmpscope (pip install -e .)")
    return Path(locations[0])


def _api_paths_are_not_pages() -> Response | None:
    """An unknown ``/api/...`` path is a JSON 404, as it is from ``gmpscope
    ingest-server``: Dash's catch-all page route (``/<path:path>``) would
    otherwise answer it with the explorer's HTML and 200."""
    rule = request.url_rule
    if request.path.startswith("/api/") and rule is not None and rule.rule.startswith("/<"):
        return api.error(404, f"no such API endpoint: {request.path}")
    return None


def create_app(settings: Settings | None = None) -> Flask:
    """A Flask app serving the explorer at ``/`` and the ingest API under ``/api``."""
    if settings is None:
        settings = Settings.from_env()
    server = Flask("gmpscope.app")
    server.json.sort_keys = False  # type: ignore[attr-defined]
    engine = make_engine(settings.db_url, busy_timeout_ms=settings.busy_timeout_ms)
    api.init_app(server, settings, engine)
    # One frame cache per app, shared by the pages and the JSON API.
    server.extensions[EXTENSION] = UIContext(
        settings=settings, engine=engine, frames=api.ingest_state(server).frames)
    # The figure downloads need the app's figures (Plotly): mounted here, not by
    # the ingest API, so that ``gmpscope ingest-server`` never loads them.
    export_api.init_app(server)
    # The samples' lines are the library page's (ingest/api/samples.py): the explorer's.
    server.register_blueprint(samples_api.bp)
    dash_app = dash.Dash(
        "gmpscope",
        server=server,  # type: ignore[arg-type]  # Dash accepts a Flask app here
        url_base_pathname="/",
        assets_folder=str(assets_folder()),
        title="gmpscope",
        update_title=None,  # type: ignore[arg-type]  # None: keep the title while updating
        suppress_callback_exceptions=True,
        serve_locally=True,
        # Load plotly.js with Dash's own bundles instead of after the first
        # graph is rendered: one round of requests less before a figure shows
        # (timeline page open in Chromium: 3.5-5.8 s -> 2.4-3.5 s here).
        eager_loading=True,
    )
    scripts = EagerGraphOnly("_js_dist", dash_app.scripts.config)
    scripts._resources = dash_app.scripts._resources._resources  # the assets found so far
    dash_app.scripts._resources = scripts
    dash_app.layout = shell(logout=settings.token is not None)
    register(dash_app, load_router())
    server.extensions["gmpscope_dash"] = dash_app
    server.before_request(_api_paths_are_not_pages)
    auth.allow_open(server, DASH_OPEN_ENDPOINTS)
    auth.allow_read_posts(server, DASH_READ_POSTS)
    # Dash registers its JavaScript bundles when it first renders the index
    # page; with several worker processes the bundle requests can reach a
    # worker that never rendered it ("not a registered library"). Render it
    # once here, in every worker.
    with server.test_request_context("/"):
        dash_app._setup_server()  # type: ignore[no-untyped-call]  # Dash's first-request setup
        dash_app.index()  # type: ignore[no-untyped-call]
    return server
