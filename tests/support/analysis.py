"""Shared access for the analysis tests: the ``samples_server``'s own
database and frame cache, opened in the test process, so that the query
functions run in-process on exactly what the server serves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, text

from ingest.derive.frames import FrameStore, TraceFrames
from ingest.store.db import make_engine
from tests.support.server import Served


@dataclass
class Store:
    engine: Engine
    frames: FrameStore
    ids: dict[str, int]

    def get(self, name: str) -> TraceFrames:
        return self.frames.get(self.ids[name])

    def rows(self, sql: str, **params: Any) -> list[Any]:
        with self.engine.connect() as conn:
            return list(conn.execute(text(sql), params).all())


def open_store(served: Served, ids: dict[str, int]) -> Store:
    """Engine and FrameStore on the served data directory."""
    engine = make_engine(f"sqlite:///{served.data_dir / 'gmpscope.db'}")
    return Store(engine, FrameStore(engine, served.data_dir), ids)
