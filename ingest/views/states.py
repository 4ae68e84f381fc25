"""State graphs: per resource (goroutine or proc), the states as nodes and the
transitions between them as edges, with counts and dwell times.

An edge's count is the number of decoded transitions from its source to its
target state (so the counts add up to the decoded transitions exactly). Its
dwell time is how long the resource had been in the source state when it
left: the time since the resource's previous transition (unknown for the
first transition of a resource in the trace, which is counted but not
timed). p50/p99 are nearest-rank percentiles. Precomputed at ingest
(``state_edges``), so building a whole-trace graph reads a handful of rows.

Filtered graphs (a goroutine group, a time window, Waiting split by reason)
and the thread graph are computed from the trace's frames by
:mod:`ingest.views.states_frames` with the same definitions.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import Engine, select

from ingest.store import models

RESOURCES = ("goroutine", "proc")
#: Resources the frames-based graphs cover (threads are derived, see stategraph_frames).
ALL_RESOURCES = ("goroutine", "proc", "thread")


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    count: int
    dwell_count: int  # transitions whose dwell time is known
    dwell_mean_ns: float | None
    dwell_p50_ns: int | None
    dwell_p99_ns: int | None
    dwell_max_ns: int | None


@dataclass(frozen=True)
class StateGraph:
    resource: str
    nodes: list[str]
    edges: list[Edge] = field(default_factory=list)
    #: How the graph was built (group, t1, t2, split_reasons, reasons...), for the JSON.
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(e.count for e in self.edges)


def state_graph(engine: Engine, trace_id: int, resource: str) -> StateGraph:
    """The state graph of ``resource`` ("goroutine" or "proc") in a trace."""
    if resource not in RESOURCES:
        raise ValueError(f"resource must be one of {', '.join(RESOURCES)}, not {resource!r}")
    se = models.state_edges
    with engine.connect() as conn:
        rows = conn.execute(select(se).where(se.c.trace_id == trace_id,
                                             se.c.resource == resource)
                            .order_by(se.c.count.desc(), se.c.from_state, se.c.to_state)).all()
    edges = [Edge(r.from_state, r.to_state, r._mapping["count"], r.dwell_count, r.dwell_mean_ns,
                  r.dwell_p50_ns, r.dwell_p99_ns, r.dwell_max_ns) for r in rows]
    order = {name: i for i, name in enumerate(models.STATE_NAMES)}
    nodes = sorted({e.source for e in edges} | {e.target for e in edges},
                   key=lambda s: (order.get(s, 99), s))
    return StateGraph(resource=resource, nodes=nodes, edges=edges)


def to_json(graph: StateGraph) -> dict[str, Any]:
    """A JSON-able dict: resource, nodes (with in/out counts), edges, total."""
    out_c: dict[str, int] = {}
    in_c: dict[str, int] = {}
    for e in graph.edges:
        out_c[e.source] = out_c.get(e.source, 0) + e.count
        in_c[e.target] = in_c.get(e.target, 0) + e.count
    return {
        "resource": graph.resource,
        "nodes": [{"id": n, "in": in_c.get(n, 0), "out": out_c.get(n, 0)} for n in graph.nodes],
        "edges": [asdict(e) for e in graph.edges],
        "total": graph.total,
        **graph.info,
    }


def format_ns(ns: float | None) -> str:
    """A duration in the unit that reads best (ns, µs, ms, s)."""
    if ns is None:
        return "?"
    for unit, div in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= div:
            return f"{ns / div:.3g}{unit}"
    return f"{ns:.0f}ns"


def _label(e: Edge) -> str:
    if e.dwell_count == 0:
        return f"{e.count:,}"
    return f"{e.count:,} · p50 {format_ns(e.dwell_p50_ns)} · p99 {format_ns(e.dwell_p99_ns)}"


def _mermaid_text(s: str) -> str:
    # Mermaid has entity codes for the characters that end a quoted label.
    return (s.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;")
            .replace(">", "#gt;").replace("|", "#124;"))


def to_mermaid(graph: StateGraph) -> str:
    """Mermaid flowchart text; node ids are generated, labels escaped."""
    ids = {n: f"s{i}" for i, n in enumerate(graph.nodes)}
    lines = ["flowchart LR"]
    lines += [f'    {ids[n]}["{_mermaid_text(n)}"]' for n in graph.nodes]
    lines += [f'    {ids[e.source]} -->|"{_mermaid_text(_label(e))}"| {ids[e.target]}'
              for e in graph.edges]
    return "\n".join(lines) + "\n"


def _dot_text(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def to_dot(graph: StateGraph) -> str:
    """Graphviz DOT text; every name and label quoted and escaped."""
    lines = [f'digraph "{_dot_text(graph.resource)}" {{', "    rankdir=LR;",
             "    node [shape=box, style=rounded];"]
    lines += [f'    "{_dot_text(n)}";' for n in graph.nodes]
    lines += [f'    "{_dot_text(e.source)}" -> "{_dot_text(e.target)}" '
              f'[label="{_dot_text(_label(e))}"];' for e in graph.edges]
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(graph: StateGraph, fmt: str) -> dict[str, Any] | str:
    """``fmt`` json, mermaid or dot."""
    if fmt == "json":
        return to_json(graph)
    if fmt == "mermaid":
        return to_mermaid(graph)
    if fmt == "dot":
        return to_dot(graph)
    raise ValueError(f"format must be json, mermaid or dot, not {fmt!r}")
