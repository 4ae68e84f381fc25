"""The timeline JSON API through a real ``gmpscope serve`` (samples_server):
JSON for each mode, 404 for unknown traces and refs, 400 for bad parameters,
span details with stacks, and the page's route."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.ingest_fixtures import backends, make_db_url
from tests.support.server import Served
from tests.support.workload_traces import workload_trace

SAMPLE = "go1.27-httpnet-2MB.trace"
#: The answer's size goal (issue 4): any view under 1 MB of JSON.
MAX_BYTES = 1 << 20


@pytest.mark.parametrize("mode", ["p", "m", "g"])
def test_each_mode_answers_columns(samples_server: Served, sample_ids: dict[str, int],
                                   mode: str) -> None:
    tid = sample_ids[SAMPLE]
    r = samples_server.get(f"/api/traces/{tid}/timeline?mode={mode}&px=1200")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json")
    assert len(r.content) < MAX_BYTES
    d = r.json()
    assert d["mode"] == mode and d["t1"] == d["first_ts"] and d["t2"] == d["last_ts"]
    sh = d["shapes"]
    n = len(sh["lane"])
    assert 0 < n <= d["stats"]["shapes"] == n
    assert all(len(v) == n for v in sh.values()) and len(d["mix"]) == n
    assert set(d["lanes"]["type"]) >= {"range", mode}
    assert max(sh["lane"]) < len(d["lanes"]["key"])
    assert all(0 <= c < len(d["categories"]) for c in sh["cat"])


@pytest.mark.parametrize("px", [64, 1200])
def test_cover_column_tells_how_much_of_each_span_is_covered(
        samples_server: Served, sample_ids: dict[str, int], px: int) -> None:
    """``cover`` is in (0, 1] with 3 decimals, 1 for a single interval, and the
    whole trace's STW lane covers what the overview counts as stop-the-world."""
    tid = sample_ids[SAMPLE]
    d = samples_server.get(f"/api/traces/{tid}/timeline?mode=p&px={px}").json()
    sh = d["shapes"]
    assert all(0 < c <= 1 and round(c, 3) == c for c in sh["cover"])
    assert all(c == 1 for c, n in zip(sh["cover"], sh["n"], strict=True) if n == 1)
    key = samples_server.get(f"/api/traces/{tid}/overview").json()["key"]
    stw_lane = d["lanes"]["key"].index("stw")
    stw = [i for i, ln in enumerate(sh["lane"]) if ln == stw_lane]
    covered = sum(sh["cover"][i] * sh["d"][i] for i in stw)
    span = d["t2"] - d["t1"]
    # Each cover is within 0.0005 of the truth (or floored at 0.001).
    assert abs(covered - key["stw_total_ns"]) <= 0.001 * sum(sh["d"][i] for i in stw)
    assert covered / span < 0.2, "stop-the-world is not a solid band"
    if px == 64:
        assert any(sh["n"][i] > 1 and sh["cover"][i] < 0.5 for i in stw), \
            "a coarse view merges pauses into mostly empty shapes"


def test_zoom_refines(samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids[SAMPLE]
    full = samples_server.get(f"/api/traces/{tid}/timeline?mode=m&px=800").json()
    t1 = full["first_ts"] + (full["last_ts"] - full["first_ts"]) // 3
    t2 = t1 + 2_000_000
    zoom = samples_server.get(f"/api/traces/{tid}/timeline?mode=m&px=800&t1={t1}&t2={t2}")
    z = zoom.json()
    assert (z["t1"], z["t2"]) == (t1, t2)
    assert z["bucket_ns"] < full["bucket_ns"]
    # In the smaller window each shape stands for fewer intervals.
    per_shape = z["stats"]["rows"] / max(1, z["stats"]["shapes"])
    assert per_shape < full["stats"]["rows"] / full["stats"]["shapes"]
    assert all(0 <= s and s + d <= t2 - t1 for s, d in zip(z["shapes"]["s"], z["shapes"]["d"],
                                                          strict=True))


def test_span_details(samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids[SAMPLE]
    d = samples_server.get(f"/api/traces/{tid}/timeline?mode=g&limit=40").json()
    refs = [r for r in d["shapes"]["ref"] if r >= 0]
    assert refs
    for ref in refs[:10]:
        r = samples_server.get(f"/api/traces/{tid}/span?ref={ref}")
        assert r.status_code == 200
        span = r.json()
        assert span["duration_ns"] == span["end_ts"] - span["start_ts"] >= 0
        assert isinstance(span["stack"], list)
    r = samples_server.get(f"/api/traces/{tid}/span?ref=-1")
    assert r.status_code == 404 and "error" in r.json()


@pytest.mark.parametrize("query", ["mode=x", "t1=abc", "t1=10&t2=5", "px=3", "limit=0",
                                   "mode=g&group=no-such-function"])
def test_bad_params_400(samples_server: Served, sample_ids: dict[str, int], query: str) -> None:
    tid = sample_ids[SAMPLE]
    r = samples_server.get(f"/api/traces/{tid}/timeline?{query}")
    assert r.status_code == 400 and "error" in r.json()


def test_unknown_trace_404(samples_server: Served) -> None:
    for path in ("/api/traces/987654/timeline", "/api/traces/987654/span?ref=0"):
        r = samples_server.get(path)
        assert r.status_code == 404 and "error" in r.json()
    r = samples_server.get("/api/traces/1/span?ref=x")
    assert r.status_code == 400


def test_page_route(samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids[SAMPLE]
    r = samples_server.get(f"/traces/{tid}/timeline?mode=g&g=1")
    assert r.status_code == 200 and "text/html" in r.headers["Content-Type"]


def _tile_columns(body: bytes) -> tuple[dict[str, object], dict[str, list[float]]]:
    """A binary tile read as the browser reads it (see ingest.views.timeline_tiles)."""
    import json
    import struct

    import numpy as np

    assert body[:8] == b"GMPTILE1"
    (n,) = struct.unpack("<I", body[8:12])
    head = json.loads(body[12:12 + n])
    off, cols = 12 + n, {}
    types = {"i32": "<i4", "f32": "<f4", "f64": "<f8", "u8": "u1"}
    for name, typ, count in head["columns"]:
        dt = np.dtype(types[typ])
        cols[name] = np.frombuffer(body, dt, count, off).tolist()
        off += -(-count * dt.itemsize // 8) * 8
    return head, cols


@pytest.mark.parametrize("mode", ["p", "m", "g"])
def test_lanes_and_tiles(samples_server: Served, sample_ids: dict[str, int],
                         mode: str) -> None:
    """Every lane of a mode, and a tile of them: binary (cacheable) and the same as JSON."""
    tid = sample_ids[SAMPLE]
    lanes = samples_server.get(f"/api/traces/{tid}/timeline/lanes?mode={mode}&limit=5000")
    assert lanes.status_code == 200
    meta = lanes.json()
    assert min(meta["total"], 5000) == len(meta["lanes"]["key"])
    assert meta["lanes"]["type"][:4] == ["range"] * 4
    assert set(meta["lanes"]["type"][4:]) <= {mode, "group"}
    r = samples_server.get(f"/api/traces/{tid}/timeline/tiles?mode={mode}&level=1&index=1"
                           "&lanes=0-64")
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/octet-stream"
    assert "max-age" in r.headers["Cache-Control"]
    head, cols = _tile_columns(r.content)
    half = (meta["last_ts"] - meta["first_ts"]) // 2
    assert (head["t1"], head["t2"]) == (meta["first_ts"] + half, meta["last_ts"])
    j = samples_server.get(f"/api/traces/{tid}/timeline/tiles?mode={mode}&level=1&index=1"
                           "&lanes=0-64&format=json").json()
    cover = cols.pop("cover")  # float32 in the binary body: 3 decimals kept
    assert all(abs(a - b) < 1e-6 for a, b in zip(cover, j["columns"].pop("cover"),
                                                 strict=True))
    assert j["columns"] == cols and len(cols["lane"]) > 0
    assert all(0 <= ln < min(64, meta["total"]) for ln in cols["lane"])
    if mode == "g":
        goid = next(i for i, t in zip(meta["lanes"]["id"], meta["lanes"]["type"], strict=True)
                    if t == "g")
        f = samples_server.get(f"/api/traces/{tid}/timeline/lanes?mode=g&g={goid}").json()
        assert meta["lanes"]["key"][f["focus"]] == f"g{goid}"


@pytest.mark.parametrize("query", ["mode=x", "level=-1", "level=99", "level=2&index=4",
                                   "lanes=5-1", "lanes=a-b", "lanes=0-1000",
                                   "mode=g&group=no.such.function"])
def test_tiles_bad_params_400(samples_server: Served, sample_ids: dict[str, int],
                              query: str) -> None:
    tid = sample_ids[SAMPLE]
    r = samples_server.get(f"/api/traces/{tid}/timeline/tiles?{query}")
    assert r.status_code == 400 and "error" in r.json()
    assert samples_server.get("/api/traces/999999/timeline/tiles").status_code == 404
    assert samples_server.get("/api/traces/999999/timeline/lanes").status_code == 404


@pytest.fixture(scope="module", params=backends())
def served_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[tuple[Served, int]]:
    """A server with the gcpressure workload's trace, on SQLite and on PostgreSQL."""
    base = tmp_path_factory.mktemp("timeline-tiles-db")
    trace = workload_trace("1.27.3", "gcpressure")
    for url in make_db_url(request.param, base):
        with Served(base / "data", [trace], db_url=url) as s:
            yield s, s.get("/api/traces").json()["traces"][0]["id"]


@pytest.mark.parametrize("mode", ["p", "m", "g"])
def test_tiles_are_the_window_api_on_each_database(served_db: tuple[Served, int],
                                                   mode: str) -> None:
    """A tile's shapes are the window API's for the tile's span at 512 px, on either
    database; the tiles of a level cover the trace edge to edge."""
    s, tid = served_db
    meta = s.get(f"/api/traces/{tid}/timeline/lanes?mode={mode}&limit=60").json()
    n = min(meta["total"], 60)
    for level, index in ((0, 0), (3, 2), (3, 3)):
        t = s.get(f"/api/traces/{tid}/timeline/tiles?mode={mode}&level={level}"
                  f"&index={index}&lanes=0-{n}&format=json").json()
        w = s.get(f"/api/traces/{tid}/timeline", params={
            "mode": mode, "t1": t["t1"], "t2": t["t2"], "px": 512, "cap": 20000,
            "limit": 500}).json()
        keys = [meta["lanes"]["key"].index(k) if k in meta["lanes"]["key"] else -1
                for k in w["lanes"]["key"]]
        if mode != "g":  # by G the window API pages the goroutines alive in its window
            assert [keys[ln] for ln in w["shapes"]["lane"]] == t["columns"]["lane"]
            for col in ("s", "d", "cat", "n", "ref", "g", "cover"):
                assert t["columns"][col] == w["shapes"][col], (level, index, col)
        else:  # the range lanes are the first four of both
            top = [i for i, ln in enumerate(w["shapes"]["lane"]) if ln < 4]
            mine = [i for i, ln in enumerate(t["columns"]["lane"]) if ln < 4]
            for col in ("s", "d", "cat", "n", "ref", "cover"):
                assert [t["columns"][col][i] for i in mine] == \
                    [w["shapes"][col][i] for i in top], (level, index, col)
    spans = [s.get(f"/api/traces/{tid}/timeline/tiles?mode={mode}&level=2&index={i}"
                   "&lanes=0-1&format=json").json() for i in range(4)]
    assert spans[0]["t1"] == meta["first_ts"] and spans[-1]["t2"] == meta["last_ts"]
    assert all(a["t2"] == b["t1"] for a, b in zip(spans, spans[1:], strict=False))
