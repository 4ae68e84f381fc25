"""Tasks, regions and logs (ingest.views.annotations, /api/traces/<id>/annotations)
on the annotations workload's real trace: counts equal Go's parse, the
program's awkward strings come back literally, the task tree is a tree."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.support.goparsed import GoEvent, go_parsed
from tests.support.server import Served

SAMPLE = "go1.27-annotations.trace"
TRACE = Path(__file__).resolve().parents[3] / "samples" / SAMPLE
NO_TASK = (1 << 64) - 1

#: Strings the workload writes (collectors/workloads/cmd/annotations, ``awkward``,
#: by index there; the valid UTF-8 ones: invalid bytes are stored as U+FFFD).
AWKWARD = {
    0: "héllo wörld ✓ 日本語 🚀",
    1: "say \"hi\" and 'bye'",
    2: "C:\\temp\\new folder\\",
    3: "line one\nline two\ttabbed\r",
    4: "",
    5: "nul\x00inside",
    7: "emoji 👩\u200d👩\u200d👧 zwj, combining é, rtl שלום",
}


def _stored(s: str) -> str:
    """A Go string as the database keeps it: invalid UTF-8 bytes become U+FFFD."""
    return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


@pytest.fixture(scope="module")
def go_events() -> list[GoEvent]:
    events, err = go_parsed(TRACE)
    assert err is None
    return events


@pytest.fixture(scope="module")
def doc(samples_server: Served, sample_ids: dict[str, int]) -> dict:  # type: ignore[type-arg]
    r = samples_server.get(f"/api/traces/{sample_ids[SAMPLE]}/annotations?limit=100000")
    assert r.status_code == 200
    return r.json()  # type: ignore[no-any-return]


@pytest.mark.slow
def test_counts_equal_go(doc: dict, go_events: list[GoEvent]) -> None:  # type: ignore[type-arg]
    logs = [e for e in go_events if e.kind == "Log"]
    assert doc["logs"]["total"] == len(logs) == len(doc["logs"]["rows"])
    assert [(r["category"], r["message"], r["g"], r["ts"]) for r in doc["logs"]["rows"]] == [
        (_stored(e.category), _stored(e.message), e.g, e.ts) for e in logs]
    task_ids = {e.task for e in go_events if e.kind in ("TaskBegin", "TaskEnd")} - {NO_TASK}
    assert {t["task_id"] for t in doc["tasks"]} == task_ids
    begins = Counter(e.name for e in go_events if e.kind == "RegionBegin")
    ends = Counter(e.name for e in go_events if e.kind == "RegionEnd")
    # A region is a begin, or an end whose begin is not in the trace.
    want = {_stored(n): max(begins[n], ends[n]) for n in begins | ends}
    assert {r["name"]: r["count"] for r in doc["regions"]} == want
    # Begun and never ended: counted, not timed.
    open_ = sum(begins[n] - ends[n] for n in begins if begins[n] > ends[n])
    assert sum(r["count"] - r["timed"] for r in doc["regions"]) == open_ > 0


def test_awkward_strings_round_trip(doc: dict) -> None:  # type: ignore[type-arg]
    cats = {c["category"] for c in doc["logs"]["categories"]}
    msgs = {r["message"] for r in doc["logs"]["rows"]}
    regions = {r["name"] for r in doc["regions"]}
    for i, s in AWKWARD.items():
        assert s in cats, repr(s)
        assert f"message {i}: {s}" in msgs, repr(s)
        assert s in regions, repr(s)
    assert "bad utf-8: \ufffd\ufffd\ufffd" in cats
    # The runtime keeps the first 1024 bytes of a 3200-byte string (Go's parse shows
    # the same), and so do we.
    long = ("0123456789abcdef" * 200)[:1024]
    assert long in cats and long in msgs


def test_region_stats_arithmetic(doc: dict) -> None:  # type: ignore[type-arg]
    for r in doc["regions"]:
        if r["timed"]:
            assert r["mean_ns"] == pytest.approx(r["total_ns"] / r["timed"])
            assert r["p50_ns"] <= r["p99_ns"] <= r["max_ns"]
    outer = next(r for r in doc["regions"] if r["name"] == "outer")
    inner = next(r for r in doc["regions"] if r["name"] == "inner ✓")
    assert outer["count"] == inner["count"] == 160  # 40 rounds x 4 shards
    assert outer["total_ns"] > inner["total_ns"]  # inner nests in middle in outer


def test_task_tree(doc: dict) -> None:  # type: ignore[type-arg]
    tasks = doc["tasks"]
    depth_of: dict[int, int] = {}
    for t in tasks:
        if t["parent_id"] is not None and t["parent_id"] in depth_of:
            assert t["depth"] == depth_of[t["parent_id"]] + 1  # parent listed first
        else:
            assert t["depth"] == 0
        depth_of[t["task_id"]] = t["depth"]
        if t["duration_ns"] is not None:
            assert t["duration_ns"] == t["end_ts"] - t["start_ts"] >= 0
    shards = [t for t in tasks if t["name"].startswith("shard-")]
    assert len(shards) == 160 and all(t["depth"] == 1 for t in shards)
    requests = [t for t in tasks if t["name"] == "request"]
    assert len(requests) == 40 and all(t["children"] == 4 for t in requests)
    # The parent task ends on another goroutine than the one that began it.
    assert all(t["start_g"] != t["end_g"] for t in requests)
    assert set(requests[0]["goroutines"]) >= {requests[0]["start_g"], requests[0]["end_g"]}


def test_log_filters(samples_server: Served, sample_ids: dict[str, int]) -> None:
    base = f"/api/traces/{sample_ids[SAMPLE]}/annotations"
    shard = samples_server.get(base + "?category=shard").json()["logs"]
    assert shard["total"] == 160 and {r["category"] for r in shard["rows"]} == {"shard"}
    quoted = samples_server.get(base, params={"text": 'say "hi"'}).json()["logs"]
    assert quoted["total"] > 0
    assert all('say "hi"' in r["category"] + r["message"] for r in quoted["rows"])
    # % and _ are literal characters, not wildcards.
    assert samples_server.get(base, params={"text": "%"}).json()["logs"]["total"] == 0
    g = shard["rows"][0]["g"]
    by_g = samples_server.get(base + f"?g={g}").json()["logs"]
    assert by_g["total"] > 0 and {r["g"] for r in by_g["rows"]} == {g}
    assert samples_server.get(base + "?limit=3").json()["logs"]["rows"].__len__() == 3
    assert samples_server.get(base + "?g=x").status_code == 400
    assert samples_server.get("/api/traces/999999/annotations").status_code == 404
