"""Small building blocks shared by the analysis pages (goroutines, one
goroutine, syscalls, latency): tables, links, stack text, window parsing."""

from __future__ import annotations

from typing import Any, cast
from urllib.parse import quote, urlencode

from dash import dcc, html
from dash.dash_table.DataTable import DataTable

from app.components import fmt_ns, graph_config
from app.router import PageError


def query_int(query: dict[str, str], name: str, default: int | None = None) -> int | None:
    """An integer from the query string; PageError when it is not one."""
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise PageError(f"{name} must be an integer, not {raw!r}") from None


def window(query: dict[str, str]) -> tuple[int | None, int | None]:
    t1, t2 = query_int(query, "t1"), query_int(query, "t2")
    if t1 is not None and t2 is not None and t2 <= t1:
        raise PageError("t2 must be greater than t1")
    return t1, t2


def rel(ts: int | None, origin: int) -> str:
    """A trace time as an offset from the trace's start."""
    return "–" if ts is None else "+" + fmt_ns(ts - origin)


def timeline_href(trace_id: int, mode: str, t1: int, t2: int, **extra: int) -> str:
    args: dict[str, Any] = {"mode": mode, "t1": t1, "t2": max(t2, t1 + 1)}
    args.update({k: v for k, v in extra.items() if v is not None and v >= 0})
    return f"/traces/{trace_id}/timeline?{urlencode(args)}"


def around(t1: int, t2: int, first_ts: int, last_ts: int) -> tuple[int, int]:
    """[t1, t2] widened by a quarter of its length (at least 10 µs) each side."""
    pad = max((t2 - t1) // 4, 10_000)
    lo = max(first_ts, t1 - pad)
    return lo, max(min(last_ts, t2 + pad), lo + 1)


def goroutine_href(trace_id: int, goid: int) -> str:
    return f"/traces/{trace_id}/goroutines/{goid}"


def group_href(trace_id: int, group: str) -> str:
    return f"/traces/{trace_id}/goroutines?group={quote(group, safe='')}"


def stack_text(frames: list[dict[str, Any]]) -> str:
    """A stack as plain text, innermost frame first (rendered as text, never HTML)."""
    if not frames:
        return "(no stack)"
    return "\n".join(f"{f['function']}\n    {f['file']}:{f['line']}" for f in frames)


#: Packages whose frames say little about who made a call (runtime and I/O plumbing).
_PLUMBING = ("runtime.", "runtime/", "syscall.", "internal/", "os.", "net.", "io.", "bufio.",
             "sync.", "crypto/tls.")


def stack_summary(frames: list[dict[str, Any]], fallback: str = "(no stack)") -> str:
    """Innermost function, plus the first caller outside the runtime and I/O
    plumbing when there is one (two stacks ending in syscall.read differ there)."""
    if not frames:
        return fallback
    top = str(frames[0]["function"])
    for f in frames[1:]:
        fn = str(f["function"])
        if not fn.startswith(_PLUMBING):
            return f"{top} ← {fn}"
    return top


def table(header: list[str], rows: list[list[Any]], num: set[int] | None = None,
          id: str | None = None) -> html.Table:
    """A data table; columns whose index is in ``num`` are right-aligned numbers."""
    num = num or set()
    head = html.Thead(html.Tr([html.Th(h, className="num" if i in num else None)
                               for i, h in enumerate(header)]))
    body = html.Tbody([html.Tr([html.Td(c, className="num" if i in num else None)
                                for i, c in enumerate(r)]) for r in rows])
    if id:
        return html.Table([head, body], className="data", id=id)
    return html.Table([head, body], className="data")


#: DataTable styles: a table as one component (a hundred rows of html.Td
#: components took Dash's renderer seconds), in the pages' look.
_CELL = {"whiteSpace": "pre-wrap", "textAlign": "left", "padding": "3px 8px",
         "fontFamily": "system-ui, sans-serif", "fontSize": "13px", "height": "auto",
         "maxWidth": "520px"}
_HEADER = {"fontWeight": "600", "backgroundColor": "#f3f4f7"}
#: A markdown cell is a paragraph: without its margins a row keeps one line's height.
_CSS = [{"selector": ".dash-cell p", "rule": "margin: 0"},
        {"selector": ".dash-cell a", "rule": "color: var(--accent)"}]


def md_link(text: str, href: str) -> str:
    """A link in a markdown cell of :func:`data_table`: for our own labels and
    URLs only (strings from traces stay plain text)."""
    return f"[{text}]({href})"


def data_table(table_id: str, columns: list[tuple[str, str]], rows: list[dict[str, Any]],
               num: set[str] | None = None, markdown: set[str] | None = None,
               tooltips: list[dict[str, str]] | None = None) -> DataTable:
    """Rows as one DataTable: ``columns`` are (id, header); ``num`` columns
    right-aligned, ``markdown`` ones hold :func:`md_link` links; ``tooltips``,
    one per row, plain text shown on hover (column id -> text)."""
    cols = [{"id": i, "name": n, **({"presentation": "markdown"} if i in (markdown or set())
                                    else {})} for i, n in columns]
    extra: dict[str, Any] = {}
    if tooltips is not None:
        extra = {"tooltip_data": [{k: {"value": v, "type": "text"} for k, v in t.items()}
                                  for t in tooltips],
                 "tooltip_duration": None, "tooltip_delay": 300}
    return DataTable(
        id=table_id, columns=cast(Any, cols), data=cast(Any, rows), page_action="none",
        markdown_options={"link_target": "_self"}, css=cast(Any, _CSS),
        style_cell=cast(Any, _CELL), style_header=cast(Any, _HEADER),
        style_cell_conditional=cast(Any, [{"if": {"column_id": c}, "textAlign": "right"}
                                          for c in sorted(num or set())]),
        style_table={"overflowX": "auto"}, **extra)


def stack_list(stacks: dict[str, list[dict[str, Any]]], ids: list[int], prefix: str,
               title: str = "Their stacks (click to expand)") -> html.Div:
    """Each stack of ``ids`` once (by id, ascending), expanding on click into
    its frames as text; ``stacks`` maps a stack id (as a string) to its frames."""
    items = [html.Details([html.Summary(f"{sid}: " + stack_summary(
        stacks.get(str(sid), []), f"stack {sid}"), className="mono"),
        html.Pre(stack_text(stacks.get(str(sid), [])), className="stack")],
        id=f"{prefix}-{sid}") for sid in sorted({i for i in ids if i > 0})]
    return html.Div([html.H4(title), *items] if items else [], id=f"{prefix}s")


def downloads(trace_id: int, names: list[str]) -> html.Div:
    """CSV / Parquet links to the full tables behind a page."""
    items: list[Any] = [html.Span("Download tables: ", className="muted")]
    for n in names:
        items += [html.Span(f"{n} "),
                  html.A("CSV", href=f"/api/traces/{trace_id}/tables/{n}.csv"), " / ",
                  html.A("Parquet", href=f"/api/traces/{trace_id}/tables/{n}.parquet"), "  "]
    return html.Div(items, className="muted")


def flame_href(trace_id: int, kind: str, t1: int | None = None, t2: int | None = None) -> str:
    """The flame page of one profile kind, with the window when there is one."""
    args: dict[str, Any] = {"kind": kind}
    args.update({k: v for k, v in (("t1", t1), ("t2", t2)) if v is not None})
    return f"/traces/{trace_id}/flame?{urlencode(args)}"


def pprof_href(trace_id: int, kind: str, t1: int | None = None, t2: int | None = None) -> str:
    """The pprof file of one profile kind (``go tool pprof`` reads it)."""
    args: dict[str, Any] = {"type": kind}
    args.update({k: v for k, v in (("t1", t1), ("t2", t2)) if v is not None})
    return f"/api/traces/{trace_id}/pprof?{urlencode(args)}"


def profiles(trace_id: int, kinds: list[tuple[str, str]], t1: int | None, t2: int | None,
             page: str) -> html.Div:
    """Links to the flame graphs and pprof files of ``kinds`` ((kind, label))
    for the page's window: ``go tool trace -pprof``'s profiles (docs/pprof.md)."""
    items: list[Any] = [html.Span("Flame graph: ", className="muted")]
    for i, (kind, label) in enumerate(kinds):
        items += [" · " if i else "", dcc.Link(label, href=flame_href(trace_id, kind, t1, t2),
                                              id=f"{page}-flame-{kind}")]
    items.append(html.Span("   pprof (go tool pprof): ", className="muted"))
    for i, (kind, label) in enumerate(kinds):
        items += [" · " if i else "", html.A(f"{kind}.pb.gz",
                                              href=pprof_href(trace_id, kind, t1, t2),
                                              id=f"{page}-pprof-{kind}", title=label)]
    return html.Div(items, className="profiles", id=f"{page}-profiles")


def api_link(href: str) -> html.Div:
    return html.Div(["JSON: ", html.A(href, href=href, className="mono")], className="muted")


def link(text: str, href: str) -> dcc.Link:
    return dcc.Link(text, href=href)


def graph_cfg(filename: str) -> Any:
    """``app.components.graph_config`` typed for ``dcc.Graph(config=...)``."""
    return graph_config(filename)


def window_note(trace_id: int, page: str, t1: int | None, t2: int | None,
                first_ts: int) -> list[Any]:
    """A line naming the ``t1``/``t2`` window in use, with a link to the whole trace."""
    if t1 is None and t2 is None:
        return []
    return [html.P([f"Window: {rel(t1, first_ts) if t1 is not None else 'start'} to "
                    f"{rel(t2, first_ts) if t2 is not None else 'end'} of the trace. ",
                    link("Whole trace", f"/traces/{trace_id}/{page}")],
                   className="muted", id=f"{page}-window")]
