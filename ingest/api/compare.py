"""JSON API of the compare page.

- ``GET /api/compare?a=ID&b=ID``: two traces side by side (:mod:`ingest.views.compare`).
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify

from ingest.api.blueprint import error, ingest_state, jsonable
from ingest.api.params import checked, int_param
from ingest.views.compare import compare

bp = checked(Blueprint("gmpscope_api_compare", __name__))


@bp.get("/api/compare")
def get_compare() -> Response:
    st = ingest_state(current_app)
    a, b = int_param("a"), int_param("b")
    if a is None or b is None:
        return error(400, "give two trace ids: /api/compare?a=ID&b=ID")
    return jsonify(jsonable(compare(st.engine, st.frames, a, b)))
