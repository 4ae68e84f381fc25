"""The rules on traces of other Go toolchains (new trace format, 1.23 and
1.25): each workload still raises its rule, and the healthy control nothing.
(Go 1.19-1.21 traces do not record when a P was taken from a syscall, so the
syscall rules cannot fire there: docs/diagnostics.md.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from ingest.derive.frames import FrameStore
from ingest.diagnose import diagnose
from ingest.load.pipeline import ingest_trace_file
from ingest.store.db import make_engine
from tests.support.workload_traces import workload_trace

pytestmark = pytest.mark.slow

EXPECTED = {
    "syscallblock": {"syscall.blocking", "syscall.slow-handoff", "sched.latency"},
    "schedlatency": {"sched.latency"},
    "goroutineleak": {"goroutine.leak"},
    "connleak": {"netpoll.parked-leak", "goroutine.leak"},
    "mutex": {"sync.contention"},
    "gcpressure": {"gc.pressure"},
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, Path]]:
    d = tmp_path_factory.mktemp("diag-versions")
    engine = make_engine(f"sqlite:///{d / 'gmpscope.db'}")
    yield engine, d
    engine.dispose()


def raised(store: tuple[Engine, Path], version: str, workload: str) -> set[str]:
    engine, d = store
    tid = ingest_trace_file(engine, workload_trace(version, workload), workload,
                            data_dir=d).id
    rep = diagnose(engine, FrameStore(engine, d).get(tid))
    return {f["rule"] for f in rep["findings"]}


@pytest.mark.parametrize("version", ["1.23.9", "1.25.5"])
@pytest.mark.parametrize("workload", sorted(EXPECTED))
def test_rule_raised_by_its_workload(store: tuple[Engine, Path], version: str,
                                     workload: str) -> None:
    assert EXPECTED[workload] <= raised(store, version, workload)


@pytest.mark.parametrize("version", ["1.23.9", "1.25.5"])
def test_healthy_control(store: tuple[Engine, Path], version: str) -> None:
    assert raised(store, version, "healthy") == set()
