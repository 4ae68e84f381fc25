"""Settings of the ingest service, from the environment and command-line overrides.

Nothing here is read at import time: call :func:`Settings.from_env` where the
application is built (the CLI, the server factory, a test).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

#: Default limit of one uploaded trace (2 GiB).
DEFAULT_MAX_UPLOAD = 2 << 30
#: How long a writer waits for SQLite's write lock before giving up (ms).
DEFAULT_BUSY_TIMEOUT_MS = 300_000
#: How long a query of the SQL page may run before it is stopped (ms).
DEFAULT_SQL_TIMEOUT_MS = 10_000
#: Most rows a query of the SQL page answers (its ``limit`` may ask for fewer).
DEFAULT_SQL_MAX_ROWS = 10_000


def default_data_dir(env: Mapping[str, str]) -> Path:
    """``$GMPSCOPE_DATA``, else ``$XDG_DATA_HOME/gmpscope``, else ``~/.local/share/gmpscope``."""
    if env.get("GMPSCOPE_DATA"):
        return Path(env["GMPSCOPE_DATA"]).expanduser()
    xdg = env.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "gmpscope"


def sqlite_url(path: Path) -> str:
    """An SQLAlchemy URL for an SQLite file."""
    return f"sqlite:///{path.resolve()}"


@dataclass(frozen=True)
class Settings:
    """Everything the ingest service needs to know about its environment.

    - ``data_dir``: raw trace files (named by sha256) and the default database;
    - ``db_url``: SQLAlchemy URL (``sqlite:///...`` or ``postgresql+psycopg://...``);
    - ``max_upload``: largest accepted upload in bytes;
    - ``token``: the write token; when set, every request needs a token
      (``Authorization: Bearer <token>`` or the login form's cookie), see
      :mod:`ingest.api.auth`;
    - ``read_token``: a token that grants reads only (needs ``token``);
    - ``busy_timeout_ms``: SQLite write-lock wait;
    - ``sql_timeout_ms``, ``sql_max_rows``: the SQL page's time limit and row cap.
    """

    data_dir: Path
    db_url: str
    max_upload: int = DEFAULT_MAX_UPLOAD
    token: str | None = None
    read_token: str | None = None
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS
    sql_timeout_ms: int = DEFAULT_SQL_TIMEOUT_MS
    sql_max_rows: int = DEFAULT_SQL_MAX_ROWS

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        db_url: str | None = None,
        data_dir: Path | None = None,
        max_upload: int | None = None,
        token: str | None = None,
        read_token: str | None = None,
    ) -> Settings:
        """Settings from ``env`` (default ``os.environ``); keyword arguments win.

        Variables: ``GMPSCOPE_DATA``, ``GMPSCOPE_DB`` (database URL),
        ``GMPSCOPE_MAX_UPLOAD`` (bytes), ``GMPSCOPE_TOKEN``, ``GMPSCOPE_READ_TOKEN``,
        ``GMPSCOPE_BUSY_TIMEOUT_MS``, ``GMPSCOPE_SQL_TIMEOUT_MS``,
        ``GMPSCOPE_SQL_MAX_ROWS``.
        """
        e = os.environ if env is None else env
        ddir = data_dir if data_dir is not None else default_data_dir(e)
        url = db_url or e.get("GMPSCOPE_DB") or sqlite_url(ddir / "gmpscope.db")
        limit = max_upload if max_upload is not None else _int(e, "GMPSCOPE_MAX_UPLOAD",
                                                                DEFAULT_MAX_UPLOAD)
        tok = token if token is not None else (e.get("GMPSCOPE_TOKEN") or None)
        read = read_token if read_token is not None else (e.get("GMPSCOPE_READ_TOKEN") or None)
        check_tokens(tok, read)
        busy = _int(e, "GMPSCOPE_BUSY_TIMEOUT_MS", DEFAULT_BUSY_TIMEOUT_MS)
        sql_ms = _int(e, "GMPSCOPE_SQL_TIMEOUT_MS", DEFAULT_SQL_TIMEOUT_MS)
        sql_rows = _int(e, "GMPSCOPE_SQL_MAX_ROWS", DEFAULT_SQL_MAX_ROWS)
        if sql_ms == 0 or sql_rows == 0:
            raise ValueError("GMPSCOPE_SQL_TIMEOUT_MS and GMPSCOPE_SQL_MAX_ROWS must be positive")
        return cls(data_dir=ddir, db_url=url, max_upload=limit, token=tok, read_token=read,
                   busy_timeout_ms=busy, sql_timeout_ms=sql_ms, sql_max_rows=sql_rows)

    def with_overrides(self, **changes: object) -> Settings:
        """A copy with some fields changed."""
        return replace(self, **changes)  # type: ignore[arg-type]

    @property
    def raw_dir(self) -> Path:
        """Where raw trace files are kept, each named ``<sha256>.trace``."""
        return self.data_dir / "traces"

    @property
    def tmp_dir(self) -> Path:
        """Scratch space for uploads and decodes (same file system as raw_dir)."""
        return self.data_dir / "tmp"


def check_tokens(token: str | None, read_token: str | None) -> None:
    """Refuse a read token without a write token (writes would be open while reads
    are not) or equal to it (which role would it grant?)."""
    if read_token is None:
        return
    if token is None:
        raise ValueError("GMPSCOPE_READ_TOKEN needs GMPSCOPE_TOKEN (the write token) too")
    if read_token == token:
        raise ValueError("GMPSCOPE_READ_TOKEN must differ from GMPSCOPE_TOKEN")


def _int(env: Mapping[str, str], key: str, default: int) -> int:
    raw = env.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{key} must be an integer, not {raw!r}") from None
    if value < 0:
        raise ValueError(f"{key} must not be negative")
    return value
