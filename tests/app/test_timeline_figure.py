"""The timeline figure builder (app.figures.timeline) on a real trace: on P and
M lanes every single Running interval is drawn in its goroutine's colour (the
goroutine the data says ran it), merged shapes in Running's colour; goroutine
lanes keep one colour per state. A merged shape is as tall as the share of its
span its intervals cover."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.figures.timeline import (
    BAR,
    COLORS,
    GOROUTINE_COLORS,
    MIN_COVER_DRAWN,
    RUNNING_BY_G,
    figure_dict,
    goroutine_color,
)
from ingest.config import Settings, sqlite_url
from ingest.derive.frames import FrameStore, TraceFrames
from ingest.load.pipeline import ingest_trace_file
from ingest.store.db import make_engine
from ingest.views.timeline import parse_params, timeline

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "samples" / "go1.27-httpnet.trace"


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, TraceFrames]]:
    d = tmp_path_factory.mktemp("figure")
    engine = make_engine(Settings.from_env({}, data_dir=d, db_url=sqlite_url(d / "t.db")).db_url)
    frames = FrameStore(engine, d).get(ingest_trace_file(engine, TRACE, data_dir=d).id)
    yield engine, frames
    engine.dispose()


def _data(loaded: tuple[Any, TraceFrames], mode: str, width_ns: int) -> dict[str, Any]:
    """A window from the median proc run's start: where goroutines run."""
    engine, frames = loaded
    starts = frames.proc_runs["start_ts"]
    t1 = int(sorted(starts)[len(starts) // 2])
    return timeline(engine, frames, parse_params(
        {"mode": mode, "t1": str(t1), "t2": str(t1 + width_ns)}))


def assert_running_coloured_by_goroutine(data: dict[str, Any]) -> set[int]:
    """Each Running bar's colour against the goroutine of its shape; returns
    the goroutines drawn as single intervals."""
    fig = figure_dict(data)
    sh = data["shapes"]
    running = [i for i, c in enumerate(sh["cat"]) if data["categories"][c] == "Running"]
    trace = next(t for t in fig["data"] if t["name"] == RUNNING_BY_G)
    assert len(trace["marker"]["color"]) == len(running)
    singles: set[int] = set()
    for i, colour in zip(running, trace["marker"]["color"], strict=True):
        if sh["n"][i] == 1 and sh["g"][i] >= 0:
            assert colour == goroutine_color(sh["g"][i])
            singles.add(sh["g"][i])
        else:
            assert colour == COLORS["Running"]
    return singles


@pytest.mark.parametrize("mode", ["p", "m"])
def test_running_bars_take_their_goroutines_colour(loaded: tuple[Any, TraceFrames],
                                                   mode: str) -> None:
    data = _data(loaded, mode, 2_000_000)  # 2 ms: single runs, several goroutines
    singles = assert_running_coloured_by_goroutine(data)
    assert len(singles) >= 3, "the window shows runs of several goroutines"
    assert len({goroutine_color(g) for g in singles}) >= 2


def test_whole_trace_merges_and_goroutine_lanes_keep_state_colours(
        loaded: tuple[Any, TraceFrames]) -> None:
    engine, frames = loaded
    whole = timeline(engine, frames, parse_params({"mode": "p"}))
    assert any(n > 1 for n in whole["shapes"]["n"]), "the whole trace merges shapes"
    assert_running_coloured_by_goroutine(whole)
    g_view = figure_dict(_data(loaded, "g", 2_000_000))
    names = {t["name"] for t in g_view["data"]}
    assert "Running" in names and RUNNING_BY_G not in names
    running = next(t for t in g_view["data"] if t["name"] == "Running")
    assert running["marker"]["color"] == COLORS["Running"]


def test_neighbouring_goroutine_ids_differ() -> None:
    colours = [goroutine_color(g) for g in range(1, 200)]
    assert all(a != b for a, b in zip(colours, colours[1:], strict=False))
    assert set(colours) == set(GOROUTINE_COLORS)


def test_merged_bars_are_as_tall_as_their_cover(loaded: tuple[Any, TraceFrames]) -> None:
    """A merged shape whose intervals cover 1.4% of its span is drawn as a
    sliver standing on its lane's baseline, not a full bar; single intervals
    keep the full height; the hover names the share."""
    engine, frames = loaded
    data = timeline(engine, frames, parse_params({"mode": "p", "px": "64"}))
    sh = data["shapes"]
    stw = data["categories"].index("STW")
    lane = data["lanes"]["key"].index("stw")
    merged = [i for i, (c, n) in enumerate(zip(sh["cat"], sh["n"], strict=True))
              if c == stw and n > 1]
    assert merged, "coarse buckets merge stop-the-world pauses"
    assert all(0 < sh["cover"][i] < 1 for i in merged), "STW covers part of each bucket"
    i = merged[0]
    sh["cover"][i] = 0.014
    fig = figure_dict(data)
    bars = next(t for t in fig["data"] if t["name"] == "STW")
    idx = [j for j, c in enumerate(sh["cat"]) if c == stw]
    k = idx.index(i)
    assert bars["width"][k] == pytest.approx(BAR * MIN_COVER_DRAWN)
    assert bars["width"][k] < BAR / 10, "a sliver, not a full bar"
    # It stands on the lane's baseline (y runs downwards): bottom at lane + BAR/2.
    assert bars["y"][k] + bars["width"][k] / 2 == pytest.approx(lane + BAR / 2)
    assert "1.4% of this span is STW" in bars["hovertext"][k]
    assert f"{sh['n'][i]} intervals" in bars["hovertext"][k]
    for j, w in zip(idx, bars["width"], strict=True):
        want = BAR if sh["n"][j] == 1 else BAR * max(sh["cover"][j], MIN_COVER_DRAWN)
        assert w == pytest.approx(want, abs=1e-4)
    sh["cover"][i] = 0.5
    half = next(t for t in figure_dict(data)["data"] if t["name"] == "STW")
    assert half["width"][k] == pytest.approx(BAR / 2)
    # Single intervals everywhere: full bars.
    fine = figure_dict(_data(loaded, "p", 2_000_000))
    for t in fine["data"]:
        if t["type"] == "bar":
            assert all(w == BAR for w, (_r, _g, n) in zip(t["width"], t["customdata"],
                                                          strict=True) if n == 1)
