"""The timeline's range lanes (ingest.derive.range_lanes) read from the
database a batch of rows at a time equal those the loader stages from the
columns it stores (ranges_of); a range open at either end spans to the
trace's first or last time."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine

import ingest.derive.range_lanes as rl
from ingest.derive.frames import FrameStore
from ingest.load.pipeline import ingest_trace_file
from tests.support.ingest_fixtures import db_url, engine  # noqa: F401 - fixtures

REPO = Path(__file__).resolve().parents[3]


def assert_same(got: Any, want: Any, where: str = "") -> None:
    """Field by field: arrays equal in value and dtype, nested dataclasses alike."""
    assert type(got) is type(want), where
    for f in dataclasses.fields(want):
        a, b = getattr(got, f.name), getattr(want, f.name)
        if isinstance(b, np.ndarray):
            assert np.asarray(a).dtype == b.dtype, f"{where}.{f.name}"
            np.testing.assert_array_equal(a, b, err_msg=f"{where}.{f.name}")
        elif dataclasses.is_dataclass(b):
            assert_same(a, b, f"{where}.{f.name}")
        else:
            assert a == b, f"{where}.{f.name}"


@pytest.mark.parametrize("batch", [1, 7, 1 << 16])
def test_ranges_read_in_batches_equal_the_loaders(engine: Engine, tmp_path: Path, batch: int,  # noqa: F811
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    res = ingest_trace_file(engine, REPO / "samples" / "go1.27-gcpressure.trace",
                            data_dir=tmp_path)
    staged = rl.range_lanes(engine, FrameStore(engine, tmp_path).get(res.id))
    monkeypatch.setattr(rl, "_FETCH_ROWS", batch)
    frames = FrameStore(engine, tmp_path).get(res.id)
    frames.directory = None  # built from the database, not read back
    built = rl.range_lanes(engine, frames)
    assert len(built.range_id) > 10 and len(built.lanes.ids) >= 3
    assert_same(built, staged, "ranges")


def test_open_ranges_span_to_the_trace_edges() -> None:
    assert rl._times((5, None, 7), 99).tolist() == [5, 99, 7]
    assert rl._times((5, 6), 99).dtype == np.int64
