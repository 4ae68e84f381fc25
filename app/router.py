"""URL routing for the single-page Dash app: a werkzeug rule map over the page modules.

The shell (:mod:`app.shell`) holds a ``dcc.Location``; one callback maps its
path and query string to a page's ``layout(...)``. Unknown paths and missing
traces get a clear message, never a traceback.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from types import ModuleType
from typing import Any
from urllib.parse import parse_qsl

from dash import Dash, Input, Output, html
from werkzeug.exceptions import MethodNotAllowed, NotFound
from werkzeug.routing import Map, Rule

from app.components import error_box, trace_nav
from app.pages import PAGE_MODULES

log = logging.getLogger("gmpscope.app")


class PageError(Exception):
    """A page cannot be shown (no such trace, bad parameter): shown to the user as is."""


@dataclass
class Router:
    """The page modules and the rule map that picks one for a path."""

    modules: dict[str, ModuleType]
    rules: Map

    def match(self, path: str) -> tuple[str, dict[str, Any]] | None:
        try:
            endpoint, args = self.rules.bind("localhost").match(path or "/")
        except (NotFound, MethodNotAllowed):
            return None
        return str(endpoint), dict(args)

    def render(self, path: str, search: str) -> Any:
        found = self.match(path)
        if found is None:
            return error_box(f"No page at {path}.", home=True)
        name, args = found
        query = dict(parse_qsl((search or "").lstrip("?")))
        module = self.modules[name]
        try:
            if "trace_id" in args and not getattr(module, "OS_RECORDING", False):
                _refuse_os_recording(int(args["trace_id"]))
            body = module.layout(query=query, **args)
        except PageError as e:
            body = error_box(str(e), home=True)
        except LookupError as e:
            body = error_box(f"Not found: {e}", home=True)
        if "trace_id" in args:
            return html.Div([trace_nav(args["trace_id"], name), body])
        return body


def _refuse_os_recording(trace_id: int) -> None:
    """PageError on pages that need Go data when the trace is an OS recording alone."""
    from app.context import ui_context
    from ingest.load.poller import is_os_recording

    if is_os_recording(ui_context().engine, trace_id):
        raise PageError(f"Trace {trace_id} is an OS recording without a Go trace: this page "
                        f"needs Go trace data. See its OS poller page: "
                        f"/traces/{trace_id}/poller")


def load_router() -> Router:
    """Import every page module and build the rule map."""
    modules = {name: importlib.import_module(f"app.pages.{name}") for name in PAGE_MODULES}
    rules = Map([Rule(r, endpoint=name) for name, m in modules.items() for r in m.ROUTES],
                strict_slashes=False)
    return Router(modules, rules)


def register(dash_app: Dash, router: Router) -> None:
    """The routing callback and every page's callbacks."""

    @dash_app.callback(Output("page-content", "children"),
                       Input("url", "pathname"), Input("url", "search"))
    def _route(pathname: str | None, search: str | None) -> Any:
        return router.render(pathname or "/", search or "")

    for module in router.modules.values():
        module.register(dash_app)
