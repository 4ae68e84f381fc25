"""Fast path for Go 1.22+ traces: the C decoder (``_v2fast``) produces column
chunks that go straight into Parquet row groups, with no per-event Python
objects.

The output is the same, row for row and value for value (and row group for
row group, schema and metadata included), as
:func:`collectors.gotrace.parquet_out.write_parquet` fed by the pure-Python
decoder; the C code mirrors ``collectors/gotrace/v2`` step by step, errors
and loss included. Both write with parquet_out.writer_options; the
low-cardinality string columns (transitions' resource, from_state, to_state,
reason; events' kind and scope) come out of C as dictionary indices and go to
the writer as dictionary arrays, so Parquet writes their dictionary pages
without hashing every value; readers still see ``string`` columns. Strings
that are not valid UTF-8 are stored with U+FFFD replacements (as
``bytes.decode("utf-8", "replace")``), where the pure writer cannot store
them at all. Used by ``gmpscope decode`` (collectors/gotrace/todir.py) when
the extension is built and ``GMPSCOPE_PURE`` is not ``1``.
"""

from __future__ import annotations

import json
import mmap
import os
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]

from collectors.gotrace.errors import TraceFormatError
from collectors.gotrace.model import KINDS
from collectors.gotrace.parquet_out import (
    EVENTS_SCHEMA,
    SCHEMA_VERSION,
    STACKS_SCHEMA,
    TRANSITION_STACKS_SCHEMA,
    TRANSITIONS_SCHEMA,
    open_writer,
)
from collectors.gotrace.reader import read_header

try:
    from collectors.gotrace import _v2fast
except ImportError:  # not built: callers fall back to the pure-Python decoder
    _v2fast = None  # type: ignore[assignment]

#: Rows per row group, as parquet_out writes them.
CHUNK_ROWS = 65536
#: Row groups waiting per file writer: bounds memory while decoding runs ahead.
_QUEUE_DEPTH = 2
#: Fixed dictionaries of the columns C writes as indices (out.c numbers them
#: the same way); transitions' reason dictionary comes from the decoder.
#: "Bad" (a proc's bad wire status) joins the state dictionaries only once
#: a row uses it: readers that map dictionaries to codes need not know it.
_STATES = ["Undetermined", "NotExist", "Runnable", "Running", "Waiting", "Syscall", "Idle"]
_DICTIONARIES: dict[tuple[str, str], list[str] | None] = {
    ("transitions", "resource"): ["goroutine", "proc"],
    ("transitions", "from_state"): _STATES,
    ("transitions", "to_state"): _STATES,
    ("transitions", "reason"): None,
    ("events", "kind"): list(KINDS),
    ("events", "scope"): ["goroutine", "global", "proc"],
}
_DICT_TYPE = pa.dictionary(pa.int32(), pa.string())
#: The events' text columns a group table holds as indices into
#: ChunkDecoder.event_strings (out.c's estrings).
STRING_ID_COLUMNS = frozenset({"name", "category", "message"})


def _write_schema(name: str, schema: pa.Schema) -> pa.Schema:
    """``schema`` with the dictionary-index columns typed as dictionaries."""
    fields = [f.with_type(_DICT_TYPE) if (name, f.name) in _DICTIONARIES else f for f in schema]
    return pa.schema(fields, metadata=schema.metadata)


_Column = tuple[Any, Any, Any]  # buffer-protocol objects (data, offsets, validity)
#: [(kinds, events columns), ...]: ChunkDecoder's groups of events.
EventGroups = Sequence[tuple[Sequence[str], Sequence[str]]]


def available() -> bool:
    """True when the C extension is importable and not disabled by GMPSCOPE_PURE=1."""
    return _v2fast is not None and os.environ.get("GMPSCOPE_PURE", "") != "1"


def _array(typ: pa.DataType, rows: int, col: _Column, dictionary: pa.Array | None) -> pa.Array:
    data, offsets, valid = col
    vbuf = pa.py_buffer(valid) if valid is not None else None
    if dictionary is not None:
        indices = pa.Array.from_buffers(pa.int32(), rows, [vbuf, pa.py_buffer(data)])
        # C only writes indices below the dictionary's length: skip the check.
        return pa.DictionaryArray.from_arrays(indices, dictionary, safe=False)
    if offsets is not None:
        return pa.Array.from_buffers(typ, rows, [vbuf, pa.py_buffer(offsets), pa.py_buffer(data)])
    return pa.Array.from_buffers(typ, rows, [vbuf, pa.py_buffer(data)])


class ChunkDecoder:
    """Iterates the C decoder's chunks as Arrow tables.

    ``chunks()`` yields (name, table) with name ``transitions``, ``events``
    or ``transition_stacks``; each table is one row group of that file, with
    the schema ``write_schemas[name]`` (dictionary arrays for the
    low-cardinality string columns). With ``event_groups`` ([(kinds,
    columns), ...]) the events come instead as ``events/<g>``: the events
    of group g's kinds with its columns only (``group_schemas[g]``), those
    of a kind in no group left out: a reader that splits the events by kind
    gets them apart, without the other kinds' rows and columns. A group's
    ``name``, ``category`` and ``message`` (:data:`STRING_ID_COLUMNS`) are
    int32 indices into :attr:`event_strings` (null where the event has
    none): each distinct string crosses into Python once, not once per row
    group that holds it (a 200 MB trace's 1.4 M log messages are 288 k).
    ``result()`` and ``stacks_tables()`` are complete once it is exhausted.
    """

    SCHEMAS = (TRANSITIONS_SCHEMA, EVENTS_SCHEMA, TRANSITION_STACKS_SCHEMA)
    NAMES = ("transitions", "events", "transition_stacks")

    def __init__(self, data: bytes | memoryview | mmap.mmap,
                 event_groups: EventGroups | None = None) -> None:
        if _v2fast is None:
            raise RuntimeError("the C decoder (collectors.gotrace._v2fast) is not built")
        version, family = read_header(data[:16])
        if family != "v2":
            raise ValueError(f"the fast decoder reads Go 1.22+ traces, not {version}")
        self.version = version
        self.size = len(data)
        self.write_schemas = {n: _write_schema(n, s) for n, s in zip(self.NAMES, self.SCHEMAS,
                                                                     strict=True)}
        #: With event_groups: each group's table schema (the events columns it
        #: names, in the events table's order).
        self.group_schemas: list[pa.Schema] = []
        #: With event_groups: the strings the groups' STRING_ID_COLUMNS index,
        #: complete up to the last table yielded (it only grows).
        self.event_strings: list[str] = []
        masks = None
        if event_groups is not None:
            wide = self.write_schemas["events"]
            masks = []
            for kinds, columns in event_groups:
                unknown = sorted({*kinds} - {*KINDS}) + sorted({*columns} - {*wide.names})
                if unknown:
                    raise ValueError(f"event groups: no kind or events column {unknown}")
                masks.append((sum(1 << KINDS.index(k) for k in set(kinds)),
                              sum(1 << wide.names.index(c) for c in set(columns))))
                self.group_schemas.append(pa.schema(
                    [f.with_type(pa.int32()) if f.name in STRING_ID_COLUMNS else f
                     for f in wide if f.name in columns], metadata=wide.metadata))
        self._dec = _v2fast.Decoder(data, int(version.split(".")[1]), masks)
        self._fixed = {k: pa.array(v, pa.string()) for k, v in _DICTIONARIES.items()
                       if v is not None}
        self._reasons = pa.array([], pa.string())

    def _table(self, name: str, rows: int, cols: list[_Column],
               schema: pa.Schema | None = None) -> pa.Table:
        if schema is not None:  # a group's: the strings its indices may name
            self.event_strings += self._dec.event_strings(len(self.event_strings))
        schema = schema if schema is not None else self.write_schemas[name]
        if name == "transitions":
            reasons, bad = self._dec.dictionaries()
            if len(reasons) != len(self._reasons):  # the dictionary only grows
                self._reasons = pa.array(reasons, pa.string())
            if bad and len(self._fixed[("transitions", "from_state")]) == len(_STATES):
                self._fixed[("transitions", "from_state")] = pa.array([*_STATES, "Bad"])
        arrays = []
        for f, c in zip(schema, cols, strict=True):
            key = (name, f.name)
            dictionary = (self._reasons if key == ("transitions", "reason")
                          else self._fixed.get(key))
            arrays.append(_array(f.type, rows, c, dictionary))
        return pa.Table.from_arrays(arrays, schema=schema)

    def chunks(self, release: Callable[[int], None] | None = None
               ) -> Iterator[tuple[str, Any]]:
        """Yield (file name, Arrow table) per row group, in decoding order;
        ``release(n)`` hears, after each step, that the first ``n`` bytes of
        the data will not be read again."""
        while True:
            got = self._dec.next_chunk(CHUNK_ROWS)
            if release is not None:
                release(self._dec.consumed())
            if got is None:
                return
            for which, rows, cols in got:
                if which >= len(self.NAMES):  # a group's events
                    g = which - len(self.NAMES)
                    yield f"events/{g}", self._table("events", rows, cols, self.group_schemas[g])
                    continue
                name = self.NAMES[which]
                yield name, self._table(name, rows, cols)

    def result(self) -> dict[str, Any]:
        """Facts known at the end: counts, loss, clock (raw form from C)."""
        res: dict[str, Any] = self._dec.result()
        return res

    def stacks_tables(self) -> list[pa.Table]:
        """stacks.parquet as the row groups parquet_out writes."""
        rows, cols, bounds = self._dec.stacks()
        sid, depth, fn, fno, fl, flo, line, pc = cols
        arrays = [
            pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(sid)]),
            pa.Array.from_buffers(pa.int32(), rows, [None, pa.py_buffer(depth)]),
            pa.Array.from_buffers(pa.string(), rows, [None, pa.py_buffer(fno), pa.py_buffer(fn)]),
            pa.Array.from_buffers(pa.string(), rows, [None, pa.py_buffer(flo), pa.py_buffer(fl)]),
            pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(line)]),
            pa.Array.from_buffers(pa.uint64(), rows, [None, pa.py_buffer(pc)]),
        ]
        table = pa.Table.from_arrays(arrays, schema=STACKS_SCHEMA)
        out = []
        start = 0
        for end in [*bounds, rows]:
            if end > start:
                out.append(table.slice(start, end - start))
            start = end
        return out


class _FileWriter:
    """Writes the row groups of one Parquet file in a background thread."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self._queue: queue.Queue[pa.Table | None] = queue.Queue(_QUEUE_DEPTH)
        self._error: BaseException | None = None
        self._writer = open_writer(path, schema)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            table = self._queue.get()
            if table is None:
                return
            if self._error is None:
                try:
                    self._writer.write_table(table)
                except BaseException as e:  # handed to the caller in close()
                    self._error = e

    def put(self, table: pa.Table) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(table)

    def close(self) -> BaseException | None:
        """Finish the file; return the writing error, if any."""
        self._queue.put(None)
        self._thread.join()
        try:
            self._writer.close()
        except BaseException as e:
            self._error = self._error or e
        return self._error


def write_parquet_fast(
    data: bytes | memoryview, out_dir: Path, source: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Decode a Go 1.22+ trace with the C decoder and write the Parquet
    directory; return meta.json's content (as parquet_out.write_parquet).

    Raises TraceFormatError when not even the first generation is readable.
    """
    dec = ChunkDecoder(data)
    out_dir.mkdir(parents=True, exist_ok=True)
    # One writer thread per file: pyarrow's Parquet writer and the C decoder
    # both release the GIL, so encoding row groups overlaps with decoding.
    writers = {
        name: _FileWriter(out_dir / f"{name}.parquet", schema)
        for name, schema in dec.write_schemas.items()
    }
    try:
        for name, table in dec.chunks():
            writers[name].put(table)
    finally:
        errors = [e for e in (w.close() for w in writers.values()) if e is not None]
    if errors:
        raise errors[0]
    meta = _finish(dec, source)
    with open_writer(out_dir / "stacks.parquet", STACKS_SCHEMA) as sw:
        for t in dec.stacks_tables():
            sw.write_table(t)
    tmp = out_dir / "meta.json.tmp"
    tmp.write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    os.replace(tmp, out_dir / "meta.json")
    return meta


def _finish(dec: ChunkDecoder, source: dict[str, Any] | None) -> dict[str, Any]:
    """meta.json's content once ``dec`` is exhausted; raises TraceFormatError
    when not even the first generation was readable."""
    res = dec.result()
    fail = res["fail"]
    if fail is not None and res["completed"] == 0:
        raise TraceFormatError(fail[0], fail[1])
    loss = {"bytes_lost": 0, "generations_lost": 0, "error": "", "offset": -1}
    if fail is not None:
        loss = {
            "bytes_lost": max(0, dec.size - res["lost_from"]),
            "generations_lost": res["generations_lost"],
            "error": fail[1],
            "offset": fail[0],
        }
    clock = res["clock"]
    counts = {k: n for k, n in zip(KINDS, res["kinds"], strict=True) if n}
    return {
        "schema_version": SCHEMA_VERSION,
        "go_version": dec.version,
        "family": "v2",
        "ticks_per_sec": res["ticks_per_sec"],
        "generations": res["completed"],
        "first_ts": res["first_ts"],
        "last_ts": res["last_ts"],
        "wall_clock": (
            {"trace_ns": clock[0], "mono_ns": clock[1], "wall_ns": clock[2]} if clock else None
        ),
        "events": res["events"],
        "transitions": res["transitions"],
        "event_counts": dict(sorted(counts.items())),
        "stacks": res["stacks"],
        "loss": loss,
        "source": source,
    }


#: The tables as a reader of the Parquet files sees them (dictionary columns
#: as plain strings).
READ_SCHEMAS = {"events": EVENTS_SCHEMA, "transition_stacks": TRANSITION_STACKS_SCHEMA}


def decode_in_memory(
    data: bytes | memoryview | mmap.mmap,
    transitions: Callable[[pa.Table], None],
    source: dict[str, Any] | None = None,
    release: Callable[[int], None] | None = None,
    grouped: tuple[EventGroups, Callable[[int, pa.Table, list[str]], None]] | None = None,
) -> tuple[dict[str, Any], dict[str, pa.Table]]:
    """Decode a Go 1.22+ trace with the C decoder without writing files.

    Each row group of transitions goes to ``transitions`` as it is decoded
    (its string columns as dictionary arrays; the caller keeps what it needs
    of it). Returns meta.json's content and the events,
    transition_stacks and stacks tables with the types their Parquet files
    read back with. Raises TraceFormatError as write_parquet_fast does.
    ``release``: as :meth:`ChunkDecoder.chunks` (a mapped file gives back
    what the decoder has passed: collectors.gotrace.mapped). ``grouped``:
    (event groups, callback): each group's row groups go to the callback
    with the group's number (:class:`ChunkDecoder`'s ``event_groups``) and
    the strings its index columns name (:attr:`ChunkDecoder.event_strings`,
    growing as the decode goes), and no events table is returned.
    """
    dec = ChunkDecoder(data, grouped[0] if grouped is not None else None)
    parts: dict[str, list[pa.Table]] = {name: [] for name in READ_SCHEMAS}
    for name, table in dec.chunks(release):
        if name == "transitions":
            transitions(table)
        elif grouped is not None and name.startswith("events/"):
            grouped[1](int(name.split("/")[1]), table, dec.event_strings)
        else:
            parts[name].append(table.cast(READ_SCHEMAS[name]))
    meta = _finish(dec, source)
    tables = {name: pa.concat_tables(ts) if ts else READ_SCHEMAS[name].empty_table()
              for name, ts in parts.items() if not (name == "events" and grouped is not None)}
    stacks = dec.stacks_tables()
    tables["stacks"] = pa.concat_tables(stacks) if stacks else STACKS_SCHEMA.empty_table()
    return meta, tables
