"""The live sessions' tables (gmpscope live): docs/live.md. A session is a
stream of back-to-back windows pulled from one running service; each window
is ingested as an ordinary trace (a segment) and summarised per second.
Registered in the schema's one MetaData (ingest.store.schema_base); a
segment's trace outlives neither its session nor retention (SET NULL).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, DateTime, Float, ForeignKey, Integer, String, Table, Text

from ingest.store.schema_base import metadata

live_sessions = Table(
    "live_sessions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(128), nullable=False, unique=True),
    Column("target", Text, nullable=False),
    Column("state", String(16), nullable=False),  # "running" or "paused"
    Column("window_s", Float),
    Column("segments", BigInteger, nullable=False),  # windows stored so far
    Column("dropped", BigInteger, nullable=False),  # windows the collector dropped (buffer full)
    Column("target_failures", BigInteger, nullable=False),  # failed pulls reported
    Column("last_status", Text, nullable=False),  # the collector's last message
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

live_segments = Table(
    "live_segments",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("session_id", Integer, ForeignKey("live_sessions.id", ondelete="CASCADE"),
           nullable=False, index=True),
    Column("seq", BigInteger, nullable=False),  # the collector's window number
    # NULL once retention has deleted the window's detail (the trace).
    Column("trace_id", Integer, ForeignKey("traces.id", ondelete="SET NULL")),
    Column("wall_start_ns", BigInteger, nullable=False),  # window start, ns since the epoch
    Column("wall_end_ns", BigInteger, nullable=False),
    Column("first_ts", BigInteger),  # the trace's time span (trace ns)
    Column("last_ts", BigInteger),
    Column("size_bytes", BigInteger, nullable=False),
    Column("events", BigInteger, nullable=False),
    Column("ingest_ms", Float),
    Column("note", Text, nullable=False),  # e.g. the collector's gap report
    Column("findings", Text),  # JSON list: the diagnostics rules that fired on the window
    Column("created_at", DateTime(timezone=True), nullable=False),
)

#: Per-second aggregates of a session, one row per second of each window
#: (a window's last row may cover less than a second: ``duration_ns``).
live_seconds = Table(
    "live_seconds",
    metadata,
    Column("session_id", Integer, ForeignKey("live_sessions.id", ondelete="CASCADE"),
           primary_key=True),
    Column("segment_id", Integer, primary_key=True, autoincrement=False),
    Column("bin", Integer, primary_key=True, autoincrement=False),
    Column("t_ns", BigInteger, nullable=False, index=True),  # wall clock of the bin start
    Column("duration_ns", BigInteger, nullable=False),
    Column("g_running", Float, nullable=False),  # time-averaged goroutines per state
    Column("g_runnable", Float, nullable=False),
    Column("g_waiting", Float, nullable=False),
    Column("g_syscall", Float, nullable=False),
    Column("g_peak", BigInteger, nullable=False),  # most goroutines alive at once
    Column("g_waiting_peak", BigInteger, nullable=False),
    Column("g_created", BigInteger, nullable=False),
    Column("sched_n", BigInteger, nullable=False),  # Runnable->Running samples
    Column("sched_p50_ns", BigInteger),
    Column("sched_p99_ns", BigInteger),
    Column("sched_max_ns", BigInteger),
    Column("netpoll_waits", BigInteger, nullable=False),  # network waits that ended
    Column("netpoll_p99_ns", BigInteger),
    Column("syscalls", BigInteger, nullable=False),  # syscalls that began
    Column("p_handoffs", BigInteger, nullable=False),  # Ps taken from a syscall
    Column("gc_ns", BigInteger, nullable=False),  # GC range time in the bin
    Column("stw_ns", BigInteger, nullable=False),
    Column("heap_bytes", BigInteger),  # last /memory/classes/heap/objects:bytes
    Column("threads", BigInteger, nullable=False),  # Ms running or in a syscall
    Column("procs_running", Float, nullable=False),  # time-averaged running Ps
)

#: The OS side of a session's seconds (``gmpscope live --os``): one row per bin
#: of a segment whose window had an OS recording attached; same bins (and
#: ``t_ns``) as live_seconds. Sums of ns over the bin; docs/live.md.
live_os_seconds = Table(
    "live_os_seconds",
    metadata,
    Column("session_id", Integer, ForeignKey("live_sessions.id", ondelete="CASCADE"),
           primary_key=True),
    Column("segment_id", Integer, primary_key=True, autoincrement=False),
    Column("bin", Integer, primary_key=True, autoincrement=False),
    Column("t_ns", BigInteger, nullable=False, index=True),
    Column("duration_ns", BigInteger, nullable=False),
    Column("running_ns", BigInteger, nullable=False),  # goroutine Running on recorded Ms
    Column("offcpu_waiting_ns", BigInteger, nullable=False),  # ... while the M waited for a CPU
    Column("offcpu_asleep_ns", BigInteger, nullable=False),  # ... while the M was asleep
    Column("threads_oncpu_ns", BigInteger, nullable=False),  # the target's threads on a CPU
    Column("threads_waiting_ns", BigInteger, nullable=False),  # ... runnable, waiting for one
    Column("epoll_waits", BigInteger, nullable=False),  # epoll waits that returned in the bin
    Column("epoll_ready", BigInteger, nullable=False),  # the descriptors they returned ready
)
