"""The flame graph's builder on a real profile (the mutex sample's sync
waits): one bar per node, each child inside its parent and the siblings side
by side in name order, the root as wide as the profile; through the export
registry too; an empty profile is a note."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.figures.flame import flame_figure, layout_nodes, package
from app.figures.registry import build_figure
from app.figures.source import DiagramSource
from ingest.derive.frames import FrameStore
from ingest.load.pipeline import ingest_trace_file
from ingest.store.db import make_engine
from ingest.views.flame import flame_tree

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "go1.27-mutex.trace"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DiagramSource, int]]:
    d = tmp_path_factory.mktemp("flame-figure")
    engine = make_engine(f"sqlite:///{d / 'gmpscope.db'}")
    tid = ingest_trace_file(engine, SAMPLE, SAMPLE.name, data_dir=d).id
    yield DiagramSource(engine, FrameStore(engine, d)), tid
    engine.dispose()


def test_bars_nest(source: tuple[DiagramSource, int]) -> None:
    src, tid = source
    tree = flame_tree(src.engine, src.frames.get(tid), "sync")
    nodes = tree["nodes"]
    assert tree["count"] > 0 and len(nodes["id"]) > 2
    place = layout_nodes(tree)
    x0, depth, value = place["x0"], place["depth"], nodes["value"]
    assert (x0[0], depth[0], value[0]) == (0, 0, tree["total_ns"])
    for n in nodes["id"][1:]:
        p = nodes["parent"][n]
        assert depth[n] == depth[p] + 1
        assert x0[p] <= x0[n] and x0[n] + value[n] <= x0[p] + value[p]
        sibs = sorted((c for c in nodes["id"] if nodes["parent"][c] == p),
                      key=lambda c: (nodes["name"][c], c))
        i = sibs.index(n)
        assert x0[n] == (x0[p] if i == 0 else x0[sibs[i - 1]] + value[sibs[i - 1]])
    fig = flame_figure(tree)
    bar = fig.data[0]
    assert list(bar.x) == value and list(bar.base) == x0 and list(bar.y) == depth
    assert [c[-1] for c in bar.customdata] == nodes["id"]
    assert fig.layout.xaxis.range == (0, tree["total_ns"])


def test_registry_and_empty(source: tuple[DiagramSource, int]) -> None:
    src, tid = source
    fig = build_figure(src, tid, "flame", {"kind": "lock"})
    assert len(fig.data[0].x) == len(flame_tree(src.engine, src.frames.get(tid),
                                                "lock")["nodes"]["id"])
    empty = build_figure(src, tid, "flame", {"kind": "net"})  # the mutex workload uses no network
    assert not empty.data and "No network waits" in empty.layout.annotations[0].text
    with pytest.raises(ValueError):
        build_figure(src, tid, "flame", {"kind": "heap"})


def test_package() -> None:
    assert package("net/http.(*conn).serve") == "net/http"
    assert package("sync.(*Mutex).Lock") == "sync"
    assert package("main.main.func1") == "main"
    assert package("gmpscope/workloads/cmd/mutex.worker") == "gmpscope/workloads/cmd/mutex"
