"""Where diagram builders get their data: the database engine and the frame cache."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine

from ingest.derive.frames import FrameStore


@dataclass(frozen=True)
class DiagramSource:
    """Data access for a diagram builder (the same engine and frames the app uses)."""

    engine: Engine
    frames: FrameStore
