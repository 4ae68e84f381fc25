"""What pages and callbacks need from the running app, kept on the Flask app.

``ui_context()`` is called inside a request (a page render or a Dash callback)
and returns the :class:`UIContext` that :func:`app.server.create_app` stored on
``flask.current_app``: no module-level state.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import current_app
from sqlalchemy import Engine

from ingest.config import Settings
from ingest.derive.frames import FrameStore

EXTENSION = "gmpscope_ui"


@dataclass
class UIContext:
    """Settings, database engine and frame cache of one app."""

    settings: Settings
    engine: Engine
    frames: FrameStore


def ui_context() -> UIContext:
    """The UIContext of the app serving the current request."""
    ctx: UIContext = current_app.extensions[EXTENSION]
    return ctx
