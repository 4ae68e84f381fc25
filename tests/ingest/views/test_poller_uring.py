"""eBPF recordings in the store: ready descriptors and io_uring requests (revision 0012),
on SQLite and PostgreSQL, read back by the poller page's data.

Data: the real eBPF recordings in tests/data/ebpf (capture.sh): uring_rw (2 rounds of
4 writes then 4 reads, each batch submitted and awaited by one io_uring_enter) and
httpnet. A partial recording (what a killed recorder leaves) is made from the
committed raw output.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq  # type: ignore[import-untyped]
from sqlalchemy import Engine, select

from ingest.load.delete import delete_trace
from ingest.load.poller import ingest_recording_dir, is_recording_dir, read_recording
from ingest.store import poller_models
from ingest.views.poller import poller_page
from tests.support.ingest_fixtures import db_url, engine  # noqa: F401

DATA = Path(__file__).resolve().parents[2] / "data" / "ebpf"


def _ingest(engine: Engine, name: str, tmp: Path) -> int:  # noqa: F811
    res = ingest_recording_dir(engine, DATA / name, data_dir=tmp)
    assert res.attached is None
    return res.trace.id


def test_uring_requests_stored_and_shown(engine: Engine, tmp_path: Path) -> None:  # noqa: F811
    tid = _ingest(engine, "uring_rw", tmp_path)
    pu = poller_models.poller_uring
    with engine.connect() as conn:
        stored = conn.execute(select(pu).where(pu.c.trace_id == tid).order_by(pu.c.seq)).all()
    want = pq.read_table(DATA / "uring_rw" / "uring.parquet").to_pylist()
    assert [(r.submit_wall_ns, r.complete_wall_ns, r.opcode, r.result, r.tid) for r in stored] \
        == [(w["submit_ns"], w["complete_ns"], w["opcode"], w["result"], w["tid"]) for w in want]
    # Standalone: trace time is the wall clock.
    assert all(r.ts == r.submit_wall_ns for r in stored)
    u = poller_page(engine, tid)["uring_requests"]
    assert u["requests"] == 16 and u["in_flight"] == 0
    assert {o["opcode"]: o["count"] for o in u["by_opcode"]} == {"WRITE": 8, "READ": 8}
    assert sum(sum(c) for c in u["histogram"].values()) == 16
    # A batch of 4 is awaited before the next is queued: never more than 4 in flight.
    assert 1 <= u["depth"]["max"] <= 4 and u["depth"]["depth"][-1] == 0
    lat = sorted(w["latency_ns"] for w in want)
    assert u["latency"]["max"] == lat[-1] and u["latency"]["p50"] == lat[len(lat) // 2 - 1]
    assert delete_trace(engine, tid)
    with engine.connect() as conn:
        assert conn.execute(select(pu.c.seq).where(pu.c.trace_id == tid)).first() is None


def test_ready_fds_stored_and_shown(engine: Engine, tmp_path: Path) -> None:  # noqa: F811
    tid = _ingest(engine, "httpnet", tmp_path)
    pe = poller_models.poller_events
    with engine.connect() as conn:
        stored = conn.execute(select(pe.c.seq, pe.c.ready_fds).where(pe.c.trace_id == tid)
                              .order_by(pe.c.seq)).all()
    want = pq.read_table(DATA / "httpnet" / "poller.parquet").column("ready_fds").to_pylist()
    assert [r.ready_fds for r in stored] == want
    d = poller_page(engine, tid)
    r = d["ready"]
    assert r["waits"] == sum(1 for v in want if v)
    assert r["events"] == sum(len(v.split(",")) for v in want if v) and r["unknown"] == 0
    assert r["top"] and all(t["fd_kind"] in ("tcp", "eventpoll", None) or t["fd_kind"]
                            for t in r["top"])
    lanes = [w for ln in d["epoll"]["lanes"] for w in ln["waits"]]
    assert sum(1 for w in lanes if w["ready_fds"]) == r["waits"]
    assert d["alignment"]["backend"] == "ebpf" and d["alignment"]["partial"] is False


def test_killed_recorders_directory_is_ingested_as_partial(engine: Engine,  # noqa: F811
                                                           tmp_path: Path) -> None:
    """The raw output and the notes a killed recorder leaves (no poller.parquet):
    ingest makes the recording, marked partial, then stores it."""
    src, rec = DATA / "httpnet", tmp_path / "killed"
    rec.mkdir()
    meta = json.loads((src / "meta.json").read_text())
    with gzip.open(src / "ebpf.txt.gz", "rb") as fin, open(rec / "ebpf.txt", "wb") as fout:
        shutil.copyfileobj(fin, fout)
    (rec / ".ebpf.notes.json").write_text(json.dumps(
        {"mode": meta["mode"], "command": meta["command"], "pid": meta["pid"],
         "clock": meta["clock"], "started_ns": meta["start_wall_ns"], "io_uring": None}))
    assert is_recording_dir(rec)
    recording = read_recording(rec)
    assert recording.meta["partial"] is True
    assert recording.meta["stopped_by"] == "recorder killed"
    whole = pq.read_table(src / "poller.parquet")
    # The same calls; times differ by at most the end reading's interpolation.
    assert recording.rows == whole.num_rows
    assert recording.table.column("name").to_pylist() == whole.column("name").to_pylist()
    res = ingest_recording_dir(engine, rec, data_dir=tmp_path)
    d = poller_page(engine, res.trace.id)
    assert d["alignment"]["partial"] is True
