"""Write a decoded trace as Parquet: the contract between collectors and ingest.

Layout of the output directory (documented in docs/schema.md):

- ``transitions.parquet``: one row per StateTransition, in Go's order;
- ``events.parquet``: every other event, with ``seq`` = its position in the
  whole event stream, so that the two files interleave back losslessly;
- ``transition_stacks.parquet``: the transition stack of rows whose
  transition stack differs from the event stack (goroutine creation);
- ``stacks.parquet``: one row per frame of every stack;
- ``meta.json``: facts about the trace and its decoding.

Rows are buffered per chunk and written as row groups, so memory stays
bounded by the chunk size, not by the trace.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped]

if TYPE_CHECKING:
    # Imported where files are written: a decode into memory (gmpscope
    # ingest of a raw trace) needs the schemas here, not Parquet (~20 ms
    # and ~10 MB of a process's memory; docs/ingest.md).
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

from collectors.gotrace.model import Event, StackTable, TraceInfo

SCHEMA_VERSION = "1"
_CHUNK_ROWS = 65536
_META = {b"schema_version": SCHEMA_VERSION.encode()}

TRANSITIONS_SCHEMA = pa.schema(
    [
        ("ts", pa.int64()),
        ("resource", pa.string()),
        ("id", pa.int64()),
        ("from_state", pa.string()),
        ("to_state", pa.string()),
        ("reason", pa.string()),
        ("m", pa.int64()),
        ("p", pa.int64()),
        ("g", pa.int64()),
        ("stack_id", pa.int64()),
    ],
    metadata=_META,
)

EVENTS_SCHEMA = pa.schema(
    [
        ("seq", pa.int64()),
        ("kind", pa.string()),
        ("ts", pa.int64()),
        ("m", pa.int64()),
        ("p", pa.int64()),
        ("g", pa.int64()),
        ("stack_id", pa.int64()),
        ("name", pa.string()),
        ("value", pa.uint64()),
        ("value_str", pa.string()),
        ("scope", pa.string()),
        ("scope_id", pa.int64()),
        ("attrs", pa.string()),
        ("task_id", pa.uint64()),
        ("parent_task_id", pa.uint64()),
        ("category", pa.string()),
        ("message", pa.string()),
        ("sync_n", pa.int64()),
        ("clock_trace_ns", pa.int64()),
        ("clock_mono_ns", pa.int64()),
        ("clock_wall_ns", pa.int64()),
    ],
    metadata=_META,
)

TRANSITION_STACKS_SCHEMA = pa.schema(
    [("row", pa.int64()), ("stack_id", pa.int64())], metadata=_META
)

STACKS_SCHEMA = pa.schema(
    [
        ("stack_id", pa.int64()),
        ("depth", pa.int32()),
        ("function", pa.string()),
        ("file", pa.string()),
        ("line", pa.int64()),
        ("pc", pa.uint64()),
    ],
    metadata=_META,
)


#: Compression of every file (chosen by measurement, see docs/decoder.md).
PARQUET_COMPRESSION = "lz4"
PARQUET_COMPRESSION_LEVEL: int | None = None
#: Delta encoding: ``ts`` and ``seq`` are monotonic, ids and stack ids vary
#: little between neighbouring rows; faster and smaller than a dictionary.
_DELTA_COLUMNS = ("ts", "seq", "id", "stack_id", "p", "m")


def writer_options(schema: pa.Schema) -> dict[str, Any]:
    """ParquetWriter options used by both writers (pure and C paths), so both
    write the same encodings.

    Dictionary pages only for the string columns (the int64 columns are
    nearly unique: trying a dictionary first wastes time); statistics only
    for the non-string columns (min/max of strings cost time and prune
    nothing useful); delta encoding for ``ts`` and ``seq``. The Arrow schema
    is not stored, so readers see the Parquet types (strings as ``string``)
    even when the C path hands dictionary arrays to the writer; open_writer
    stores the schema's metadata as the file's key-value metadata instead.
    """
    strings = [f.name for f in schema if pa.types.is_string(f.type)
               or pa.types.is_dictionary(f.type)]
    others = [f.name for f in schema if f.name not in strings]
    delta = {n: "DELTA_BINARY_PACKED" for n in _DELTA_COLUMNS if n in schema.names}
    return {
        "compression": PARQUET_COMPRESSION,
        "compression_level": PARQUET_COMPRESSION_LEVEL,
        "use_dictionary": strings,
        "write_statistics": others,
        "column_encoding": delta or None,
        "store_schema": False,
    }


def open_writer(path: Path, schema: pa.Schema) -> pq.ParquetWriter:
    """A ParquetWriter with writer_options and the schema's metadata
    (``schema_version``) in the file's key-value metadata."""
    import pyarrow.parquet as pq

    w = pq.ParquetWriter(str(path), schema, **writer_options(schema))
    if schema.metadata:
        w.add_key_value_metadata(schema.metadata)
    return w


class _ChunkedWriter:
    """Buffers rows column-wise and writes a row group per chunk."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self.schema = schema
        self.columns: list[list[Any]] = [[] for _ in schema.names]
        self.rows = 0
        self._writer = open_writer(path, schema)

    def flush(self) -> None:
        if not self.columns[0]:
            return
        arrays = [pa.array(col, type=f.type)
                  for col, f in zip(self.columns, self.schema, strict=True)]
        self._writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema))
        for col in self.columns:
            col.clear()

    def maybe_flush(self) -> None:
        if len(self.columns[0]) >= _CHUNK_ROWS:
            self.flush()

    def close(self) -> None:
        self.flush()
        self._writer.close()


def utf8_text(s: str) -> str:
    """``s`` as valid UTF-8 text for Parquet.

    The decoder keeps bytes that are not UTF-8 as lone surrogates
    (``surrogateescape``), which Parquet cannot store: they become U+FFFD,
    exactly as Python's ``bytes.decode("utf-8", "replace")`` does (the C
    decoder writes the same).
    """
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


class _TextCache(dict[str, str]):
    """Memoises utf8_text: trace strings repeat a great deal."""

    def __missing__(self, key: str) -> str:
        value = self[key] = utf8_text(key)
        return value


def _attrs_json(ev: Event) -> str | None:
    if not ev.attrs:
        return None
    return utf8_text(json.dumps([[k, v] for k, v in ev.attrs], ensure_ascii=False))


def write_parquet(
    events: Iterable[Event],
    stacks: StackTable,
    info_after: Callable[[], TraceInfo],
    out_dir: Path,
    source: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Consume ``events`` and write the Parquet directory; return meta.json's content.

    ``info_after`` is called once the events are exhausted, because facts such
    as the generation count or the loss are only known at the end.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    tw = _ChunkedWriter(out_dir / "transitions.parquet", TRANSITIONS_SCHEMA)
    ew = _ChunkedWriter(out_dir / "events.parquet", EVENTS_SCHEMA)
    sw = _ChunkedWriter(out_dir / "transition_stacks.parquet", TRANSITION_STACKS_SCHEMA)
    t_cols, e_cols, s_cols = tw.columns, ew.columns, sw.columns
    kinds: Counter[str] = Counter()
    first_ts: int | None = None
    last_ts = 0
    first_clock = None
    seq = 0
    n_trans = 0
    text = _TextCache()
    try:
        for ev in events:
            kinds[ev.kind] += 1
            if first_ts is None:
                first_ts = ev.ts
            last_ts = ev.ts
            if ev.kind == "StateTransition":
                for col, val in zip(
                    t_cols,
                    (ev.ts, ev.resource, ev.rid, ev.from_state, ev.to_state, text[ev.reason],
                     ev.m, ev.p, ev.g, ev.stack),
                    strict=True,
                ):
                    col.append(val)
                if ev.tstack and ev.tstack != ev.stack:
                    s_cols[0].append(n_trans)
                    s_cols[1].append(ev.tstack)
                    sw.maybe_flush()
                n_trans += 1
                tw.maybe_flush()
            else:
                value = ev.value if isinstance(ev.value, int) else None
                value_str = text[ev.value] if isinstance(ev.value, str) else None
                clock = ev.clock
                if clock is not None and first_clock is None:
                    first_clock = clock
                task = ev.task if ev.kind in _TASK_KINDS else None
                parent = ev.parent if ev.kind in ("TaskBegin", "TaskEnd") else None
                for col, val in zip(
                    e_cols,
                    (seq, ev.kind, ev.ts, ev.m, ev.p, ev.g, ev.stack, text[ev.name] or None,
                     value, value_str, ev.scope or None,
                     ev.scope_id if ev.scope else None, _attrs_json(ev), task, parent,
                     text[ev.category] or None, text[ev.message] or None,
                     ev.n if ev.kind == "Sync" else None,
                     clock.trace_ns if clock else None, clock.mono_ns if clock else None,
                     clock.wall_ns if clock else None),
                    strict=True,
                ):
                    col.append(val)
                ew.maybe_flush()
            seq += 1
    finally:
        tw.close()
        ew.close()
        sw.close()
    _write_stacks(stacks, out_dir / "stacks.parquet", text)
    info = info_after()
    meta: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "go_version": info.go_version,
        "family": info.family,
        "ticks_per_sec": info.ticks_per_sec,
        "generations": info.generations,
        "first_ts": first_ts if first_ts is not None else 0,
        "last_ts": last_ts,
        "wall_clock": (
            {"trace_ns": first_clock.trace_ns, "mono_ns": first_clock.mono_ns,
             "wall_ns": first_clock.wall_ns}
            if first_clock else None
        ),
        "events": seq,
        "transitions": n_trans,
        "event_counts": dict(sorted(kinds.items())),
        "stacks": len(stacks),
        "loss": asdict(info.loss),
        "source": source,
    }
    tmp = out_dir / "meta.json.tmp"
    tmp.write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    os.replace(tmp, out_dir / "meta.json")
    return meta


_TASK_KINDS = frozenset({"TaskBegin", "TaskEnd", "RegionBegin", "RegionEnd", "Log"})


def _write_stacks(stacks: StackTable, path: Path, text: dict[str, str]) -> None:
    w = _ChunkedWriter(path, STACKS_SCHEMA)
    cols = w.columns
    try:
        for sid, frames in stacks.items():
            for depth, fr in enumerate(frames):
                row = (sid, depth, text[fr.func], text[fr.file], fr.line, fr.pc)
                for col, val in zip(cols, row, strict=True):
                    col.append(val)
            w.maybe_flush()
    finally:
        w.close()


def source_facts(path: Path, data: bytes | memoryview) -> dict[str, Any]:
    """meta.json's ``source``: the trace file's name, and size and sha256 of
    its content, hashed from the bytes already in memory (no second read)."""
    return {"name": path.name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
