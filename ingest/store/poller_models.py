"""The OS-side recordings' tables (gmpscope record, docs/poller.md): one row
per syscall, signal or thread exit strace saw, attached to a Go trace of the
same run or stored on its own as a trace of source "poller" (family "os").
Both are a trace's rows (ingest.store.models.TRACE_TABLES): deleted with it.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKeyConstraint,
    Integer,
    String,
    Table,
    Text,
)

from ingest.store.schema_base import metadata, trace_key, traces_fk

poller_events = Table(
    "poller_events",
    metadata,
    trace_key(),
    traces_fk(),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),  # entry-time order
    Column("ts", BigInteger),  # trace ns (wall_ns - offset); NULL when it cannot be aligned
    Column("wall_ns", BigInteger, nullable=False),
    Column("tid", BigInteger, nullable=False),
    Column("m", BigInteger),  # the Go M (= tid in Go 1.22+ traces); NULL otherwise
    Column("kind", String(8), nullable=False),  # syscall | signal | exit
    Column("syscall", String(32), nullable=False),  # syscall, signal or exit name
    Column("fd", BigInteger),
    Column("fd_kind", String(16)),  # tcp, udp, unix, eventpoll, io_uring, pipe, file, ...
    Column("fd_path", Text),
    Column("new_fd", BigInteger),
    Column("new_fd_path", Text),
    Column("epfd", BigInteger),
    Column("op", String(48)),
    Column("events", Text),
    Column("timeout_ns", BigInteger),  # -1: no timeout
    Column("maxevents", BigInteger),
    Column("count", BigInteger),
    Column("to_submit", BigInteger),
    Column("min_complete", BigInteger),
    Column("flags", Text),
    Column("path", Text),
    Column("addr", Text),
    Column("args", Text),
    Column("partial", Boolean, nullable=False),
    Column("result", BigInteger),
    Column("errno", String(24)),
    Column("duration_ns", BigInteger),
    # Revision 0012: epoll waits' descriptors returned ready, "7,9,?" (collectors/poller/ready.py).
    Column("ready_fds", Text),
    sqlite_with_rowid=False,
)

#: io_uring requests of an eBPF recording (uring.parquet), revision 0012. A
#: handful of rows per trace: a plain foreign key with ON DELETE CASCADE on both
#: dialects deletes them with their trace (the PostgreSQL trigger that deletes
#: the big tables' rows need not know this one).
poller_uring = Table(
    "poller_uring",
    metadata,
    trace_key(),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),  # submission order
    Column("tid", BigInteger, nullable=False),  # the submitting thread
    Column("submit_wall_ns", BigInteger, nullable=False),
    Column("complete_wall_ns", BigInteger),  # NULL: in flight when the recording ended
    Column("ts", BigInteger),  # submission in trace ns; NULL when it cannot be aligned
    Column("latency_ns", BigInteger),
    Column("ring", BigInteger),  # the ring's kernel address (one per io_uring instance)
    Column("user_data", BigInteger),
    Column("opcode", String(24), nullable=False),
    Column("result", BigInteger),
    Column("cflags", BigInteger),
    ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
)

poller_recordings = Table(
    "poller_recordings",
    metadata,
    trace_key(),
    traces_fk(),
    Column("sha256", String(64), nullable=False),  # of poller.parquet
    Column("name", Text, nullable=False),
    Column("standalone", Boolean, nullable=False),  # the trace is this recording alone
    Column("method", String(24), nullable=False),  # clock-snapshot | monotonic-clock |
    # syscall-matching | none | wall-clock (standalone: trace ns are wall ns)
    Column("offset_ns", BigInteger),  # wall_ns = trace ns + offset_ns
    Column("quality", Float),  # share of Go syscalls containing an OS call once aligned
    Column("slack_ns", BigInteger),  # width of the offset range syscall pairs allow
    Column("go_syscalls", BigInteger),
    Column("matched", BigInteger),
    Column("note", Text, nullable=False),
    Column("rows", BigInteger, nullable=False),
    Column("syscalls", BigInteger, nullable=False),
    Column("signals", BigInteger, nullable=False),
    Column("exits", BigInteger, nullable=False),
    Column("unknown_lines", BigInteger, nullable=False),
    Column("threads", Integer, nullable=False),
    Column("mode", String(16)),  # spawn | attach
    Column("command", Text, nullable=False),  # JSON list
    Column("stopped_by", String(16)),
    Column("first_wall_ns", BigInteger),
    Column("last_wall_ns", BigInteger),
    Column("traced_wall_s", Float),
    Column("baseline_wall_s", Float),
    Column("slowdown", Float),
    Column("strace_cpu_s", Float),
    Column("strace_version", Text),
    Column("meta", Text, nullable=False),  # the recording's meta.json
    Column("created_at", DateTime(timezone=True), nullable=False),
)
