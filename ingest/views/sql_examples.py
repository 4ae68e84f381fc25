"""The SQL page's example queries (docs/sql.md#examples), for one trace.

Written against the documented names only (docs/schema.md: ``syscalls``,
``stacks``, ``interval_view``, ``goroutines``), so they keep working whatever
stores the intervals. Where SQLite and PostgreSQL differ (joining a stack's
frames into one string) each database gets its own spelling.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Engine, text

#: Channel operations a goroutine blocks in (Go's reason strings, the same in
#: both trace families: collectors/gotrace/v1/convert.py).
CHANNEL_REASONS = ("chan receive", "chan send", "select")
#: "Blocked more than 10 ms".
BLOCKED_NS = 10_000_000


@dataclass(frozen=True)
class Example:
    """One example: its key, its title, what it shows and its SQL."""

    name: str
    title: str
    what: str
    sql: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _stack_text(dialect: str, trace: str, stack: str) -> str:
    """A scalar subquery: a stack's functions, innermost first, joined by ' <- '."""
    where = (f"k.trace_id = {trace} AND k.stack_id = {stack}")
    if dialect == "postgresql":
        return (f"(SELECT string_agg(k.function, ' <- ' ORDER BY k.depth)\n"
                f"          FROM stacks k WHERE {where})")
    # SQLite before 3.44 has no ORDER BY inside an aggregate: group_concat
    # takes the rows in the order of the ordered subquery.
    return (f"(SELECT group_concat(f, ' <- ') FROM\n"
            f"          (SELECT k.function AS f FROM stacks k\n"
            f"           WHERE {where} ORDER BY k.depth))")


def examples(dialect: str, trace_id: int) -> list[Example]:
    """The examples for trace ``trace_id``, in ``dialect``'s SQL."""
    t = int(trace_id)
    reasons = ", ".join(f"'{r}'" for r in CHANNEL_REASONS)
    return [
        Example(
            name="longest-syscalls",
            title="Longest syscalls with their stacks",
            what="The 20 longest syscalls: goroutine, duration, what happened to its P, "
                 "and the stack it entered the syscall from (innermost first).",
            sql=(f"SELECT s.goid, s.start_ts, s.duration_ns, s.outcome, s.p_lost,\n"
                 f"       {_stack_text(dialect, 's.trace_id', 's.stack_id')} AS stack\n"
                 f"FROM syscalls s\n"
                 f"WHERE s.trace_id = {t}\n"
                 f"ORDER BY s.duration_ns DESC, s.id\n"
                 f"LIMIT 20"),
        ),
        Example(
            name="channel-blocked",
            title="Goroutines blocked more than 10 ms on a channel",
            what="Every wait on a channel operation (receive, send, select) longer than "
                 "10 ms, longest first, with the goroutine's start function.",
            sql=(f"SELECT v.rid AS goid, g.start_function, v.reason, v.start_ts,\n"
                 f"       v.duration_ns, v.stack_id\n"
                 f"FROM interval_view v\n"
                 f"LEFT JOIN goroutines g ON g.trace_id = v.trace_id AND g.goid = v.rid\n"
                 f"WHERE v.trace_id = {t} AND v.resource = 'goroutine'\n"
                 f"  AND v.state = 'Waiting' AND v.reason IN ({reasons})\n"
                 f"  AND v.duration_ns > {BLOCKED_NS}\n"
                 f"ORDER BY v.duration_ns DESC, v.id"),
        ),
        Example(
            name="time-per-state-per-p",
            title="Time per state per P",
            what="How long each P (proc) spent in each state, and in how many intervals.",
            sql=(f"SELECT rid AS p, state, count(*) AS intervals,\n"
                 f"       sum(duration_ns) AS total_ns\n"
                 f"FROM interval_view\n"
                 f"WHERE trace_id = {t} AND resource = 'proc'\n"
                 f"GROUP BY rid, state\n"
                 f"ORDER BY rid, state"),
        ),
    ]


def example_by_name(dialect: str, trace_id: int, name: str) -> Example:
    """One example by its key; KeyError for an unknown key."""
    for ex in examples(dialect, trace_id):
        if ex.name == name:
            return ex
    raise KeyError(name)


def newest_trace_id(engine: Engine) -> int | None:
    """The newest stored trace's id (the examples' default), None when none is."""
    with engine.connect() as conn:
        value = conn.execute(text("SELECT max(id) FROM traces")).scalar()
    return None if value is None else int(value)
