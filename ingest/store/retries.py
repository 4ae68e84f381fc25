"""Transactions run again while the database is busy.

The storage layer makes each write all-or-nothing, so a transaction that lost
a lock race can simply be run again; :func:`with_retries` does that, with
jittered backoff, for every door that writes (the HTTP API, the job runner,
the live sessions, the poller).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

log = logging.getLogger("gmpscope.ingest.api")

T = TypeVar("T")


def _retryable(e: DBAPIError) -> bool:
    """Lock contention and serialization failures: worth doing the transaction again."""
    if isinstance(e, IntegrityError):
        # Two uploads of the same content raced to insert it; the retry finds it.
        return True
    if not isinstance(e, OperationalError):
        return False
    msg = str(e.orig).lower()
    code = getattr(e.orig, "sqlstate", None)
    return ("database is locked" in msg or "database is busy" in msg or "busy" in msg
            or code in ("40001", "40P01", "55P03"))


def with_retries(work: Callable[[], T], attempts: int = 8) -> T:
    """Run one transaction, again with jittered backoff while the database is busy.

    The storage layer makes each call all-or-nothing, so running it again is
    safe. SQLite answers 'database is locked' when its busy timeout runs out
    under heavy write contention; that must never reach a client.
    """
    delay = 0.05
    for attempt in range(attempts):
        try:
            return work()
        except DBAPIError as e:
            if attempt == attempts - 1 or not _retryable(e):
                raise
            log.warning("database busy (%s), retry %d", type(e.orig).__name__, attempt + 1)
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 2.0)
    raise AssertionError("unreachable")
