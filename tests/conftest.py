"""Fixtures shared by the service and browser tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.support.server import SAMPLES, Served  # noqa: E402


@pytest.fixture(scope="session")
def samples_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``gmpscope serve`` with every sample trace of samples/ ingested (read-only use:
    tests that change data start their own server)."""
    with Served(tmp_path_factory.mktemp("samples-server"), SAMPLES) as served:
        yield served


@pytest.fixture(scope="session")
def sample_ids(samples_server: Served) -> dict[str, int]:
    """Sample file name -> its trace id in ``samples_server``."""
    traces = samples_server.get("/api/traces").json()["traces"]
    return {t["name"]: t["id"] for t in traces}
