"""The C decoder's events split by kind (``ChunkDecoder(data, event_groups)``):
each group's tables hold exactly the rows of the whole events table whose
kind is in the group, in the same order, with the group's columns; kinds in
no group are left out; everything else the decoder says is unchanged.

Their name, category and message come as indices into the decoder's
strings (``ChunkDecoder.event_strings``), each string once.

Inputs: the committed real traces (Go 1.22/1.23/1.25/1.27), whole and cut in
half (a decode that stops at a torn generation)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
import pytest

from collectors.gotrace import columnar
from collectors.gotrace.errors import TraceFormatError
from collectors.gotrace.parquet_out import EVENTS_SCHEMA

pytestmark = pytest.mark.skipif(
    columnar._v2fast is None, reason="C extension not built (run make setup)"
)

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
TRACES = sorted(p.name for p in DATA.glob("go1.2[2-7]-*.trace"))

#: Groups as a reader might ask for them: columns of all kinds (numbers,
#: nullable numbers, strings, dictionary indices), one kind in no group.
GROUPS = [
    (("RegionBegin", "RegionEnd", "TaskBegin", "TaskEnd"),
     ("kind", "ts", "g", "name", "task_id", "parent_task_id", "stack_id")),
    (("Log",), ("seq", "ts", "m", "category", "message")),
    (("Metric", "Sync"), ("seq", "kind", "ts", "name", "value", "value_str", "sync_n",
                          "clock_trace_ns", "clock_mono_ns", "clock_wall_ns")),
    (("RangeBegin", "RangeActive", "RangeEnd", "Label", "Experimental"),
     ("kind", "ts", "m", "p", "g", "name", "scope", "scope_id", "attrs")),
]
LEFT_OUT = "StackSample"


def _decode(data: bytes, groups: columnar.EventGroups | None
            ) -> tuple[dict[str, object], dict[str, pa.Table]]:
    dec = columnar.ChunkDecoder(data, groups)
    parts: dict[str, list[pa.Table]] = {}
    for name, table in dec.chunks():
        if name.startswith("events"):
            parts.setdefault(name, []).append(table)
    meta = columnar._finish(dec, None)
    # A group's text columns are indices into the decoder's strings, each
    # string there once.
    strings = pa.array(dec.event_strings, pa.string())
    assert len(set(dec.event_strings)) == len(strings)
    return meta, {name: _as_read(_strings_of(pa.concat_tables(ts), strings))
                  for name, ts in parts.items()}


def _strings_of(t: pa.Table, strings: pa.Array) -> pa.Table:
    """A group table's index columns as the strings they index."""
    for i, f in enumerate(t.schema):
        if f.name in columnar.STRING_ID_COLUMNS and pa.types.is_integer(f.type):
            t = t.set_column(i, f.name, strings.take(t.column(i)))
    return t


def _as_read(t: pa.Table) -> pa.Table:
    """Dictionary columns as the plain strings a reader of the files sees."""
    return t.cast(pa.schema([EVENTS_SCHEMA.field(f.name) for f in t.schema]))


@pytest.mark.parametrize("half", [False, True], ids=["whole", "cut"])
@pytest.mark.parametrize("name", TRACES)
def test_each_group_is_the_events_of_its_kinds(name: str, half: bool) -> None:
    data = (DATA / name).read_bytes()
    if half:
        data = data[: len(data) // 2]
    try:
        meta, wide = _decode(data, None)
    except TraceFormatError as e:  # nothing readable: the same error
        with pytest.raises(TraceFormatError) as grouped_error:
            _decode(data, GROUPS)
        assert (grouped_error.value.offset, grouped_error.value.reason) == (e.offset, e.reason)
        return
    gmeta, grouped = _decode(data, GROUPS)
    assert gmeta == meta  # counts, loss, clock: the split changes none
    events = wide["events"]
    kinds = events.column("kind")
    for g, (group_kinds, columns) in enumerate(GROUPS):
        want = events.filter(pc.is_in(kinds, pa.array(group_kinds))).select(
            [c for c in EVENTS_SCHEMA.names if c in columns])
        got = grouped.get(f"events/{g}", want.schema.empty_table())
        assert got.schema.names == want.schema.names
        assert got.num_rows == want.num_rows, (g, got.num_rows, want.num_rows)
        assert got.equals(want), g
    kept = sum(t.num_rows for t in grouped.values())
    left_out = pc.sum(pc.equal(kinds, LEFT_OUT)).as_py() or 0
    assert kept == events.num_rows - left_out > 0


@pytest.mark.parametrize("groups", [
    [(("Log",), ("ts",)), (("Log", "Metric"), ("ts",))],  # a kind in two groups
    [(("Log",), ("ts", "no_such_column"))],
    [(("NoSuchKind",), ("ts",))],
    [((k,), ("ts",)) for k in ("Log", "Metric", "Sync", "Label", "StackSample", "TaskBegin",
                               "TaskEnd", "RegionBegin", "RegionEnd")],  # more than 8
    [(("Log",), ())],  # no column
])
def test_bad_groups_are_refused(groups: columnar.EventGroups) -> None:
    data = (DATA / TRACES[-1]).read_bytes()
    with pytest.raises(ValueError, match="groups"):
        columnar.ChunkDecoder(data, groups)
