"""Retention of live sessions: full detail for a while, per-second aggregates longer.

:func:`apply_retention` deletes the traces of windows that ended more than
``detail_s`` ago (through :func:`ingest.load.delete.delete_trace`: rows, raw file
and frame cache; the segment row stays, its ``trace_id`` set to NULL) and the
per-second rows and segment rows older than ``keep_s``. :func:`start` runs it
every ``every_s`` in a daemon thread of the server process (each gunicorn
worker runs one; deleting the same trace twice is harmless).

Settings (environment, read when the server app is built):
``GMPSCOPE_LIVE_DETAIL_S`` (600), ``GMPSCOPE_LIVE_KEEP_S`` (86400),
``GMPSCOPE_LIVE_RETENTION_EVERY_S`` (30; 0 disables the job).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, and_, delete, select, update
from sqlalchemy.exc import DBAPIError

from ingest.load.delete import delete_trace
from ingest.store import live_models
from ingest.store.db import write_tx

log = logging.getLogger("gmpscope.live.retention")
SG = live_models.live_segments
SEC = live_models.live_seconds
OS = live_models.live_os_seconds


@dataclass(frozen=True)
class Retention:
    """How long live data is kept, in seconds, and how often the job runs."""

    detail_s: float = 600.0
    keep_s: float = 86400.0
    every_s: float = 30.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Retention:
        e = os.environ if env is None else env
        d = cls()
        return cls(detail_s=_float(e, "GMPSCOPE_LIVE_DETAIL_S", d.detail_s),
                   keep_s=_float(e, "GMPSCOPE_LIVE_KEEP_S", d.keep_s),
                   every_s=_float(e, "GMPSCOPE_LIVE_RETENTION_EVERY_S", d.every_s))


def _float(env: Mapping[str, str], key: str, default: float) -> float:
    raw = env.get(key, "")
    if not raw:
        return default
    try:
        v = float(raw)
    except ValueError:
        raise ValueError(f"{key} must be a number of seconds, not {raw!r}") from None
    if v < 0:
        raise ValueError(f"{key} must not be negative")
    return v


def apply_retention(engine: Engine, data_dir: Path, policy: Retention,
                    now_ns: int | None = None) -> dict[str, int]:
    """One pass; returns how many traces, segments and seconds were deleted."""
    now = time.time_ns() if now_ns is None else now_ns
    detail_cut = now - int(policy.detail_s * 1e9)
    keep_cut = now - int(policy.keep_s * 1e9)
    with engine.connect() as conn:
        old = [(r.id, r.trace_id) for r in conn.execute(
            select(SG.c.id, SG.c.trace_id).where(
                SG.c.trace_id.is_not(None), SG.c.wall_end_ns < detail_cut))]
    traces = 0
    for seg_id, trace_id in old:
        if delete_trace(engine, trace_id, data_dir):
            traces += 1
        with write_tx(engine) as conn:
            conn.execute(update(SG).where(SG.c.id == seg_id).values(trace_id=None))
    with write_tx(engine) as conn:
        seconds = conn.execute(delete(SEC).where(SEC.c.t_ns < keep_cut)).rowcount
        conn.execute(delete(OS).where(OS.c.t_ns < keep_cut))
        # A segment goes once its detail and all its seconds are gone.
        gone = select(SEC.c.segment_id).where(SEC.c.segment_id == SG.c.id).exists()
        segs = conn.execute(delete(SG).where(and_(
            SG.c.trace_id.is_(None), SG.c.wall_end_ns < keep_cut, ~gone))).rowcount
    return {"traces": traces, "segments": int(segs or 0), "seconds": int(seconds or 0)}


def start(engine: Engine, data_dir: Path, policy: Retention) -> threading.Thread | None:
    """Run :func:`apply_retention` every ``policy.every_s`` in a daemon thread."""
    if policy.every_s <= 0:
        return None

    def loop() -> None:
        while True:
            time.sleep(policy.every_s)
            try:
                done = apply_retention(engine, data_dir, policy)
                if any(done.values()):
                    log.info("live retention: deleted %(traces)d window traces, "
                             "%(segments)d segments, %(seconds)d per-second rows", done)
            except DBAPIError as e:  # busy database: next round
                log.warning("live retention: %s", type(e.orig).__name__)
            except Exception:
                log.exception("live retention failed")

    th = threading.Thread(target=loop, name="gmpscope-live-retention", daemon=True)
    th.start()
    return th
