"""Shared by the causality tests (flows, search, area, critical path): real
traces loaded into a database of each backend, opened in the test process,
and Go's own unblock events for them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from ingest.derive.frames import FrameStore, TraceFrames
from tests.support.goparsed import go_parsed
from tests.support.ingest_fixtures import backends as backends
from tests.support.ingest_fixtures import make_db_url
from tests.support.workload_traces import workload_trace

REPO = Path(__file__).resolve().parents[2]
#: Name -> how to get the trace file: the chain workload of four toolchains
#: (Go 1.19 and 1.21's old format, 1.22 and 1.27's), two samples with many wake-ups.
TRACES = {
    "chain-1.27": lambda: workload_trace("1.27", "chain"),
    "chain-1.22": lambda: workload_trace("1.22", "chain"),
    "chain-1.21": lambda: workload_trace("1.21", "chain"),
    "chain-1.19": lambda: workload_trace("1.19", "chain"),
    "mutex-1.27": lambda: REPO / "samples" / "go1.27-mutex.trace",
    "httpnet-1.19": lambda: REPO / "samples" / "go1.19-httpnet.trace",
}


@dataclass
class Loaded:
    """Traces loaded into one database: engine, frames, and their ids and files."""

    engine: Engine
    frames: FrameStore
    ids: dict[str, int]
    files: dict[str, Path]

    def get(self, name: str) -> TraceFrames:
        return self.frames.get(self.ids[name])

    def rows(self, sql: str, **params: Any) -> list[Any]:
        with self.engine.connect() as conn:
            return list(conn.execute(text(sql), params).all())


def load_traces(backend: str, tmp_path_factory: pytest.TempPathFactory,
                names: tuple[str, ...] = tuple(TRACES)) -> Iterator[Loaded]:
    """The traces ``names`` of TRACES ingested once into a ``backend`` database
    (a module fixture's body: ``yield from load_traces(request.param, ...)``)."""
    from ingest.load.pipeline import ingest_trace_file
    from ingest.store.db import make_engine

    base = tmp_path_factory.mktemp("causality")
    files = {name: Path(TRACES[name]()) for name in names}
    for url in make_db_url(backend, base):
        eng = make_engine(url)
        try:
            ids = {name: ingest_trace_file(eng, path, data_dir=base).id
                   for name, path in files.items()}
            yield Loaded(eng, FrameStore(eng, base), ids, files)
        finally:
            eng.dispose()


def go_unblocks(path: Path) -> list[tuple[int, int, int | None, tuple[str, ...]]]:
    """Go's own wake-ups of a trace: (index among its state transitions, woken
    goroutine, context goroutine or None, the event's stack's functions)."""
    events, err = go_parsed(path)
    assert err is None, err
    out = []
    transitions = [e for e in events if e.kind == "StateTransition"]
    for i, e in enumerate(transitions):
        if e.resource == "goroutine" and e.from_state == "Waiting" and e.to_state == "Runnable":
            out.append((i, e.rid, e.g if e.g >= 0 else None, tuple(f.func for f in e.stack)))
    return out
