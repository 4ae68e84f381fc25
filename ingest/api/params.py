"""Query parameters of the JSON API, checked: a bad one answers 400 with one line
saying what was expected; an unknown trace answers 404."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from ingest.api.blueprint import error, ingest_state, jsonable
from ingest.derive.frames import TraceFrames, TraceNotFound


class BadParam(ValueError):
    """A query parameter that is not what the endpoint takes (400)."""


def int_param(name: str, default: int | None = None, lo: int | None = None,
              hi: int | None = None) -> int | None:
    """The integer query parameter ``name`` within [lo, hi], or ``default`` when absent."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    try:
        v = int(raw)
    except ValueError:
        raise BadParam(f"{name} must be an integer, not {raw!r}") from None
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise BadParam(f"{name} must be between {lo} and {hi}, not {v}")
    return v


def window() -> tuple[int | None, int | None]:
    """``t1``/``t2`` (absolute trace ns), checked t1 < t2."""
    t1, t2 = int_param("t1"), int_param("t2")
    if t1 is not None and t2 is not None and t2 <= t1:
        raise BadParam("t2 must be greater than t1")
    return t1, t2


def flag(name: str) -> bool:
    """A yes/no query parameter (1, true, yes, on)."""
    return request.args.get(name, "").lower() in ("1", "true", "yes", "on")


def checked(blueprint: Blueprint) -> Blueprint:
    """``blueprint`` with BadParam answered 400 and an unknown trace 404."""

    def bad_param(e: BadParam) -> Response:
        return error(400, str(e))

    def no_trace(e: TraceNotFound) -> Response:
        return error(404, f"no trace with id {e.args[0] if e.args else '?'}")

    blueprint.register_error_handler(BadParam, bad_param)
    blueprint.register_error_handler(TraceNotFound, no_trace)
    return blueprint


def answer(trace_id: int, work: Callable[[TraceFrames], dict[str, Any]]) -> Response:
    """``work`` on the trace's frames as JSON: 404 for an unknown trace, goroutine
    or group, 400 for a bad parameter."""
    try:
        frames = ingest_state(current_app).frames.get(trace_id)
    except TraceNotFound:
        return error(404, f"no trace with id {trace_id}")
    try:
        return jsonify(jsonable(work(frames)))
    except BadParam as e:
        return error(400, str(e))
    except LookupError as e:
        return error(404, str(e.args[0]) if e.args else "not found")
