"""Write a recording as ``poller.parquet`` and ``meta.json`` (docs/schema.md).

Both files are written under temporary names and renamed into place, so a
directory never holds a half-written recording.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from collectors.poller.ready import ReadyResolver
from collectors.poller.records import COLUMNS, KIND_SYSCALL, Row

SCHEMA_VERSION = "2"  # 2: ready_fds added (readers accept 1, without it)
POLLER_FILE = "poller.parquet"
META_FILE = "meta.json"

POLLER_SCHEMA = pa.schema(
    [
        ("ts_ns", pa.int64()),
        ("tid", pa.int64()),
        ("kind", pa.string()),
        ("name", pa.string()),
        ("duration_ns", pa.int64()),
        ("result", pa.int64()),
        ("errno", pa.string()),
        ("fd", pa.int64()),
        ("fd_path", pa.string()),
        ("new_fd", pa.int64()),
        ("new_fd_path", pa.string()),
        ("epfd", pa.int64()),
        ("op", pa.string()),
        ("events", pa.string()),
        ("timeout_ns", pa.int64()),
        ("maxevents", pa.int64()),
        ("count", pa.int64()),
        ("to_submit", pa.int64()),
        ("min_complete", pa.int64()),
        ("flags", pa.string()),
        ("path", pa.string()),
        ("addr", pa.string()),
        ("args", pa.string()),
        ("partial", pa.bool_()),
        ("ready_fds", pa.string()),
    ],
    metadata={b"schema_version": SCHEMA_VERSION.encode(), b"producer": b"gmpscope poller"},
)
assert tuple(POLLER_SCHEMA.names) == COLUMNS, "poller schema and Row fields disagree"

_INT64_MAX = 2**63 - 1


def rows_to_table(rows: Sequence[Row]) -> Any:
    """A pyarrow Table in POLLER_SCHEMA."""
    columns: dict[str, list[Any]] = {name: [] for name in COLUMNS}
    for row in rows:
        for name in COLUMNS:
            columns[name].append(getattr(row, name))
    # A futex word or a pointer-sized result can exceed int64 (never for the
    # covered calls, but strace prints whatever the kernel returned).
    columns["result"] = [
        None if v is None or not -_INT64_MAX <= v <= _INT64_MAX else v for v in columns["result"]
    ]
    return pa.table(columns, schema=POLLER_SCHEMA)


#: Rows converted to columns at a time: memory stays columnar, not one object per row.
_CHUNK_ROWS = 65536


@dataclass
class Summary:
    """Facts about a recording's rows, gathered while they stream by."""

    rows: int = 0
    syscalls: int = 0
    tids: set[int] = field(default_factory=set)
    first_ts_ns: int | None = None
    last_ts_ns: int | None = None  # the latest end (or entry, when the end is unknown)


def collect_table(rows: Iterable[Row]) -> tuple[Any, Summary]:
    """All rows as one table in entry-time order (then thread id), and their summary.

    The epoll waits' ``ready_fds`` are resolved here (:mod:`.ready`): that needs
    the registrations of the whole recording, which come in any order.
    """
    summary = Summary()
    chunks: list[Any] = []
    buf: list[Row] = []
    ready = ReadyResolver()
    for row in rows:
        ready.note(summary.rows, row)
        summary.rows += 1
        summary.syscalls += row.kind == KIND_SYSCALL
        summary.tids.add(row.tid)
        end = row.end_ns or row.ts_ns
        if summary.first_ts_ns is None or row.ts_ns < summary.first_ts_ns:
            summary.first_ts_ns = row.ts_ns
        if summary.last_ts_ns is None or end > summary.last_ts_ns:
            summary.last_ts_ns = end
        buf.append(row)
        if len(buf) >= _CHUNK_ROWS:
            chunks.append(rows_to_table(buf))
            buf = []
    chunks.append(rows_to_table(buf))
    table = pa.concat_tables(chunks)
    resolved = ready.resolve()
    if resolved:
        col = [resolved.get(i) for i in range(table.num_rows)]
        table = table.set_column(COLUMNS.index("ready_fds"), POLLER_SCHEMA.field("ready_fds"),
                                 pa.array(col, pa.string()))
    if table.num_rows:
        table = table.sort_by([("ts_ns", "ascending"), ("tid", "ascending")])
    return table, summary


def _replace_atomically(path: Path, write: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_recording(out_dir: Path, rows: Sequence[Row] | Any, meta: dict[str, Any]) -> None:
    """Write ``poller.parquet`` and ``meta.json`` into ``out_dir`` (created if needed).

    ``rows`` is a sequence of Row or a table from :func:`collect_table`.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    table = rows if isinstance(rows, pa.Table) else rows_to_table(rows)
    _replace_atomically(
        out_dir / POLLER_FILE,
        lambda p: pq.write_table(table, p, compression="zstd"),
    )
    full = {"schema_version": SCHEMA_VERSION, "kind": "poller", **meta}
    _replace_atomically(
        out_dir / META_FILE,
        lambda p: p.write_text(json.dumps(full, indent=2, ensure_ascii=False) + "\n"),
    )


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a poller.parquet file as dicts (for tests and small tools)."""
    rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    return rows
