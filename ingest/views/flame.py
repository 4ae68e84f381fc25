"""The flame page's data: a profile of :mod:`ingest.views.pprof` as a tree
of call paths (outermost frame at the root), and the goroutines behind any
node of it.

A node is a call path from the root: its ``value`` is the time (ns) of the
waits (CPU: samples x period) whose stack passes through it, ``count`` the
number of waits (samples), ``self`` what ends there. Stacks are those of
the pprof profile (merged by program counters as Go merges them), so the
tree is exactly what ``go tool pprof``'s flame graph draws from the
profile file of the same kind and window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine

from ingest.derive.cache import cached_json
from ingest.derive.frames import TraceFrames
from ingest.store.coded_models import rows_by_key
from ingest.views.histo import released
from ingest.views.pprof import TYPES, WAIT_KINDS, Waits, check_type, last_of_each, stack_groups
from ingest.views.pprof import waits as profile_waits

I64 = npt.NDArray[np.int64]

#: The kind the flame page opens with (its tree is built ahead for big traces:
#: ingest.api.warm).
DEFAULT_KIND = "sync"
#: Shown names of the kinds, in the page's order.
KIND_TITLES: dict[str, str] = {
    "net": "Network", "lock": "Locks", "chan": "Channels & select", "sync": "All sync",
    "syscall": "Syscalls", "sched": "Scheduler wait", "cpu": "CPU samples",
}
#: Goroutines listed for a node at most (the heaviest first).
MAX_GOROUTINES = 200
#: Nodes kept at most: the lightest paths are cut first (the whole trace's
#: profile of a busy service has tens of thousands of distinct paths).
MAX_NODES = 4000
ROOT = "root"


@dataclass
class _Tree:
    """Nodes as parallel lists; ``path[g]`` the node ids of stack group g's
    path, root first."""

    name: list[str]
    parent: list[int]
    value: list[int]
    count: list[int]
    path: list[list[int]]


def _build(w: Waits, engine: Engine, trace_id: int, root: str) -> tuple[_Tree, I64]:
    """The tree of ``w``'s stacks, and each wait's stack group."""
    tree = _Tree([root], [-1], [int(w.value_ns.sum())], [len(w.value_ns)], [])
    if not len(w.goid):
        return tree, np.zeros(0, np.int64)
    groups = stack_groups(engine, trace_id, w.stack_id)
    g = groups.of(w.stack_id)
    value = np.zeros(groups.n_groups, dtype=np.int64)
    np.add.at(value, g, w.value_ns)
    count = np.bincount(g, minlength=groups.n_groups)
    shown = w.stack_id[last_of_each(g, w.seq)]
    children: dict[tuple[int, str], int] = {}
    for gi in range(groups.n_groups):
        node, path = 0, [0]
        for _pc, fn, _file, _line in reversed(groups.frames[int(shown[gi])]):
            key = (node, fn or "?")
            nxt = children.get(key)
            if nxt is None:
                nxt = children[key] = len(tree.name)
                tree.name.append(key[1])
                tree.parent.append(node)
                tree.value.append(0)
                tree.count.append(0)
            node = nxt
            path.append(node)
        for n in path[1:]:
            tree.value[n] += int(value[gi])
            tree.count[n] += int(count[gi])
        tree.path.append(path)
    return tree, g


def flame_tree(engine: Engine, frames: TraceFrames, kind: str, t1: int | None = None,
               t2: int | None = None) -> dict[str, Any]:
    """The tree of profile ``kind`` in [t1, t2]; the whole trace's is built once and kept."""
    check_type(kind)
    if t1 is None and t2 is None:
        return cached_json(frames, f"flame-{kind}",  # type: ignore[no-any-return]
                           lambda: released(frames, lambda: _flame_tree(
                               engine, frames, kind, None, None)))
    return released(frames, lambda: _flame_tree(engine, frames, kind, t1, t2))


def _title(kind: str) -> str:
    return "CPU samples" if kind == "cpu" else WAIT_KINDS[kind].title


def _flame_tree(engine: Engine, frames: TraceFrames, kind: str, t1: int | None,
                t2: int | None) -> dict[str, Any]:
    w = profile_waits(engine, frames, kind, t1, t2)
    tree, _g = _build(w, engine, frames.trace_id, _title(kind))
    keep = _kept(tree)
    new_id = {old: i for i, old in enumerate(keep)}
    self_ns = list(tree.value)
    for n in range(1, len(tree.name)):
        self_ns[tree.parent[n]] -= tree.value[n]
    return {
        "trace_id": frames.trace_id, "kind": kind, "title": _title(kind), "t1": t1, "t2": t2,
        "unit": "samples" if kind == "cpu" else "waits",
        "total_ns": tree.value[0], "count": tree.count[0],
        "goroutines": int(len(np.unique(w.goid))), "stacks": len(tree.path),
        "nodes_cut": len(tree.name) - len(keep),
        "nodes": {"id": list(range(len(keep))),
                  "parent": [new_id.get(tree.parent[n], -1) for n in keep],
                  "name": [tree.name[n] for n in keep],
                  "value": [tree.value[n] for n in keep],
                  "count": [tree.count[n] for n in keep],
                  "self": [self_ns[n] for n in keep]},
    }


def _kept(tree: _Tree) -> list[int]:
    """The :data:`MAX_NODES` heaviest nodes (a node is never lighter than
    its children, so the kept set is a tree), in id order."""
    if len(tree.name) <= MAX_NODES:
        return list(range(len(tree.name)))
    order = np.lexsort((np.arange(len(tree.value)), -np.asarray(tree.value)))
    return sorted(order[:MAX_NODES].tolist())


def flame_goroutines(engine: Engine, frames: TraceFrames, kind: str, node: int,
                     t1: int | None = None, t2: int | None = None) -> dict[str, Any]:
    """The goroutines whose waits (samples) pass through ``node`` of
    :func:`flame_tree`'s tree (same kind and window), heaviest first, with
    their start function; raises LookupError for a node not in the tree."""
    check_type(kind)

    def build() -> dict[str, Any]:
        w = profile_waits(engine, frames, kind, t1, t2)
        tree, g = _build(w, engine, frames.trace_id, _title(kind))
        keep = _kept(tree)
        if not 0 <= node < len(keep):
            raise LookupError(f"no node {node} in the {kind} flame graph")
        old = keep[node]
        under = np.array([old in p for p in tree.path], dtype=bool)
        rows = np.flatnonzero(under[g]) if len(g) else np.zeros(0, np.int64)
        goid = w.goid[rows]
        uniq, inv = np.unique(goid, return_inverse=True)
        value = np.zeros(len(uniq), dtype=np.int64)
        np.add.at(value, inv, w.value_ns[rows])
        count = np.bincount(inv, minlength=len(uniq))
        order = np.lexsort((uniq, -value))[:MAX_GOROUTINES]
        names = _start_functions(engine, frames.trace_id, uniq[order].tolist())
        path = []
        n = old
        while n > 0:
            path.append(tree.name[n])
            n = tree.parent[n]
        return {"trace_id": frames.trace_id, "kind": kind, "t1": t1, "t2": t2, "node": node,
                "function": tree.name[old] if old else None, "path": path[::-1],
                "value_ns": tree.value[old], "count": tree.count[old],
                "goroutine_count": int(len(uniq)),
                "goroutines": [{"goid": int(uniq[i]), "value_ns": int(value[i]),
                                "count": int(count[i]),
                                "start_function": names.get(int(uniq[i]))}
                               for i in order.tolist()]}

    return released(frames, build)


def _start_functions(engine: Engine, trace_id: int, goids: list[int]) -> dict[int, str]:
    out: dict[int, str] = {}
    ids = [g for g in goids if g >= 0]
    with engine.connect() as conn:
        for k in range(0, len(ids), 500):
            for goid, fn in rows_by_key(conn, "goroutines", trace_id, ids[k:k + 500],
                                        ("goid", "start_function")):
                if fn:
                    out[int(goid)] = str(fn)
    return out


__all__ = ["DEFAULT_KIND", "KIND_TITLES", "TYPES", "flame_goroutines", "flame_tree"]
