"""JSON API of the analysis views: goroutine groups, one goroutine, syscalls,
netpoller waits and scheduler latency (docs/analysis.md documents every
field and parameter).

- ``GET /api/traces/<id>/goroutine-groups[?group=NAME&limit=N&sort=KEY]``
- ``GET /api/traces/<id>/goroutines/<goid>[?offset=N&limit=N]``
- ``GET /api/traces/<id>/syscalls/summary[?t1=&t2=&top=N]``
- ``GET /api/traces/<id>/netpoll[?t1=&t2=&top=N]``
- ``GET /api/traces/<id>/latency[?t1=&t2=&worst=N]``

``t1``/``t2`` are absolute trace ns (as in the database); bad parameters
answer 400, an unknown trace, goroutine or group 404.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from ingest.api.blueprint import error, ingest_state, jsonable
from ingest.derive.frames import TraceFrames, TraceNotFound
from ingest.views.goroutine import goroutine_detail
from ingest.views.goroutines import MEMBER_SORTS, goroutine_groups
from ingest.views.latency import latency_report
from ingest.views.syscalls import netpoll_summary, syscall_summary

bp = Blueprint("gmpscope_api_analysis", __name__)

#: Upper bounds of the list-size parameters.
MAX_LIMIT = 10_000
MAX_TOP = 100


class BadParam(ValueError):
    """A query parameter that is not acceptable (400)."""


def int_param(args: Any, name: str, default: int | None = None, lo: int | None = None,
              hi: int | None = None) -> int | None:
    """An integer query parameter within [lo, hi], or ``default`` when absent."""
    raw = args.get(name)
    if raw is None or raw == "":
        return default
    try:
        v = int(raw)
    except ValueError:
        raise BadParam(f"{name} must be an integer, not {raw!r}") from None
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise BadParam(f"{name} must be between {lo} and {hi}, not {v}")
    return v


def window(args: Any) -> tuple[int | None, int | None]:
    """``t1``/``t2`` (absolute trace ns), checked t1 < t2."""
    t1, t2 = int_param(args, "t1"), int_param(args, "t2")
    if t1 is not None and t2 is not None and t2 <= t1:
        raise BadParam("t2 must be greater than t1")
    return t1, t2


def _answer(trace_id: int, work: Callable[[TraceFrames], dict[str, Any]]) -> Response:
    state = ingest_state(current_app)
    try:
        frames = state.frames.get(trace_id)
    except TraceNotFound:
        return error(404, f"no trace with id {trace_id}")
    try:
        return jsonify(jsonable(work(frames)))
    except BadParam as e:
        return error(400, str(e))
    except LookupError as e:
        return error(404, str(e.args[0]) if e.args else "not found")


@bp.get("/api/traces/<int:trace_id>/goroutine-groups")
def goroutine_groups_api(trace_id: int) -> Response:
    engine = ingest_state(current_app).engine

    def work(f: TraceFrames) -> dict[str, Any]:
        limit = int_param(request.args, "limit", 1000, 0, MAX_LIMIT)
        sort = request.args.get("sort", "goid")
        if sort not in MEMBER_SORTS:
            raise BadParam(f"sort must be one of {', '.join(MEMBER_SORTS)}, not {sort!r}")
        return goroutine_groups(engine, f, request.args.get("group"), limit or 0, sort)

    return _answer(trace_id, work)


@bp.get("/api/traces/<int:trace_id>/goroutines/<int:goid>")
def goroutine_api(trace_id: int, goid: int) -> Response:
    engine = ingest_state(current_app).engine

    def work(f: TraceFrames) -> dict[str, Any]:
        offset = int_param(request.args, "offset", 0, 0)
        limit = int_param(request.args, "limit", 200, 0, MAX_LIMIT)
        return goroutine_detail(engine, f, goid, offset or 0, limit or 0)

    return _answer(trace_id, work)


@bp.get("/api/traces/<int:trace_id>/syscalls/summary")
def syscalls_api(trace_id: int) -> Response:
    engine = ingest_state(current_app).engine

    def work(f: TraceFrames) -> dict[str, Any]:
        t1, t2 = window(request.args)
        top = int_param(request.args, "top", 10, 1, MAX_TOP)
        return syscall_summary(engine, f, t1, t2, top or 10)

    return _answer(trace_id, work)


@bp.get("/api/traces/<int:trace_id>/netpoll")
def netpoll_api(trace_id: int) -> Response:
    engine = ingest_state(current_app).engine

    def work(f: TraceFrames) -> dict[str, Any]:
        t1, t2 = window(request.args)
        top = int_param(request.args, "top", 10, 1, MAX_TOP)
        return netpoll_summary(engine, f, t1, t2, top or 10)

    return _answer(trace_id, work)


@bp.get("/api/traces/<int:trace_id>/latency")
def latency_api(trace_id: int) -> Response:
    def work(f: TraceFrames) -> dict[str, Any]:
        t1, t2 = window(request.args)
        worst = int_param(request.args, "worst", 50, 0, MAX_LIMIT)
        return latency_report(f, t1, t2, worst or 0)

    return _answer(trace_id, work)
