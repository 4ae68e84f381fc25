"""The kernel's scheduling of a trace's threads (issue 26, docs/offcpu.md): a
recording's ``sched.parquet`` (collectors/poller/sched_recorder.py) stored as
each thread's states, attached to the trace it was recorded with.

- ``os_sched_intervals``: one row per state of one thread: on a CPU
  (``on_cpu``), runnable but waiting for one (``waiting``), asleep (``asleep``,
  ``state`` says how: ``sleep``, ``disk``, ...), or ``unknown`` (an event was
  not recorded). Times in trace ns (``wall - offset_ns``), ``m`` the Go M when
  the trace's M ids are thread ids (Go 1.22+).
- ``os_sched_recordings``: one row per trace: how its clock was aligned, whether
  the recording is partial, what it holds.

Both reference traces with ON DELETE CASCADE on both dialects (as
poller_uring does): a trace's few thousand rows need no place in the
PostgreSQL delete trigger.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKeyConstraint,
    Index,
    Integer,
    String,
    Table,
    Text,
)

from ingest.store.schema_base import metadata, trace_key

os_sched_intervals = Table(
    "os_sched_intervals",
    metadata,
    trace_key(),
    Column("tid", BigInteger, primary_key=True, autoincrement=False),
    Column("start_ts", BigInteger, primary_key=True, autoincrement=False),  # trace ns
    Column("end_ts", BigInteger, nullable=False),
    Column("m", BigInteger),  # the Go M (= tid in Go 1.22+ traces); NULL otherwise
    Column("kind", String(8), nullable=False),  # on_cpu | waiting | asleep | unknown
    Column("state", String(8)),  # asleep: sleep (S), disk (D), or the kernel's letter
    Column("cpu", Integer, nullable=False),  # on_cpu: its CPU; waiting: the run queue's
    ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
    Index("ix_os_sched_intervals_window", "trace_id", "end_ts"),
    sqlite_with_rowid=False,
)

os_sched_recordings = Table(
    "os_sched_recordings",
    metadata,
    trace_key(),
    Column("sha256", String(64), nullable=False),  # of sched.parquet
    Column("method", String(24), nullable=False),  # how trace time maps to the wall clock
    Column("offset_ns", BigInteger),  # wall_ns = trace ns + offset_ns
    Column("partial", Boolean, nullable=False),
    Column("stopped_by", Text),
    Column("lost_events", BigInteger, nullable=False),
    Column("events", BigInteger, nullable=False),
    Column("intervals", BigInteger, nullable=False),
    Column("threads", Integer, nullable=False),
    Column("first_ts", BigInteger),  # the window recorded, trace ns
    Column("last_ts", BigInteger),
    Column("meta", Text, nullable=False),  # sched.parquet's gmpscope_sched metadata (JSON)
    Column("created_at", DateTime(timezone=True), nullable=False),
    ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
)
