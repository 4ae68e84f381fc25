"""Small building blocks shared by the analysis pages (goroutines, one
goroutine, syscalls, latency): tables, links, stack text, window parsing."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from dash import dcc, html

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


def downloads(trace_id: int, names: list[str]) -> html.Div:
    """CSV / Parquet links to the full tables behind a page."""
    items: list[Any] = [html.Span("Download tables: ", className="muted")]
    for n in names:
        items += [html.Span(f"{n} "),
                  html.A("CSV", href=f"/api/traces/{trace_id}/tables/{n}.csv"), " / ",
                  html.A("Parquet", href=f"/api/traces/{trace_id}/tables/{n}.parquet"), "  "]
    return html.Div(items, className="muted")


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
