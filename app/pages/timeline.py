"""Timeline of one trace: every P, M or goroutine (grouped by start function) as
lanes on a canvas, with the GC/STW/sweep/assist lanes pinned on top.

The page is a shell: ``static/timeline_canvas.js`` draws the lanes from
cached tiles of the level of detail (``/api/traces/<id>/timeline/lanes`` and
``/tiles``, :mod:`ingest.views.timeline_tiles`) and ``static/timeline_ui.js``
runs the controls, the details panel and the URL. The layout gives them the
trace, the mode and the window as data attributes of ``#timeline-root``.

Deep links: ``/traces/<id>/timeline?mode=p|m|g&t1=<ns>&t2=<ns>[&g=<goid>][&m=<m>][&p=<p>]
[&group=<start function>][&offset=<lane>][&pin=<lane>,...]`` (t1/t2 absolute trace ns); the page
keeps its URL on the visible window as the view moves.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from dash import Dash, dcc, html

from app.components_export import perfetto_button
from app.context import ui_context
from app.figures.timeline import COLORS, GOROUTINE_COLORS
from app.pages._analysis import flame_href
from app.router import PageError
from ingest.derive.frames import TraceNotFound
from ingest.store.traces import get_trace
from ingest.views.offcpu import recording as offcpu_recording
from ingest.views.timeline import BadRequest, parse_params
from ingest.views.timeline_tiles import lanes_page

ROUTES = ("/traces/<int:trace_id>/timeline",)
TITLE = "Timeline"

#: Query keys of a view, kept in deep links.
KEYS = ("mode", "t1", "t2", "offset", "group", "g", "m", "p")
MODES = (("p", "by P (procs)"), ("m", "by M (threads)"), ("g", "by G (goroutines)"))


def _query(params: dict[str, Any]) -> dict[str, str]:
    return {k: str(params[k]) for k in KEYS if params.get(k) not in (None, "")}


def _mode(query: dict[str, str]) -> str:
    """The mode of a link: as given, else G when it names a goroutine."""
    if query.get("mode"):
        return query["mode"].lower()
    return "g" if query.get("g") else "p"


def _pins(raw: str) -> str:
    """The ``pin`` parameter as lane indexes (``0,1,9``; ``none``: none pinned);
    anything else is dropped."""
    return ",".join(p for p in raw.split(",") if p.strip().isdigit())


def _attrs(d: dict[str, Any]) -> dict[str, Any]:
    """data-* and aria-* attributes (Dash's stubs know only the named props)."""
    return d


def layout(query: dict[str, str], trace_id: int, **_: Any) -> Any:
    ctx = ui_context()
    trace = get_trace(ctx.engine, trace_id)
    if trace is None:
        raise PageError(f"There is no trace {trace_id}.")
    query = {**query, "mode": _mode(query)}
    try:
        params = parse_params(query)
        frames = ctx.frames.get(trace_id)
        # Checks the group and the focus, and warms the lane list the canvas asks for.
        lanes_page(ctx.engine, frames, {**query, "limit": "1"})
    except BadRequest as e:
        raise PageError(str(e)) from None
    except TraceNotFound:
        raise PageError(f"There is no trace {trace_id}.") from None
    focus = {"p": params.p, "m": params.m, "g": params.g}[params.mode]
    t1 = params.t1 if params.t1 is not None else frames.first_ts
    t2 = params.t2 if params.t2 is not None else frames.last_ts
    store = {"mode": params.mode, "t1": t1, "t2": t2, "group": params.group,
             params.mode: focus}
    api = f"/api/traces/{trace_id}/timeline"
    data: dict[str, Any] = {
        "data-trace": str(trace_id), "data-mode": params.mode,
        "data-t1": str(t1), "data-t2": str(t2),
        "data-first": str(frames.first_ts), "data-last": str(frames.last_ts),
        "data-group": params.group or "", "data-focus": "" if focus is None else str(focus),
        "data-offset": str(params.offset or 0),
        # A scheduling recording (sched.parquet): the M lanes' off-CPU strip
        # (static/timeline_offcpu.js) asks for its columns.
        "data-offcpu": "1" if offcpu_recording(ctx.engine, trace_id) else "0",
        # Pinned lanes (indexes in the lane list), when the link names them.
        **({"data-pin": _pins(query["pin"])} if "pin" in query else {}),
        "data-colors": json.dumps({"categories": COLORS, "goroutines": GOROUTINE_COLORS}),
        # The flame page of the visible window: T1 and T2 are replaced as the view moves.
        "data-flame": flame_href(trace_id, "sync").replace("kind=sync", "kind=sync&t1=T1&t2=T2"),
    }
    return html.Div([
        html.H2(["Timeline · ", html.Span(trace["name"], className="mono")]),
        html.Div([
            html.Div([html.Button(label, className="secondary timeline-mode-button",
                                  **_attrs({"data-mode": m, "aria-pressed": str(m == params.mode)
                                     .lower()}))
                      for m, label in MODES], className="timeline-modes", role="group",
                     **_attrs({"aria-label": "Lanes"})),
            html.Button("Whole trace", id="timeline-whole", className="secondary",
                        title="Whole trace (Esc, double-click)"),
            html.Select(id="timeline-group", className="timeline-group",
                        hidden=params.mode != "g", **_attrs({"aria-label": "Goroutine group"})),
            # Uncontrolled (no value prop): timeline_ui.js fills it and reads it on Enter.
            dcc.Input(id="timeline-goid", type="text", inputMode="numeric", debounce=True,
                       placeholder="goroutine id ⏎", className="timeline-goid"),
            html.Button("?", id="timeline-help-button", className="secondary",
                        title="Keys (?)", **_attrs({"aria-label": "Keyboard help"})),
            perfetto_button(trace_id, "timeline-perfetto"),
        ], className="controls timeline-toolbar"),
        html.Div(id="timeline-root", children=[
            html.Div("Loading lanes…", className="timeline-status muted",
                     id="timeline-status", **_attrs({"aria-live": "polite"})),
            html.Div([html.Div(className="timeline-canvas-host card timeline-card"),
                      html.Aside(html.P("Click a span for its details (a bar that merges "
                                        "many intervals: zoom into it). Keys: ?",
                                        className="muted"),
                                 id="timeline-details", className="card timeline-details",
                                 **_attrs({"aria-live": "polite"}))],
                     className="timeline-main"),
        ], **data),
        html.P("Bar height: a bar that merges several intervals is as tall as the share of "
               "its span they cover (a 1.4% stop-the-world is a sliver, not a band); a single "
               "interval is full height. Wheel: zoom · drag: pan · W/A/S/D · Shift+drag: "
               "select an area · Esc or double-click: whole trace · ?: all keys.",
               id="timeline-cover-help", className="muted"),
        html.P(["This view: ", html.A("link", id="timeline-permalink",
                                      href=f"/traces/{trace_id}/timeline?"
                                      f"{urlencode(_query(store))}"),
                " · Data: ", html.A(api, id="timeline-api", href=f"{api}?"
                                    f"{urlencode(_query(store))}", target="_blank"),
                " · ", html.A("Flame graphs of this window", id="timeline-flame",
                              href=flame_href(trace_id, "sync", t1, t2))],
               className="muted"),
    ])


def register(dash_app: Dash) -> None:
    """No callbacks: the canvas scripts drive the page through the JSON API."""
