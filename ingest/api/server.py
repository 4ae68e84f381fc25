"""The standalone ingest server: a Flask app factory around :mod:`ingest.api.blueprint`.

``create_app(config)`` does all the work when called (the engine is made and the
database migrated then, and kept on the app), never at import, so that a WSGI
server can import this module in its master process and build one app per worker
after forking.
"""

from __future__ import annotations

from flask import Flask

from ingest.api import blueprint as api
from ingest.config import Settings
from ingest.store.db import make_engine


def create_app(config: Settings | None = None) -> Flask:
    """A Flask app serving the ingest API for ``config`` (default: from the environment)."""
    if config is None:
        config = Settings.from_env()
    app = Flask("gmpscope.ingest")
    # JSON answers keep the order we build them in.
    app.json.sort_keys = False  # type: ignore[attr-defined]
    api.init_app(app, config, make_engine(config.db_url, busy_timeout_ms=config.busy_timeout_ms))
    return app
