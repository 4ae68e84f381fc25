"""PostgreSQL: the chunk rows of ingest.store.pg_chunks written and read as
arrays: a loader's columns cut on the id grid and sent by binary COPY (a
part's first chunk merged into the previous part's last), and an id range's
columns read back from the arrays' binary form, the interval chunks'
:data:`~ingest.store.pg_chunks.RELATIVE` arrays made absolute again.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection

from ingest.columns import Computed, Gather, Nullable, Seq
from ingest.store.pg_chunks import (
    CHUNK,
    CHUNKED,
    NULL_VALUE,
    OUTCOMES,
    RELATIVE,
    ArrayColumn,
    Chunked,
    with_starts,
)

Arr = npt.NDArray[Any]


# --------------------------------------------------------------------------
# writing


def _values(col: Any, dtype: str, n: int) -> Arr:
    arr = np.asarray(col)
    if len(arr) != n:
        raise ValueError(f"a column of {len(arr)} rows, not {n}")
    return arr


def _records(arrays: Sequence[ArrayColumn], cols: dict[str, Arr], a: int, k: int,
             size: int, first: int, trace_id: int) -> bytes:
    """``k`` chunk rows of ``size`` values each, the first at row ``a`` of
    ``cols`` with id ``first``, in COPY's binary format."""
    fields: list[tuple[Any, ...]] = [("nf", ">i2"), ("l_id", ">i4"), ("id", ">i8"),
                                     ("l_trace", ">i4"), ("trace", ">i4")]
    for j, ac in enumerate(arrays):
        fields += [(f"l{j}", ">i4"), (f"h{j}", ">i4", (5,)),
                   (f"v{j}", [("l", ">i4"), ("v", ac.dtype)], (size,))]
    rec = np.empty(k, dtype=np.dtype(fields))
    rec["nf"] = 2 + len(arrays)
    rec["l_id"] = 8
    rec["id"] = first + np.arange(k, dtype=np.int64) * size
    rec["l_trace"] = 4
    rec["trace"] = trace_id
    for j, ac in enumerate(arrays):
        item = np.dtype(ac.dtype).itemsize
        rec[f"l{j}"] = 20 + size * (4 + item)
        rec[f"h{j}"] = (1, 0, ac.oid, size, 1)
        v = rec[f"v{j}"]
        v["l"] = item
        v["v"] = cols[ac.name][a:a + k * size].reshape(k, size)
    return rec.tobytes()


def _from_send(data: bytes, ac: ArrayColumn) -> Arr:
    """An array's values from its binary form (array_send)."""
    n = struct.unpack_from(">i", data, 12)[0] if len(data) > 12 else 0
    rec = np.frombuffer(data, dtype=[("l", ">i4"), ("v", ac.dtype)], count=n, offset=20)
    return rec["v"]


def _take_head(conn: Connection, c: Chunked, trace_id: int, first: int
               ) -> tuple[int, dict[str, Arr]] | None:
    """The previous part's last chunk when ``first`` continues its grid cell:
    deleted, its (first id, values) returned to be written again with the
    part's first rows."""
    if (first - 1) % CHUNK == 0:
        return None
    sends = ", ".join(f"array_send({a.name})" for a in c.arrays)
    row = conn.exec_driver_sql(
        f"DELETE FROM {c.chunks} WHERE first_id BETWEEN {(first - 1) // CHUNK * CHUNK + 1} "
        f"AND {first - 1} AND trace_id = {int(trace_id)} RETURNING first_id, {sends}").first()
    if row is None:
        return None
    values = {a.name: _from_send(bytes(row[j + 1]), a) for j, a in enumerate(c.arrays)}
    k = len(values[c.arrays[0].name])
    if int(row[0]) + k != first:
        raise ValueError(f"{c.chunks}: the chunk at {row[0]} does not end before {first}")
    if c.chunks == "interval_chunks":
        values = {**values, **_relative(values, int(row[0]), k, encode=False)}
    return int(row[0]), values


def _relative(values: dict[str, Arr], first: int, n: int, encode: bool) -> dict[str, Arr]:
    """The interval chunks' :data:`RELATIVE` arrays of ``n`` rows with ids
    ``first``.. as kept (``encode``) or as the view shows them, from
    ``values``' ``start_ts`` and the other form: ``end_ts`` less (plus) the
    next row's ``start_ts`` where it is in the same grid cell, ``seq`` less
    (plus) the id."""
    ids = np.arange(first, first + n, dtype=np.int64)
    starts = np.asarray(values["start_ts"], np.int64)
    nxt = np.zeros(n, np.int64)
    if n > 1:
        same = (ids[1:] - 1) // CHUNK == (ids[:-1] - 1) // CHUNK
        nxt[:-1] = np.where(same, starts[1:], 0)
    sign = -1 if encode else 1
    return {"end_ts": np.asarray(values["end_ts"], np.int64) + sign * nxt,
            "seq": np.asarray(values["seq"], np.int64) + sign * ids}


def write_chunks(conn: Connection, name: str, trace_id: int, first: int,
                 cols: dict[str, Arr], n: int, advance: Callable[[int], None] | None = None
                 ) -> int:
    """Store ``n`` rows of ``name`` with ids ``first``.. (``cols``: one array
    per array column, NULLs as :data:`NULL_VALUE`) as chunk rows by binary
    COPY, in the caller's transaction; returns ``n``."""
    c = CHUNKED[name]
    if not n:
        return 0
    values = {a.name: _values(cols[a.name], a.dtype, n) for a in c.arrays}
    head = _take_head(conn, c, trace_id, first)
    if head is not None:
        first, old = head
        values = {k: np.concatenate([old[k].astype(v.dtype, copy=False), v])
                  for k, v in values.items()}
    total = len(values[c.arrays[0].name])
    if c.chunks == "interval_chunks":
        values = {**values, **_relative(values, first, total, encode=True)}
    # Row counts of the chunks: up to the grid's next multiple, then whole
    # cells, then the rest.
    lead = min(total, (-(first - 1)) % CHUNK)
    whole = (total - lead) // CHUNK
    tail = total - lead - whole * CHUNK
    cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    cols_sql = ", ".join(("first_id", "trace_id", *c.names))
    try:
        with cur.copy(f"COPY {c.chunks} ({cols_sql}) FROM STDIN (FORMAT BINARY)") as cp:
            cp.write(b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00")
            if lead:
                cp.write(_records(c.arrays, values, 0, 1, lead, first, trace_id))
            step = 64  # chunk rows per message
            for a in range(0, whole, step):
                k = min(step, whole - a)
                cp.write(_records(c.arrays, values, lead + a * CHUNK, k, CHUNK,
                                  first + lead + a * CHUNK, trace_id))
                if advance:
                    advance(k * CHUNK)
            if tail:
                at = lead + whole * CHUNK
                cp.write(_records(c.arrays, values, at, 1, tail, first + at, trace_id))
            cp.write(b"\xff\xff")
    finally:
        cur.close()
    if advance:
        advance(n - whole * CHUNK)
    return n


#: Rows per COPY of a loader's table: what one part's columns take (8 bytes a
#: row each).
PART = 1 << 20


def store_table(conn: Connection, trace_id: int, name: str, cols: dict[str, Any], n: int,
                interval_base: int, advance: Callable[[int], None] | None = None) -> None:
    """Store the loader's next ``n`` rows of ``name`` (intervals, proc_runs or
    syscalls: the derived columns, an ``id`` Seq among them; a proc run's and
    a syscall's ``interval_row`` its row in the trace's intervals, whose ids
    start at ``interval_base``) as chunk rows, a part at a time."""
    first = cols["id"]
    if not isinstance(first, Seq):
        raise TypeError(f"{name}: rows without consecutive ids")
    cols = dict(cols)
    if name != "intervals":
        row = cols["interval_row"]

        def interval_id(a: int, b: int) -> Arr:
            return np.asarray(row[a:b], np.int64) + interval_base

        cols["interval_id"] = Computed(interval_id, n)
    if name == "syscalls":
        outcome = cols["outcome"]
        if not (isinstance(outcome, Gather) and tuple(outcome.values.tolist()) == OUTCOMES):
            raise ValueError("the syscalls' outcomes are not pg_chunks.OUTCOMES")
        cols["outcome"] = outcome.index
    for a in range(0, n, PART):
        b = min(n, a + PART)
        part = {x: _part(cols[x], a, b) for x in CHUNKED[name].names}
        write_chunks(conn, name, trace_id, first.start + a, part, b - a, advance)
        del part


def _part(col: Any, a: int, b: int) -> Arr:
    """Rows a..b-1 of a loader's column as an array (NULL as NULL_VALUE)."""
    if isinstance(col, Computed):
        return col.chunk(a, b)
    if isinstance(col, Gather):
        return col.values[col.index[a:b]]
    if isinstance(col, Nullable):
        return np.where(col.null[a:b], NULL_VALUE,
                        np.asarray(col.values[a:b]).astype(np.int64, copy=False))
    return np.asarray(col[a:b])


def last_id(conn: Connection, name: str) -> int:
    """The largest id stored in ``name``'s chunks (0: none)."""
    c = CHUNKED[name]
    row = conn.exec_driver_sql(
        f"SELECT first_id + cardinality({c.arrays[0].name}) - 1 FROM {c.chunks} "
        "ORDER BY first_id DESC LIMIT 1").first()
    return 0 if row is None else int(row[0])


# --------------------------------------------------------------------------
# reading


def read_block(conn: Connection, name: str, cols: Sequence[str], lo: int, hi: int
               ) -> dict[str, Arr]:
    """Columns ``cols`` (array columns of ``name``'s chunks) of ids lo..hi, in
    id order, read as the arrays' binary form: each chunk's values at once."""
    c = CHUNKED[name]
    by_name = {a.name: a for a in c.arrays}
    asked, cols = cols, with_starts(cols) if c.chunks == "interval_chunks" else tuple(cols)
    sends = ", ".join(f"array_send({x})" for x in cols)
    parts: dict[str, list[Arr]] = {x: [] for x in cols}
    firsts: list[int] = []
    cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cur.execute(f"SELECT first_id, {sends} FROM {c.chunks} "
                    f"WHERE first_id BETWEEN {(int(lo) - 1) // CHUNK * CHUNK + 1} AND {int(hi)} "
                    "ORDER BY first_id", binary=True)  # bytea as bytes, not hex text
        for row in cur:
            firsts.append(int(row[0]))
            for j, x in enumerate(cols):
                parts[x].append(_from_send(bytes(row[j + 1]), by_name[x]))
    finally:
        cur.close()
    if not firsts:
        return {x: np.zeros(0, np.dtype(by_name[x].dtype).newbyteorder("=")) for x in asked}
    sizes = np.array([len(p) for p in parts[cols[0]]], np.int64)
    ids = np.repeat(np.array(firsts, np.int64), sizes) + (
        np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes))
    keep: Arr | None = None
    if firsts[0] < lo or firsts[-1] + int(sizes[-1]) - 1 > hi:  # chunks cut by the range
        keep = (ids >= lo) & (ids <= hi)
    whole: dict[str, Arr] = {}
    for x in cols:
        joined = np.concatenate(parts[x])
        whole[x] = joined.astype(joined.dtype.newbyteorder("="))
    if c.chunks == "interval_chunks" and any(x in RELATIVE for x in asked):
        last = np.zeros(len(ids), bool)  # a chunk's last row: nothing after it to add
        last[np.cumsum(sizes) - 1] = True
        if "end_ts" in whole:
            nxt = np.zeros(len(ids), np.int64)
            nxt[:-1] = whole["start_ts"][1:]
            whole["end_ts"] = whole["end_ts"] + np.where(last, 0, nxt)
        if "seq" in whole:
            whole["seq"] = whole["seq"] + ids
    return {x: whole[x] if keep is None else whole[x][keep] for x in asked}
