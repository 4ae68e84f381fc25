"""The pages of the explorer, one module each.

A page module defines:

- ``ROUTES``: werkzeug rule strings it answers (e.g. ``"/traces/<int:trace_id>/timeline"``);
- ``TITLE``: its name in the navigation;
- ``layout(trace_id=..., query=...)``: the page's Dash component tree for a URL
  (``query`` is the parsed query string, a dict of str to str); it reads data
  through the query layer (:mod:`ingest.store.traces`, :mod:`ingest.views.intervals`
  and friends) via :func:`app.context.ui_context`;
- ``register(dash_app)``: registers its callbacks on that Dash app (ids are
  prefixed with the module name so pages never collide).

The router (:mod:`app.router`) imports the modules listed here, in this order.
"""

PAGE_MODULES = (
    "library",
    "overview",
    "timeline",
    "states",
    "goroutines",
    "goroutine",
    "syscalls",
    "latency",
    "flame",
    "annotations",
    "compare",
    "live",
    "poller",
    "sql",
)

#: Per-trace pages, in the order of the trace navigation bar: (module, label, path suffix).
TRACE_NAV = (
    ("overview", "Overview", "overview"),
    ("timeline", "Timeline", "timeline"),
    ("states", "State graphs", "states"),
    ("goroutines", "Goroutines", "goroutines"),
    ("syscalls", "Syscalls & netpoller", "syscalls"),
    ("latency", "Scheduler latency", "latency"),
    ("flame", "Flame graphs", "flame"),
    ("annotations", "Tasks, regions & logs", "annotations"),
    ("poller", "OS poller", "poller"),
)
