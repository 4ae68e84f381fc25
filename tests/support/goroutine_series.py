"""The overview's goroutine series computed the plain way, as the oracle of
its fast builds: every goroutine interval from SQL ``interval_view`` with its
series name (a Waiting interval takes the category of its reason; a Waiting ->
Waiting one without a reason, that of the wait it continues)."""

from __future__ import annotations

from sqlalchemy import Engine, text

from ingest.views.wait_reasons import wait_category


def goroutine_series_rows(engine: Engine, trace_id: int) -> list[tuple[str, int, int]]:
    """(series name, start, end) of every goroutine interval, in id order."""
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT rid, state, from_state, reason, start_ts, end_ts FROM interval_view "
            "WHERE trace_id = :t AND resource = 'goroutine' ORDER BY id"),
            {"t": trace_id}).all()
    out = []
    prev_rid, prev_cat = None, None
    for rid, state, frm, reason, s, e in rows:
        cat = None
        if state == "Waiting":
            if frm == "Waiting" and not reason and rid == prev_rid and prev_cat:
                cat = prev_cat
            else:
                cat = wait_category(reason)
        prev_rid, prev_cat = rid, cat
        out.append((f"Waiting: {cat}" if cat else state, int(s), int(e)))
    return out
