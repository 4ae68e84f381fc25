"""Timeline tiles (ingest.views.timeline_tiles) on real traces.

A tile is the window API's level of detail for the tile's span at TILE_BUCKETS
buckets: the same shapes, cover and mix (checked against ``timeline()``, whose
shapes tests/ingest/views/test_timeline_lod.py checks against the raw rows).
The lane list holds every goroutine once, grouped as the goroutine table
groups them; the binary body decodes back to the JSON columns.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine

from ingest.config import Settings, sqlite_url
from ingest.derive.frames import FrameStore, TraceFrames
from ingest.derive.goroutine_lanes import goroutine_table
from ingest.load.pipeline import ingest_trace_file
from ingest.store.db import make_engine
from ingest.views.timeline import BadRequest, parse_params, timeline
from ingest.views.timeline_tiles import (
    MAGIC,
    TILE_BUCKETS,
    encode_tile,
    lanes_page,
    max_level,
    tile,
    tile_json,
    tile_span,
)

REPO = Path(__file__).resolve().parents[3]
SAMPLES = {"httpnet": REPO / "samples" / "go1.27-httpnet.trace",
           "gcpressure": REPO / "samples" / "go1.27-gcpressure.trace"}


@dataclass
class Loaded:
    engine: Engine
    frames: dict[str, TraceFrames]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loaded]:
    d = tmp_path_factory.mktemp("tiles")
    settings = Settings.from_env({}, data_dir=d, db_url=sqlite_url(d / "t.db"))
    engine = make_engine(settings.db_url)
    store = FrameStore(engine, d)
    frames = {name: store.get(ingest_trace_file(engine, path, data_dir=d).id)
              for name, path in SAMPLES.items()}
    yield Loaded(engine, frames)
    engine.dispose()


def _decode(body: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The binary tile read as the browser reads it (typed views at 8-byte offsets)."""
    assert body[:8] == MAGIC
    (n,) = struct.unpack("<I", body[8:12])
    head = json.loads(body[12:12 + n])
    off = 12 + n
    assert off % 8 == 0
    types = {"i32": "<i4", "f32": "<f4", "f64": "<f8", "u8": "u1"}
    cols = {}
    for name, typ, count in head["columns"]:
        dt = np.dtype(types[typ])
        cols[name] = np.frombuffer(body, dt, count, off)
        off += -(-count * dt.itemsize // 8) * 8
    assert off == len(body)
    return head, cols


@pytest.mark.parametrize("name", list(SAMPLES))
@pytest.mark.parametrize("mode", ["p", "m"])
@pytest.mark.parametrize("level,index", [(0, 0), (3, 5), (7, 100)])
def test_tile_is_the_window_level_of_detail(loaded: Loaded, name: str, mode: str,
                                            level: int, index: int) -> None:
    f = loaded.frames[name]
    t = tile(loaded.engine, f, {"mode": mode, "level": str(level), "index": str(index)})
    t1, t2 = tile_span(f, level, index)
    assert (t["t1"], t["t2"]) == (t1, t2)
    w = timeline(loaded.engine, f, parse_params({"mode": mode, "t1": str(t1), "t2": str(t2),
                                                 "px": str(TILE_BUCKETS), "cap": "20000",
                                                 "limit": "500"}))
    assert not w["stats"]["capped"]
    got = tile_json(t)["columns"]
    assert got["lane"] == w["shapes"]["lane"], "lanes in the same order as the window API's"
    for col in ("s", "d", "cat", "n", "ref", "g", "kind", "cover"):
        assert got[col] == w["shapes"][col], col
    mix = [None if got["n"][i] == 1 else
           [x for c, ns in zip(got["mix_cat"][a:b], got["mix_ns"][a:b], strict=True)
            for x in (c, int(ns))]
           for i, (a, b) in enumerate(zip(got["mix_off"][:-1], got["mix_off"][1:],
                                          strict=True))]
    assert mix == w["mix"]


def test_tiles_of_a_level_cut_the_trace_without_gaps(loaded: Loaded) -> None:
    f = loaded.frames["httpnet"]
    top = max_level(f)
    assert (f.last_ts - f.first_ts) >> top >= TILE_BUCKETS
    assert (f.last_ts - f.first_ts) >> (top + 1) < TILE_BUCKETS
    for level in (0, 1, 4, top):
        spans = [tile_span(f, level, i) for i in range(min(1 << level, 64))]
        assert spans[0][0] == f.first_ts
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert tile_span(f, top, (1 << top) - 1)[1] == f.last_ts
    with pytest.raises(BadRequest):
        tile(loaded.engine, f, {"mode": "p", "level": str(top + 1)})
    with pytest.raises(BadRequest):
        tile(loaded.engine, f, {"mode": "p", "level": "2", "index": "4"})
    with pytest.raises(BadRequest):
        tile(loaded.engine, f, {"mode": "g", "lanes": "0-1000"})


def test_binary_tile_decodes_to_the_json_columns(loaded: Loaded) -> None:
    f = loaded.frames["gcpressure"]
    for mode in ("p", "g"):
        t = tile(loaded.engine, f, {"mode": mode, "level": "2", "index": "1",
                                    "lanes": "0-64"})
        head, cols = _decode(encode_tile(t))
        want = tile_json(t)
        assert head["t1"] == want["t1"] and head["lanes"] == want["lanes"]
        got = {k: v.tolist() for k, v in cols.items()}
        # cover travels as float32 (3 decimals): the same to 1e-6.
        assert np.allclose(got.pop("cover"), want["columns"].pop("cover"), rtol=0, atol=1e-6)
        assert got == want["columns"]
        assert len(cols["lane"]) > 0


def test_goroutine_lane_list_has_every_goroutine_once_by_group(loaded: Loaded) -> None:
    f = loaded.frames["httpnet"]
    gt = goroutine_table(loaded.engine, f)
    page = lanes_page(loaded.engine, f, {"mode": "g", "limit": "5000"})
    lanes = page["lanes"]
    assert page["total"] == 4 + len(gt.goid) + len(page["groups"]) == len(lanes["key"])
    goids = [i for i, t in zip(lanes["id"], lanes["type"], strict=True) if t == "g"]
    assert sorted(goids) == gt.goid.tolist()
    # Each group's goroutines follow its header, by id, biggest groups first.
    counts = [g["count"] for g in page["groups"]]
    assert counts == sorted(counts, reverse=True)
    for g, nxt in zip(page["groups"], page["groups"][1:] + [None], strict=True):
        end = nxt["lane"] if nxt else page["total"]
        ids = lanes["id"][g["lane"] + 1:end]
        assert lanes["type"][g["lane"]] == "group" and len(ids) == g["count"]
        assert ids == sorted(ids)
        want = np.flatnonzero(np.asarray(gt.names)[gt.group] == g["name"])
        assert sorted(ids) == gt.goid[want].tolist()
    # A range of lanes is the same slice of the list; a focused goroutine its lane.
    part = lanes_page(loaded.engine, f, {"mode": "g", "offset": "7", "limit": "5",
                                         "g": str(goids[20])})
    assert part["lanes"]["key"] == lanes["key"][7:12]
    assert lanes["id"][part["focus"]] == goids[20]
    one = lanes_page(loaded.engine, f, {"mode": "g", "group": page["groups"][1]["name"]})
    assert one["total"] == 4 + 1 + page["groups"][1]["count"]
