"""Goroutines page: goroutines grouped by start function, their counts and
where their time went (execution, scheduler wait, syscalls, network, sync,
GC assist, other waits); ``?group=`` lists one group's goroutines."""

from __future__ import annotations

from typing import Any

from dash import Dash, dcc, html

from app.components import fmt_count, fmt_ns, stat_card
from app.context import ui_context
from app.figures.goroutines import breakdown_figure, groups_figure
from app.pages._analysis import (
    api_link,
    data_table,
    downloads,
    goroutine_href,
    graph_cfg,
    group_href,
    link,
    md_link,
    profiles,
    rel,
    table,
    timeline_href,
)
from app.router import PageError
from ingest.views.goroutines import CATEGORIES, CATEGORY_LABELS, MEMBER_SORTS, goroutine_groups

ROUTES = ("/traces/<int:trace_id>/goroutines",)
TITLE = "Goroutines"
#: Goroutines listed at most for one group (the JSON API's limit can go higher).
MEMBER_LIMIT = 500


def _groups_table(trace_id: int, data: dict[str, Any]) -> html.Table:
    rows = []
    for g in data["groups"]:
        finals = ", ".join(f"{k} {v}" for k, v in sorted(g["final_states"].items()))
        rows.append([link(g["name"], group_href(trace_id, g["name"])), fmt_count(g["count"]),
                     fmt_count(g["alive_at_end"]), finals, fmt_ns(g["lifetime_ns"]),
                     *[fmt_ns(g["times"][c]) for c in CATEGORIES]])
    header = ["start function", "goroutines", "alive at end", "final states", "lifetime",
              *[CATEGORY_LABELS[c] for c in CATEGORIES]]
    return table(header, rows, num={1, 2, *range(4, 5 + len(CATEGORIES))},
                 id="goroutines-groups-table")


def _members_table(trace_id: int, data: dict[str, Any], origin: int) -> Any:
    """A group's goroutines as one table (hundreds of rows)."""
    rows = []
    for m in data["members"]:
        rows.append({
            "goid": md_link(str(m["goid"]), goroutine_href(trace_id, m["goid"])),
            "first": rel(m["first_ts"], origin), "end": rel(m["end_ts"], origin),
            "lifetime": fmt_ns(m["lifetime_ns"]), "final": m["final_state"],
            **{c: fmt_ns(m["times"][c]) for c in CATEGORIES},
            "timeline": md_link("timeline", timeline_href(trace_id, "g", m["first_ts"],
                                                          m["end_ts"], g=m["goid"]))})
    columns = [("goid", "goid"), ("first", "first seen"), ("end", "end"),
               ("lifetime", "lifetime"), ("final", "final state"),
               *[(c, CATEGORY_LABELS[c]) for c in CATEGORIES], ("timeline", "")]
    return data_table("goroutines-members-table", columns, rows,
                      num={"first", "end", "lifetime", *CATEGORIES},
                      markdown={"goid", "timeline"})


def _sort_links(trace_id: int, group: str, current: str) -> list[Any]:
    out: list[Any] = []
    for key in MEMBER_SORTS:
        label = "goid" if key == "goid" else \
            "lifetime" if key == "lifetime" else CATEGORY_LABELS[key]
        if key == current:
            out.append(html.B(label))
        else:
            out.append(link(label, f"{group_href(trace_id, group)}&sort={key}"))
        out.append(" · ")
    return out[:-1]


def layout(query: dict[str, str], trace_id: int = 0, **_: Any) -> Any:
    ctx = ui_context()
    frames = ctx.frames.get(trace_id)
    group = query.get("group")
    sort = query.get("sort", "goid")
    if sort not in MEMBER_SORTS:
        raise PageError(f"sort must be one of {', '.join(MEMBER_SORTS)}, not {sort!r}")
    try:
        data = goroutine_groups(ctx.engine, frames, group, limit=MEMBER_LIMIT, sort=sort)
    except LookupError as e:
        raise PageError(str(e.args[0]) if e.args else "no such group") from None
    origin = frames.first_ts
    alive = sum(g["alive_at_end"] for g in data["groups"])
    total = {c: sum(g["times"][c] for g in data["groups"]) for c in CATEGORIES}
    cards = [stat_card("goroutines", fmt_count(data["goroutines"])),
             stat_card("start functions", fmt_count(len(data["groups"]))),
             stat_card("alive at end", fmt_count(alive)),
             *[stat_card(CATEGORY_LABELS[c], fmt_ns(total[c]), "summed") for c in CATEGORIES]]
    api = f"/api/traces/{trace_id}/goroutine-groups"
    body: list[Any] = [html.H2("Goroutines by start function"),
                       html.Div(cards, className="stats", id="goroutines-stats"),
                       profiles(trace_id, [("lock", "locks"), ("chan", "channels & select"),
                                           ("sync", "all sync"), ("net", "network")],
                                None, None, "goroutines")]
    if group is not None:
        g = next(x for x in data["groups"] if x["name"] == group)
        body += [html.Div([
            html.H3(["Group ", html.Code(group)], id="goroutines-group-title"),
            html.P([f"{g['count']} goroutines, {g['alive_at_end']} alive at the end. ",
                    link("All groups", f"/traces/{trace_id}/goroutines")]),
            dcc.Graph(id="goroutines-group-graph",
                      figure=breakdown_figure(g["times"], "Time by category, summed"),
                      config=graph_cfg(f"trace{trace_id}-goroutine-group")),
            html.P([f"Showing {len(data['members'])} of {data['members_total']} goroutines. "
                    "Order: ", *_sort_links(trace_id, group, sort)], className="muted",
                   id="goroutines-sort"),
            _members_table(trace_id, data, origin),
            api_link(f"{api}?group={group_href(trace_id, group).split('=', 1)[1]}"),
        ], className="card")]
    body += [
        html.Div(dcc.Graph(id="goroutines-graph", figure=groups_figure(data),
                           config=graph_cfg(f"trace{trace_id}-goroutines")), className="card"),
        html.Div([html.H3("All start functions"),
                  html.P("Times are summed over the group's goroutines within the trace "
                         "window; each goroutine's categories add up to its lifetime. "
                         "Click a name for its goroutines.", className="muted"),
                  _groups_table(trace_id, data), api_link(api),
                  downloads(trace_id, ["goroutines"])], className="card"),
    ]
    return html.Div(body, id="goroutines-page")


def register(dash_app: Dash) -> None:
    return None
