"""JSON API of the flame page (docs/pprof.md).

- ``GET /api/traces/<id>/flame?kind=net|lock|chan|sync|syscall|sched|cpu[&t1=&t2=]``:
  the profile's call tree (``nodes``: id, parent, name, value in ns, count, self);
- ``GET /api/traces/<id>/flame/goroutines?kind=...&node=N[&t1=&t2=]``: the
  goroutines behind node N of that tree, heaviest first.

``t1``/``t2`` are absolute trace ns; a bad parameter answers 400, an unknown
trace or node 404.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, request

from ingest.api.blueprint import ingest_state
from ingest.api.params import BadParam, answer, checked, int_param, window
from ingest.derive.frames import TraceFrames
from ingest.views.flame import flame_goroutines, flame_tree
from ingest.views.pprof import TYPES

bp = checked(Blueprint("gmpscope_api_flame", __name__))


def _kind() -> str:
    kind = request.args.get("kind", "")
    if kind not in TYPES:
        raise BadParam(f"kind must be one of {', '.join(TYPES)}, not {kind!r}")
    return kind


@bp.get("/api/traces/<int:trace_id>/flame")
def flame_api(trace_id: int) -> Response:
    engine = ingest_state(current_app).engine

    def work(f: TraceFrames) -> dict[str, Any]:
        t1, t2 = window()
        return flame_tree(engine, f, _kind(), t1, t2)

    return answer(trace_id, work)


@bp.get("/api/traces/<int:trace_id>/flame/goroutines")
def flame_goroutines_api(trace_id: int) -> Response:
    engine = ingest_state(current_app).engine

    def work(f: TraceFrames) -> dict[str, Any]:
        t1, t2 = window()
        node = int_param("node", None, 0)
        if node is None:
            raise BadParam("node is required (a node id of the flame tree)")
        return flame_goroutines(engine, f, _kind(), node, t1, t2)

    return answer(trace_id, work)
