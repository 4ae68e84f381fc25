"""One goroutine: its states over time (a small Gantt), time breakdown,
creation stack and parent, and its transitions with their stacks."""

from __future__ import annotations

from typing import Any

from dash import Dash, dcc, html

from app.components import fmt_count, fmt_ns, stat_card
from app.context import ui_context
from app.figures.goroutines import breakdown_figure, gantt_figure
from app.figures.offcpu import KIND_LABELS, goroutine_offcpu_figure
from app.pages._analysis import (
    api_link,
    data_table,
    goroutine_href,
    graph_cfg,
    group_href,
    link,
    md_link,
    query_int,
    rel,
    stack_list,
    stack_summary,
    stack_text,
    timeline_href,
)
from app.router import PageError
from ingest.views.goroutine import MAX_CHILDREN, goroutine_detail
from ingest.views.goroutines import CATEGORIES, CATEGORY_LABELS

ROUTES = ("/traces/<int:trace_id>/goroutines/<int:goid>",)
TITLE = "Goroutine"
PAGE_SIZE = 100
#: Gantt segments drawn at most (the longest; the JSON API returns up to 20,000).
PAGE_SEGMENTS = 1000
CHILDREN_SHOWN = 40


def _stack_label(d: dict[str, Any], sid: int) -> str:
    if sid <= 0:
        return "–"
    return f"{sid}: {stack_summary(d['stacks'].get(str(sid), []), f'stack {sid}')}"


def _transitions(trace_id: int, d: dict[str, Any], origin: int) -> Any:
    """The page of transitions as one table; each row's start links to the
    timeline around it, its stack is named (listed in full under the table)."""
    rows = []
    for r in d["transitions"]:
        href = timeline_href(trace_id, "g", r["start_ts"], r["end_ts"], g=d["goid"])
        rows.append({
            "index": fmt_count(r["index"]), "transition": f"{r['from_state']} → {r['state']}",
            "reason": r["reason"] or "",
            "category": CATEGORY_LABELS.get(r["category"] or "", "(ended)"),
            "start": md_link(rel(r["start_ts"], origin), href),
            "duration": fmt_ns(r["duration_ns"]), "m": str(r["m"]), "p": str(r["p"]),
            "stack": _stack_label(d, r["stack_id"]),
        })
    return data_table("goroutine-transitions", [
        ("index", "#"), ("transition", "transition"), ("reason", "reason"),
        ("category", "category"), ("start", "start"), ("duration", "duration"), ("m", "M"),
        ("p", "P"), ("stack", "stack")], rows, num={"index", "duration", "m", "p"},
        markdown={"start"})


def _pager(trace_id: int, d: dict[str, Any]) -> html.Div:
    n, off, lim = d["intervals_total"], d["offset"], d["limit"] or PAGE_SIZE
    base = goroutine_href(trace_id, d["goid"])
    parts: list[Any] = [f"Transitions {off + 1 if n else 0}–{min(n, off + lim)} of {n}. "]
    if off > 0:
        parts += [link("previous", f"{base}?offset={max(0, off - lim)}"), " "]
    if off + lim < n:
        parts += [link("next", f"{base}?offset={off + lim}")]
    return html.Div(parts, className="muted")


#: Off-CPU stretches listed in the table (the figure draws all the view returns).
OFFCPU_ROWS = 20


def _offcpu(trace_id: int, goid: int, off: dict[str, Any] | None, origin: int) -> list[Any]:
    """"Running while its thread was off-CPU": with a scheduling recording only."""
    if off is None:
        return []
    cards = [stat_card("Running (recorded)", fmt_ns(off["running_ns"])),
             stat_card("thread off-CPU", fmt_ns(off["offcpu_ns"]), f"{100 * off['share']:.1f}%"),
             stat_card("waiting for a CPU", fmt_ns(off["waiting_ns"])),
             stat_card("asleep", fmt_ns(off["asleep_ns"]))]
    body: list[Any] = [
        html.H3("Running while its thread was off-CPU"),
        html.P("Time the Go trace shows this goroutine Running while the kernel had its "
               "thread (M) off the CPU: runnable and waiting for a CPU (a CPU quota below "
               "GOMAXPROCS, other programs on the same CPUs) or asleep. From the run's "
               "scheduling recording" + (" (partial)" if off["partial"] else "") + ".",
               className="muted"),
        html.Div(cards, className="stats", id="goroutine-offcpu-stats")]
    if not off["stretches"]:
        body.append(html.P("None: its thread was on a CPU whenever it ran.", className="muted",
                           id="goroutine-offcpu-none"))
    else:
        body.append(dcc.Graph(id="goroutine-offcpu", figure=goroutine_offcpu_figure(off, origin),
                              config=graph_cfg(f"trace{trace_id}-g{goid}-offcpu")))
        rows = [{"start": md_link(rel(r["start_ts"], origin), timeline_href(
                    trace_id, "m", r["start_ts"], r["end_ts"], m=r["m"])),
                 "duration": fmt_ns(r["duration_ns"]), "m": str(r["m"]),
                 "state": KIND_LABELS.get(r["kind"], r["kind"]), "cpu": str(r["cpu"])}
                for r in off["stretches"][:OFFCPU_ROWS]]
        body.append(data_table("goroutine-offcpu-table", [
            ("start", "start"), ("duration", "off-CPU"), ("m", "M"), ("state", "thread"),
            ("cpu", "CPU")], rows, num={"duration", "m", "cpu"}, markdown={"start"}))
    body.append(api_link(f"/api/traces/{trace_id}/goroutines/{goid}/offcpu"))
    return [html.Div(body, className="card", id="goroutine-offcpu-card")]


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
        *_offcpu(trace_id, goid, d.get("offcpu"), origin),
        stacks,
        html.Div([html.H3("Transitions"), _pager(trace_id, d), _transitions(trace_id, d, origin),
                  stack_list(d["stacks"], [r["stack_id"] for r in d["transitions"]],
                             "goroutine-stack"),
                  api_link(f"/api/traces/{trace_id}/goroutines/{goid}?offset={d['offset']}")],
                 className="card"),
    ], id="goroutine-page")


def register(dash_app: Dash) -> None:
    return None
