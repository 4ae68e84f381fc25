"""load_tables.interval_columns / interval_parts: the intervals stored part by
part are the intervals made whole (real test traces)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from collectors.gotrace.todir import decode_file_to_dir
from ingest.columns import Computed, Gather, Seq
from ingest.derive import intervals as derive
from ingest.derive.frame_writer import _column_chunk
from ingest.load.bucket_tables import interval_columns
from ingest.load.tables import interval_parts
from tests.support.transitions_oracle import read_transitions

REPO = Path(__file__).resolve().parents[3]
TRACES = sorted((REPO / "tests" / "data" / "traces").glob("*.trace"))[:3]


def whole(col: object, n: int) -> np.ndarray:
    if isinstance(col, Seq):
        return np.arange(col.start, col.start + n)
    return np.asarray(_column_chunk(col, 0, n))


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.name)
@pytest.mark.parametrize("part", [1000, 1 << 20])
def test_parts_put_together_are_the_whole(trace: Path, part: int, tmp_path: Path) -> None:
    meta = decode_file_to_dir(trace, tmp_path / "d")
    tr = read_transitions(tmp_path / "d")
    o = derive.order_intervals(tr, int(meta["last_ts"]))
    kind_of = np.arange(len(tr), dtype=np.int16) % 7
    cols = {"id": Seq(100), **interval_columns(tr, o, kind_of)}
    n = len(tr)
    assert isinstance(cols["end_ts"], Computed) and isinstance(cols["rid"], Gather)
    seen = 0
    got: dict[str, list[np.ndarray]] = {name: [] for name in cols}
    for rows, p in interval_parts(cols, n, part):
        assert rows == min(part, n - seen)
        for name, col in p.items():
            got[name].append(whole(col, rows))
        seen += rows
    assert seen == n
    np.testing.assert_array_equal(np.concatenate(got["id"]), np.arange(100, 100 + n))
    np.testing.assert_array_equal(np.concatenate(got["end_ts"]), o.end)
    np.testing.assert_array_equal(np.concatenate(got["start_ts"]), tr.ts[o.order])
    np.testing.assert_array_equal(np.concatenate(got["kind"]), kind_of[o.order])
    np.testing.assert_array_equal(np.concatenate(got["seq"]), o.order)
