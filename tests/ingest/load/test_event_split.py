"""The events' split (ingest.load.event_split): a decoder's events taken
apart by target table (``EventParts.add_group``, what ``gmpscope ingest``
does with the C decoder) keep exactly what the whole events table's row
groups give (``EventParts.add``): every target's columns, value for value
and type for type, text codes in the same order, and each M's first and
last event time. On the committed real traces of every Go 1.22+ format and
the 2 MB sample, in memory and spilled."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from collectors.gotrace import columnar
from ingest.load.event_split import TARGETS, Column, EventParts, Texts, groups

pytestmark = pytest.mark.skipif(
    columnar._v2fast is None, reason="C extension not built (run make setup)"
)

REPO = Path(__file__).resolve().parents[3]
DATA = REPO / "tests" / "data" / "traces"
TRACES = [*sorted(DATA.glob("go1.2[2-7]-*.trace")), REPO / "samples" / "go1.27-httpnet-2MB.trace"]


def _parts(data: bytes, grouped: bool, spill: Path | None) -> EventParts:
    parts = EventParts(spill)
    dec = columnar.ChunkDecoder(data, groups() if grouped else None)
    for name, table in dec.chunks():
        if name == "events":
            parts.add(table)
        elif name.startswith("events/"):
            parts.add_group(int(name.split("/")[1]), table, dec.event_strings)
    return parts


def assert_same_parts(got: EventParts, want: EventParts) -> None:
    assert got.rows == want.rows
    # (m, time) pairs, each M's first and last: their order is the order the
    # Ms were first seen in, which differs (a row group holds one target).
    got_m, got_ts = got.thread_times()
    want_m, want_ts = want.thread_times()
    assert sorted(zip(got_m.tolist(), got_ts.tolist(), strict=True)) == \
        sorted(zip(want_m.tolist(), want_ts.tolist(), strict=True))
    for target in TARGETS:
        g, w = got.table(target), want.table(target)
        assert g.rows == w.rows, target
        assert g.cols.keys() == w.cols.keys(), target
        for cname, col in w.cols.items():
            other = g.cols[cname]
            if isinstance(col, Texts):
                assert isinstance(other, Texts), (target, cname)
                assert other.values == col.values, (target, cname)
                assert other.codes.dtype == col.codes.dtype, (target, cname)
                assert np.array_equal(other.codes, col.codes), (target, cname)
            else:
                assert isinstance(other, Column) and isinstance(col, Column)
                assert other.values.dtype == col.values.dtype, (target, cname)
                assert np.array_equal(other.values, col.values), (target, cname)
                assert np.array_equal(other.nulls(), col.nulls()), (target, cname)


@pytest.mark.parametrize("spilled", [False, True], ids=["memory", "spilled"])
@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.name)
def test_events_taken_apart_by_the_decoder_are_the_split_of_the_whole(
        trace: Path, spilled: bool, tmp_path: Path) -> None:
    data = trace.read_bytes()
    spill = tmp_path if spilled else None
    want = _parts(data, grouped=False, spill=spill)
    assert want.rows > 0
    got = _parts(data, grouped=True, spill=spill)
    try:
        assert_same_parts(got, want)
    finally:
        got.close()
        want.close()


def test_groups_name_each_target_with_the_threads_columns() -> None:
    found = groups()
    assert [kinds for kinds, _ in found] == [kinds for kinds, _ in TARGETS.values()]
    for (_, columns), (_, own) in zip(found, TARGETS.values(), strict=True):
        assert set(columns) == {*own, "m", "ts"}
