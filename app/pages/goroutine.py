"""One goroutine: its states over time (a small Gantt), time breakdown,
creation stack and parent, and its transitions with their stacks."""

from __future__ import annotations

from typing import Any

from dash import Dash, dcc, html

from app.components import fmt_count, fmt_ns, stat_card
from app.context import ui_context
from app.figures.goroutines import breakdown_figure, gantt_figure
from app.pages._analysis import (
    api_link,
    goroutine_href,
    graph_cfg,
    group_href,
    link,
    query_int,
    rel,
    stack_summary,
    stack_text,
    table,
    timeline_href,
)
from app.router import PageError
from ingest.views.goroutine import MAX_CHILDREN, goroutine_detail
from ingest.views.goroutines import CATEGORIES, CATEGORY_LABELS

ROUTES = ("/traces/<int:trace_id>/goroutines/<int:goid>",)
TITLE = "Goroutine"
PAGE_SIZE = 100
#: Gantt segments drawn at most (the longest; the JSON API returns up to 20,000).
PAGE_SEGMENTS = 4000
CHILDREN_SHOWN = 40


def _stack_cell(d: dict[str, Any], row: dict[str, Any]) -> Any:
    sid = row["stack_id"]
    if sid <= 0:
        return html.Span("–", className="muted")
    frames = d["stacks"].get(str(sid), [])
    top = stack_summary(frames, f"stack {sid}")
    return html.Details([html.Summary(top, className="mono"),
                         html.Pre(stack_text(frames), className="stack")])


def _transitions(trace_id: int, d: dict[str, Any], origin: int) -> html.Table:
    rows = []
    for r in d["transitions"]:
        rows.append([
            fmt_count(r["index"]), f"{r['from_state']} → {r['state']}", r["reason"] or "",
            CATEGORY_LABELS.get(r["category"] or "", "(ended)"),
            link(rel(r["start_ts"], origin),
                 timeline_href(trace_id, "g", r["start_ts"], r["end_ts"], g=d["goid"])),
            fmt_ns(r["duration_ns"]), str(r["m"]), str(r["p"]), _stack_cell(d, r)])
    return table(["#", "transition", "reason", "category", "start", "duration", "M", "P",
                  "stack (click)"], rows, num={0, 5, 6, 7}, id="goroutine-transitions")


def _pager(trace_id: int, d: dict[str, Any]) -> html.Div:
    n, off, lim = d["intervals_total"], d["offset"], d["limit"] or PAGE_SIZE
    base = goroutine_href(trace_id, d["goid"])
    parts: list[Any] = [f"Transitions {off + 1 if n else 0}–{min(n, off + lim)} of {n}. "]
    if off > 0:
        parts += [link("previous", f"{base}?offset={max(0, off - lim)}"), " "]
    if off + lim < n:
        parts += [link("next", f"{base}?offset={off + lim}")]
    return html.Div(parts, className="muted")


def layout(query: dict[str, str], trace_id: int = 0, goid: int = 0, **_: Any) -> Any:
    ctx = ui_context()
    frames = ctx.frames.get(trace_id)
    offset = query_int(query, "offset", 0) or 0
    if offset < 0:
        raise PageError("offset must not be negative")
    d = goroutine_detail(ctx.engine, frames, goid, offset, PAGE_SIZE, PAGE_SEGMENTS)
    origin = frames.first_ts
    fn = d["start_function"]
    tl = d["timeline"]
    head: list[Any] = [html.H2(f"Goroutine {goid}", id="goroutine-title")]
    facts: list[Any] = []
    if fn:
        facts += ["Start function: ", link(fn, group_href(trace_id, fn)), ". "]
    else:
        facts += [html.Span("Existed before the trace (no creation event). ", className="muted")]
    if d["parent_goid"] is not None and d["parent_goid"] >= 0:
        facts += ["Created by goroutine ",
                  link(str(d["parent_goid"]), goroutine_href(trace_id, d["parent_goid"])),
                  f" at {rel(d['created_ts'], origin)}. "]
    if d["ended_ts"] is not None:
        facts += [f"Ended at {rel(d['ended_ts'], origin)}. "]
    else:
        facts += [f"Still {d['final_state']} at the end of the trace. "]
    facts += [link("Show in the timeline",
                   timeline_href(trace_id, "g", tl["t1"], tl["t2"], g=goid))]
    head.append(html.P(facts, id="goroutine-facts"))
    cards = [stat_card("lifetime in trace", fmt_ns(d["lifetime_ns"])),
             stat_card("transitions", fmt_count(d["intervals_total"])),
             *[stat_card(CATEGORY_LABELS[c], fmt_ns(d["times"][c]),
                         f"{100 * d['times'][c] / d['lifetime_ns']:.1f}%"
                         if d["lifetime_ns"] else None) for c in CATEGORIES]]
    children = d["children"]
    kids: list[Any] = []
    if children:
        shown = children[:CHILDREN_SHOWN]
        more = f" and {len(children) - len(shown)} more" if len(children) > len(shown) else ""
        if len(children) >= MAX_CHILDREN:
            more = f" and more (first {MAX_CHILDREN} listed by the JSON API)"
        kids = [html.Div([f"Created {len(children)}{'+' if more else ''} goroutines: ",
                          *[x for c in shown for x in
                            (link(str(c), goroutine_href(trace_id, c)), " ")], more],
                         className="muted", id="goroutine-children")]
    stacks = html.Div([
        html.Div([html.H3("Start stack"),
                  html.Pre(stack_text(d["start_stack"]), className="stack",
                           id="goroutine-start-stack")], className="card"),
        html.Div([html.H3("Created at (parent's stack)"),
                  html.Pre(stack_text(d["created_at_stack"]), className="stack",
                           id="goroutine-created-stack")], className="card"),
    ], className="row")
    return html.Div([
        *head, html.Div(cards, className="stats", id="goroutine-stats"), *kids,
        html.Div([dcc.Graph(id="goroutine-gantt", figure=gantt_figure(d),
                            config=graph_cfg(f"trace{trace_id}-g{goid}-states")),
                  dcc.Graph(id="goroutine-breakdown",
                            figure=breakdown_figure(d["times"], "Time breakdown"),
                            config=graph_cfg(f"trace{trace_id}-g{goid}-breakdown"))],
                 className="card"),
        stacks,
        html.Div([html.H3("Transitions"), _pager(trace_id, d), _transitions(trace_id, d, origin),
                  api_link(f"/api/traces/{trace_id}/goroutines/{goid}?offset={d['offset']}")],
                 className="card"),
    ], id="goroutine-page")


def register(dash_app: Dash) -> None:
    return None
