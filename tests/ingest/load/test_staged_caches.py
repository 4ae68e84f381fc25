"""The caches the loader stages from the tables' columns (ingest.load.staged_caches)
are in the new trace's frames after its ingest, and equal what the views would
build from the database."""

from __future__ import annotations

from pathlib import Path

from ingest.config import sqlite_url
from ingest.derive import annotation_index as ix
from ingest.derive.cache import load_value
from ingest.derive.frames import FrameStore
from ingest.derive.lanesets import LaneSetKey
from ingest.derive.overview_counters import COUNTER_CLASSES, COUNTERS_KEY, counters_from_db
from ingest.derive.range_lanes import Ranges
from ingest.load.pipeline import ingest_trace_file
from ingest.store.db import make_engine
from tests.ingest.derive.test_derived_cache import assert_same_value

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "samples" / "go1.27-annotations.trace"


def test_staged_with_the_frames_and_equal_to_the_database(tmp_path: Path) -> None:
    engine = make_engine(sqlite_url(tmp_path / "t.db"))
    tid = ingest_trace_file(engine, SAMPLE, data_dir=tmp_path).id
    frames = FrameStore(engine, tmp_path).get(tid)
    assert frames.directory is not None
    derived = next(frames.directory.glob("derived-v*"))
    assert_same_value(load_value(derived / COUNTERS_KEY, COUNTER_CLASSES),
                      counters_from_db(engine, tid), "counters")
    for key, read in ((ix.TASKS_KEY, ix.read_task_index), (ix.REGIONS_KEY, ix.read_region_index),
                      (ix.LOGS_KEY, ix.read_log_index)):
        assert_same_value(load_value(derived / key, ix._CLASSES), read(engine, tid), key)
    assert (derived / LaneSetKey.RANGES).is_dir()
    assert isinstance(load_value(derived / LaneSetKey.RANGES, _range_classes()), Ranges)
    engine.dispose()


def _range_classes() -> tuple[type, ...]:
    from ingest.derive.lanesets import LaneSet, LaneSetIndex

    return (Ranges, LaneSet, LaneSetIndex)
