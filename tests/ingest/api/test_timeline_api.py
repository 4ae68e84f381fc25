"""The timeline JSON API through a real ``gmpscope serve`` (samples_server):
JSON for each mode, 404 for unknown traces and refs, 400 for bad parameters,
span details with stacks, and the page's route."""

from __future__ import annotations

import pytest

from tests.support.server import Served

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
