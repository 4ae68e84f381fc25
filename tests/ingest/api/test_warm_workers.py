"""The warm's workers (ingest.api.warm_workers): steps shared out between
threads and a forked process through one queue, each step run once.

A fork is only made when the process has one thread, which a test worker
(pytest-xdist's) never has: the forking runs are each a fresh Python process
that loads the 2 MB sample trace, as ``gmpscope ingest`` does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from gmpscope.commands import ingest as cli_ingest
from ingest.config import sqlite_url
from ingest.derive.frames import FrameStore
from ingest.store.db import make_engine

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "samples" / "go1.27-httpnet-2MB.trace"

#: Loads the sample into argv[1] and runs six steps on two workers (fork
#: asked for); argv[2] "thread": a thread is alive meanwhile, "child dies":
#: the forked worker is killed in its first step. Each step
#: records the process it ran in; the first two wait (up to 60 s) until
#: both have started, so that both workers take part; step 3 raises.
PROBE = r"""
import json, os, sys, threading, time
from pathlib import Path
from gmpscope.commands import ingest as cli_ingest
from ingest.api.warm_workers import run_steps
from ingest.config import sqlite_url
from ingest.derive.frames import FrameStore
from ingest.store.db import checkpoint_meanwhile, make_engine

data, mode = Path(sys.argv[1]), sys.argv[2]
engine = make_engine(sqlite_url(data / "t.db"))
res = cli_ingest.ingest_path(engine, Path(sys.argv[3]), "sample", data, warm=False)
marks = data / "marks"
marks.mkdir()
stop = threading.Event()
if mode == "thread":
    threading.Thread(target=stop.wait).start()

parent = os.getpid()

def step(k):
    def run(frames):
        assert frames.intervals is not None
        (marks / f"{k}-{os.getpid()}").touch()
        if mode == "child dies" and os.getpid() != parent:
            os.kill(os.getpid(), 9)
        if k < 2:
            deadline = time.monotonic() + 60
            while len(list(marks.iterdir())) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
        if k == 3:
            raise RuntimeError("step 3 fails")
    return run

steps = [(f"step {k}", step(k)) for k in range(6)]
done = []
run_steps(steps, lambda: FrameStore(engine, data, capacity=1).get(res.id), workers=2,
          fork=True, done=lambda i, s: done.append(i),
          after_fork=lambda: engine.dispose(close=False),
          beside=lambda: checkpoint_meanwhile(engine), what="the sample")
stop.set()
ran = {}
for p in marks.iterdir():
    k, pid = p.name.split("-")
    ran.setdefault(k, []).append(int(pid))
print(json.dumps({"pid": os.getpid(), "done": done, "ran": ran}))
"""


def _probe(tmp_path: Path, mode: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path), mode, str(SAMPLE)],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    got: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    got["log"] = out.stderr
    return got


def test_a_forked_worker_and_this_process_take_each_step_once(tmp_path: Path) -> None:
    got = _probe(tmp_path, "alone")
    ran = got["ran"]
    assert isinstance(ran, dict)
    assert sorted(ran) == [str(k) for k in range(6)]
    assert all(len(pids) == 1 for pids in ran.values())  # once each
    pids = {p for pids in ran.values() for p in pids}
    assert len(pids) == 2 and got["pid"] in pids  # this process and its child
    assert sorted(got["done"]) == list(range(6))
    assert "step 3 of the sample failed" in got["log"] and "step 3 fails" in got["log"]


def test_a_killed_forked_worker_loses_only_its_step(tmp_path: Path) -> None:
    got = _probe(tmp_path, "child dies")
    ran = got["ran"]
    assert isinstance(ran, dict)
    child = {p for pids in ran.values() for p in pids} - {got["pid"]}
    assert len(child) == 1  # it started one step, and died in it
    lost = [int(k) for k, pids in ran.items() if pids == list(child)]
    assert len(lost) == 1
    # This process ran every other step, and heard of each; the warm ended.
    assert sorted(got["done"]) == sorted(set(range(6)) - set(lost))
    assert "the forked worker warming the sample ended with status" in got["log"]


def test_no_fork_beside_another_thread(tmp_path: Path) -> None:
    got = _probe(tmp_path, "thread")
    ran = got["ran"]
    assert isinstance(ran, dict)
    assert sorted(ran) == [str(k) for k in range(6)]
    # Two threads of this one process.
    assert {p for pids in ran.values() for p in pids} == {got["pid"]}
    assert sorted(got["done"]) == list(range(6))


#: ``gmpscope ingest``'s warm in a fresh process: two workers, one forked.
WARM = r"""
import sys
from pathlib import Path
from gmpscope.commands import ingest as cli_ingest
from ingest.api.warm import warm_reports
from ingest.config import sqlite_url
from ingest.store.db import make_engine

data = Path(sys.argv[1])
engine = make_engine(sqlite_url(data / "t.db"))
res = cli_ingest.ingest_path(engine, Path(sys.argv[2]), "sample", data, warm=False)
from ingest.api.warm_workers import can_fork
forks = can_fork()  # the load's threads have all ended
heard = []
warm_reports(engine, data, res.id, threads=2, fork=True,
             progress=lambda *a: heard.append(a[1:]))
print((*heard[-1], forks))
"""


def test_reports_of_a_forked_worker_are_the_ones_built_by_one_thread(tmp_path: Path) -> None:
    files: list[dict[str, bytes]] = []
    for how in ("thread", "fork"):
        data = tmp_path / how
        if how == "thread":
            engine = make_engine(sqlite_url(data / "t.db"))
            res = cli_ingest.ingest_path(engine, SAMPLE, "sample", data, warm=False)
            from ingest.api.warm import warm_reports

            warm_reports(engine, data, res.id, threads=1)
            engine.dispose()
        else:
            data.mkdir()
            out = subprocess.run([sys.executable, "-c", WARM, str(data), str(SAMPLE)],
                                 cwd=REPO, capture_output=True, text=True, timeout=300)
            assert out.returncode == 0, out.stderr
            done, total, forks = eval(out.stdout.splitlines()[-1])  # noqa: S307 - our tuple
            assert forks  # a load leaves no thread behind: the warm may fork
            assert done == total > 1  # every step heard of, the child's too
        engine = make_engine(sqlite_url(data / "t.db"))
        frames = FrameStore(engine, data).get(1)
        assert frames.directory is not None
        derived = next(frames.directory.glob("derived-v*"))
        files.append({p.name: p.read_bytes() for p in derived.glob("*.json")})
        engine.dispose()
    one, forked = files
    assert len(one) >= 6
    assert one == forked
