"""Live sessions: storing windows (segments) as they arrive, and reading them back.

A collector (``gmpscope live``, :mod:`collectors.live`) sends each window of a
running service as a raw trace. :func:`add_segment` ingests it like any upload
(:func:`ingest.load.pipeline.ingest_trace_file`), computes its per-second aggregates
from the frames the loader wrote (:mod:`ingest.live.stats`) and records the
segment and its seconds under the session, which is created on first use.

Pausing is decided here, on the server: a paused session refuses segments
(:class:`SessionPaused`, HTTP 409); the collector, seeing that, stops pulling
traces from its target and polls the session until it is resumed.
"""

from __future__ import annotations

import json
import logging
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, delete, func, select, update

from ingest.derive.frames import FrameStore, TraceFrames
from ingest.live.stats import HEAP_METRIC, Span, window_seconds
from ingest.load.pipeline import ingest_trace_file
from ingest.store import live_models, models
from ingest.store.db import write_tx

log = logging.getLogger("gmpscope.live")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
STATES = ("running", "paused")
SS = live_models.live_sessions
SG = live_models.live_segments
SEC = live_models.live_seconds
OS = live_models.live_os_seconds
#: live_os_seconds' columns in the per-second series (null where a window has no OS side).
OS_COLUMNS = ("running_ns", "offcpu_waiting_ns", "offcpu_asleep_ns", "threads_oncpu_ns",
              "threads_waiting_ns", "epoll_waits", "epoll_ready")


class SessionPaused(Exception):
    """The session is paused: it takes no segments until resumed."""


def check_name(name: str) -> str:
    """A session name: letters, digits, ``._:-``, up to 128 characters."""
    if not NAME_RE.match(name):
        raise ValueError(f"bad session name {name!r}: use letters, digits and ._:- "
                         "(at most 128 characters)")
    return name


def _now() -> datetime:
    return datetime.now(UTC)


def _session_row(conn: Connection, name: str) -> Any:
    return conn.execute(select(SS).where(SS.c.name == name)).first()


def ensure_session(conn: Connection, name: str, target: str, window_s: float | None) -> Any:
    """The session named ``name``, created (running) when new."""
    row = _session_row(conn, name)
    if row is None:
        now = _now()
        conn.execute(SS.insert().values(
            name=name, target=target, state="running", window_s=window_s, segments=0,
            dropped=0, target_failures=0, last_status="", created_at=now, updated_at=now))
        row = _session_row(conn, name)
    return row


def get_session(engine: Engine, name: str) -> dict[str, Any] | None:
    """One session with its counters, or None."""
    with engine.connect() as conn:
        row = _session_row(conn, name)
    return _session_dict(row) if row is not None else None


def _session_dict(row: Any) -> dict[str, Any]:
    d = dict(row._mapping)
    for k in ("created_at", "updated_at"):
        if d.get(k) is not None:
            d[k] = d[k].isoformat()
    return d


def list_sessions(engine: Engine) -> list[dict[str, Any]]:
    """Every session, most recently updated first."""
    with engine.connect() as conn:
        rows = conn.execute(select(SS).order_by(SS.c.updated_at.desc(), SS.c.id)).all()
    return [_session_dict(r) for r in rows]


def set_state(engine: Engine, name: str, state: str) -> dict[str, Any]:
    """Pause or resume; raises LookupError for an unknown session."""
    if state not in STATES:
        raise ValueError(f"state must be one of {', '.join(STATES)}")
    with write_tx(engine) as conn:
        n = conn.execute(update(SS).where(SS.c.name == name).values(
            state=state, updated_at=_now())).rowcount
    if not n:
        raise LookupError(f"no live session {name!r}")
    found = get_session(engine, name)
    assert found is not None
    return found


def report_status(engine: Engine, name: str, target: str, message: str, *,
                  dropped: int | None = None, target_failures: int | None = None) -> None:
    """The collector's latest word (target down, back, windows dropped)."""
    with write_tx(engine) as conn:
        ensure_session(conn, name, target, None)
        values: dict[str, Any] = {"last_status": message[:2000], "updated_at": _now()}
        if dropped is not None:
            values["dropped"] = dropped
        if target_failures is not None:
            values["target_failures"] = target_failures
        conn.execute(update(SS).where(SS.c.name == name).values(**values))


def is_paused(engine: Engine, name: str) -> bool:
    with engine.connect() as conn:
        state = conn.execute(select(SS.c.state).where(SS.c.name == name)).scalar()
    return state == "paused"


def _spans_and_heap(engine: Engine, trace_id: int) -> tuple[list[Span], list[tuple[int, int]]]:
    r, m = models.ranges, models.metrics
    with engine.connect() as conn:
        spans = [Span(row.kind, row.start_ts, row.end_ts) for row in conn.execute(
            select(r.c.kind, r.c.start_ts, r.c.end_ts).where(
                r.c.trace_id == trace_id, r.c.kind.in_(("gc", "stw"))))]
        heap = [(int(row.ts), int(row.value)) for row in conn.execute(
            select(m.c.ts, m.c.value).where(m.c.trace_id == trace_id, m.c.name == HEAP_METRIC,
                                            m.c.value.is_not(None)))]
    return spans, heap


def window_findings(engine: Engine, tf: TraceFrames) -> list[dict[str, Any]] | None:
    """The diagnostics rules (:mod:`ingest.diagnose`) that fire on one window,
    compact; None when diagnostics are unavailable or failed (logged)."""
    try:
        from ingest.diagnose import diagnose
    except ImportError:
        return None
    try:
        report = diagnose(engine, tf)
    except Exception:
        log.exception("diagnostics failed on live window trace %d", tf.trace_id)
        return None
    return [{k: f.get(k) for k in ("rule", "severity", "title", "summary", "link")}
            for f in report.get("findings", [])]


def add_segment(engine: Engine, frames: FrameStore, data_dir: Path, name: str, path: Path, *,
                target: str, seq: int, wall_start_ns: int, wall_end_ns: int,
                window_s: float | None = None, note: str = "", sha256: str | None = None,
                dropped: int | None = None, target_failures: int | None = None
                ) -> dict[str, Any]:
    """Ingest one window as the next segment of session ``name``.

    Raises SessionPaused when the session is paused (nothing is stored) and
    ingest.load.pipeline.IngestError when the body is not a trace.
    """
    check_name(name)
    with write_tx(engine) as conn:
        row = ensure_session(conn, name, target, window_s)
    if row.state == "paused":
        raise SessionPaused(name)
    started = time.perf_counter()
    result = ingest_trace_file(engine, path, f"live {name} #{seq}", data_dir=data_dir,
                               sha256=sha256)
    tf = frames.get(result.id)
    spans, heap = _spans_and_heap(engine, result.id)
    seconds = window_seconds(tf, spans, heap)
    t = models.traces
    with engine.connect() as conn:
        wall0 = conn.execute(select(t.c.wall_start_ns).where(t.c.id == result.id)).scalar()
    # The trace's own clock sync when it has one; else the collector's request time.
    base = int(wall0) if wall0 is not None else wall_start_ns
    ingest_ms = (time.perf_counter() - started) * 1000
    findings = window_findings(engine, tf)
    now = _now()
    with write_tx(engine) as conn:
        seg_id = conn.execute(SG.insert().values(
            session_id=row.id, seq=seq, trace_id=result.id, wall_start_ns=wall_start_ns,
            wall_end_ns=wall_end_ns, first_ts=tf.first_ts, last_ts=tf.last_ts,
            size_bytes=path.stat().st_size, events=result.events, ingest_ms=ingest_ms,
            note=note[:2000], findings=json.dumps(findings) if findings is not None else None,
            created_at=now).returning(SG.c.id)).scalar_one()
        if seconds:
            conn.execute(SEC.insert(), [{
                **{k: v for k, v in s.items() if k != "start_ts"},
                "session_id": row.id, "segment_id": seg_id,
                "t_ns": base + (s["start_ts"] - tf.first_ts)} for s in seconds])
        values: dict[str, Any] = {"segments": SS.c.segments + 1, "updated_at": now}
        if window_s is not None:
            values["window_s"] = window_s
        if dropped is not None:
            values["dropped"] = dropped
        if target_failures is not None:
            values["target_failures"] = target_failures
        conn.execute(update(SS).where(SS.c.id == row.id).values(**values))
    # The window's wall-clock span as the trace itself sees it (its clock snapshot):
    # where the collector cuts the OS side recorded meanwhile (gmpscope live --os).
    return {"session": name, "segment": seg_id, "seq": seq, "trace_id": result.id,
            "seconds": len(seconds), "ingest_ms": round(ingest_ms, 1),
            "wall_start_ns": base, "wall_end_ns": base + (tf.last_ts - tf.first_ts),
            "wall_from": "clock snapshot" if wall0 is not None else "request time"}


def version(engine: Engine, name: str) -> str:
    """Changes whenever the session does (new segment, state, collector status):
    the live page's cheap "anything new?" question."""
    with engine.connect() as conn:
        row = conn.execute(select(SS.c.id, SS.c.state, SS.c.segments, SS.c.updated_at)
                           .where(SS.c.name == name)).first()
    if row is None:
        return "none"
    return f"{row.id}:{row.state}:{row.segments}:{row.updated_at}"


def seconds_series(engine: Engine, name: str, since_ns: int | None = None,
                   limit: int = 600) -> list[dict[str, Any]]:
    """The session's per-second rows in time order (the last ``limit`` after ``since_ns``)."""
    with engine.connect() as conn:
        sid = conn.execute(select(SS.c.id).where(SS.c.name == name)).scalar()
        if sid is None:
            raise LookupError(f"no live session {name!r}")
        q = (select(SEC, SG.c.trace_id, SG.c.seq,
                    *(OS.c[c].label(f"os_{c}") for c in OS_COLUMNS))
             .join(SG, SG.c.id == SEC.c.segment_id)
             .outerjoin(OS, (OS.c.session_id == SEC.c.session_id)
                        & (OS.c.segment_id == SEC.c.segment_id) & (OS.c.bin == SEC.c.bin))
             .where(SEC.c.session_id == sid))
        if since_ns is not None:
            q = q.where(SEC.c.t_ns > since_ns)
        rows = conn.execute(q.order_by(SEC.c.t_ns.desc()).limit(limit)).all()
    return [dict(r._mapping) for r in reversed(rows)]


def segments(engine: Engine, name: str, limit: int = 100) -> list[dict[str, Any]]:
    """The session's latest segments, newest first, with the gap before each."""
    with engine.connect() as conn:
        sid = conn.execute(select(SS.c.id).where(SS.c.name == name)).scalar()
        if sid is None:
            raise LookupError(f"no live session {name!r}")
        rows = conn.execute(select(SG).where(SG.c.session_id == sid)
                            .order_by(SG.c.wall_start_ns.desc()).limit(limit + 1)).all()
    out = []
    for i, r in enumerate(rows[:limit]):
        d = dict(r._mapping)
        d["created_at"] = d["created_at"].isoformat() if d["created_at"] else None
        d["findings"] = json.loads(d["findings"]) if d.get("findings") else (
            [] if d.get("findings") is not None else None)
        prev = rows[i + 1] if i + 1 < len(rows) else None
        d["gap_before_ns"] = (int(r.wall_start_ns - prev.wall_end_ns)
                              if prev is not None else None)
        out.append(d)
    return out


def delete_session(engine: Engine, data_dir: Path, name: str) -> int:
    """Delete a session, its aggregates and its windows' traces; returns traces deleted."""
    from ingest.load.delete import delete_trace

    with engine.connect() as conn:
        sid = conn.execute(select(SS.c.id).where(SS.c.name == name)).scalar()
        if sid is None:
            raise LookupError(f"no live session {name!r}")
        ids = [r[0] for r in conn.execute(select(SG.c.trace_id).where(
            SG.c.session_id == sid, SG.c.trace_id.is_not(None)))]
    n = sum(1 for tid in ids if delete_trace(engine, tid, data_dir))
    with write_tx(engine) as conn:
        conn.execute(delete(OS).where(OS.c.session_id == sid))
        conn.execute(delete(SEC).where(SEC.c.session_id == sid))
        conn.execute(delete(SG).where(SG.c.session_id == sid))
        conn.execute(delete(SS).where(SS.c.id == sid))
    return n


def session_counts(engine: Engine, name: str) -> dict[str, int]:
    """Segments with detail, segments expired, per-second rows, per-second rows of the
    OS side (for the page and tests)."""
    with engine.connect() as conn:
        sid = conn.execute(select(SS.c.id).where(SS.c.name == name)).scalar()
        if sid is None:
            raise LookupError(f"no live session {name!r}")
        detail = conn.execute(select(func.count()).select_from(SG).where(
            SG.c.session_id == sid, SG.c.trace_id.is_not(None))).scalar_one()
        expired = conn.execute(select(func.count()).select_from(SG).where(
            SG.c.session_id == sid, SG.c.trace_id.is_(None))).scalar_one()
        secs = conn.execute(select(func.count()).select_from(SEC).where(
            SEC.c.session_id == sid)).scalar_one()
        os_secs = conn.execute(select(func.count()).select_from(OS).where(
            OS.c.session_id == sid)).scalar_one()
    return {"detail_segments": int(detail), "expired_segments": int(expired),
            "seconds": int(secs), "os_seconds": int(os_secs)}
