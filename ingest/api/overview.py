"""JSON API of the overview page.

- ``GET /api/traces/<id>/overview?bins=N&points=N&t1=&t2=``: key numbers,
  goroutines by state and threads over time (time-weighted averages per bin),
  heap and GOMAXPROCS counters reduced to at most ``points`` min/max buckets,
  GC and STW bands (narrow ones as coverage per bucket), over the window
  ``[t1, t2]`` (:mod:`ingest.views.overview`).
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify

from ingest.api.blueprint import error, ingest_state, jsonable
from ingest.api.params import checked, int_param
from ingest.views.counters import DEFAULT_BUCKETS
from ingest.views.overview import DEFAULT_BINS, overview

bp = checked(Blueprint("gmpscope_api_overview", __name__))


@bp.get("/api/traces/<int:trace_id>/overview")
def get_overview(trace_id: int) -> Response:
    st = ingest_state(current_app)
    bins = int_param("bins", DEFAULT_BINS) or DEFAULT_BINS
    points = int_param("points", DEFAULT_BUCKETS) or DEFAULT_BUCKETS
    t1, t2 = int_param("t1"), int_param("t2")
    try:
        data = overview(st.engine, st.frames.get(trace_id), trace_id, bins=bins,
                        t1=t1, t2=t2, points=points)
    except LookupError:
        return error(404, f"no trace with id {trace_id}")
    except ValueError as e:
        return error(400, str(e))
    return jsonify(jsonable(data))
