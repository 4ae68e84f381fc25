"""``make run`` as a user runs it: tools/run.py (what the Makefile's run target runs
after setup) on a fresh data directory, as real processes, stopped by a real SIGINT
to its process group, as Ctrl-C in a terminal sends it.

Checked through the real server's API and in real Chromium: the samples light up the
pages only gmpscope has (an OS recording, an old-format trace, a flight-recorder
snapshot), the library shows each sample's line and what the live demo runs, the
live session moves, and after Ctrl-C no process it started is left.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest
import requests

from ingest.views.samples import parse_table
from tests.support.goparsed import go_parsed

if TYPE_CHECKING:
    from playwright.sync_api import Browser

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
#: A hang guard for waits on real processes, not a speed limit.
GUARD_S = 300.0
#: The flightrec workload's first rebuild (collectors/workloads/cmd/flightrec: 1 << 12 items).
FIRST_REBUILD = "rebuilt 4096 items"


def wait_for(what: str, check: Callable[[], Any], guard: float = GUARD_S) -> Any:
    deadline = time.monotonic() + guard
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def processes_of(data: Path) -> list[tuple[int, str]]:
    """Every process (pid, command line) whose environment names this data directory:
    all that tools/run.py started inherit it, down to gunicorn's workers and Go's
    programs."""
    marker = f"GMPSCOPE_DATA={data}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if marker in (proc / "environ").read_bytes().split(b"\0"):
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                found.append((int(proc.name), cmd.strip()))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


@dataclass
class Run:
    proc: subprocess.Popen[bytes]
    data: Path
    url: str
    log: Path

    def get(self, path: str) -> Any:
        r = requests.get(self.url + path, timeout=60)
        r.raise_for_status()
        return r.json()

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def start_run(base: Path, *args: str) -> Run:
    data = base / "data"
    log = base / "run.log"
    env = {k: v for k, v in os.environ.items()
           if k not in ("GMPSCOPE_DB", "GMPSCOPE_TOKEN")}
    env["GMPSCOPE_DATA"] = str(data)
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tools.run", "--host", "127.0.0.1",
                                 "--port", "0", *args], cwd=REPO, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)

    def ready() -> str | None:
        assert proc.poll() is None, log.read_text(errors="replace")
        try:
            found = json.loads((data / "serve.json").read_text())
            return str(found["url"]) if requests.get(found["url"] + "/healthz",
                                                     timeout=5).ok else None
        except (OSError, ValueError, KeyError, requests.RequestException):
            return None

    return Run(proc, data, wait_for("the explorer", ready), log)


def ctrl_c(run: Run) -> int:
    """SIGINT to the run's process group, as a terminal's Ctrl-C; its exit status."""
    os.killpg(run.proc.pid, signal.SIGINT)
    return run.proc.wait(GUARD_S)


def clean_up(run: Run) -> None:
    """After a failed test: nothing of this run is left running."""
    if run.proc.poll() is None:
        ctrl_c(run)
    for pid, _cmd in processes_of(run.data):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def made_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    run = start_run(tmp_path_factory.mktemp("make-run"))
    try:
        yield run
    finally:
        clean_up(run)


def by_name(run: Run) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in run.get("/api/traces")["traces"]}


@pytest.mark.slow
def test_the_samples_bring_an_os_recording_an_old_format_and_a_flight_recorder(
        made_run: Run) -> None:
    traces = by_name(made_run)
    # The OS recording: attached to the Go trace of the same run, every row of it.
    rec = traces["go1.27-httpnet-os.trace"]
    alignment = made_run.get(f"/api/traces/{rec['id']}/poller/alignment")
    assert alignment["rows"] == pq.read_metadata(
        SAMPLES / "go1.27-httpnet-os" / "poller.parquet").num_rows
    assert alignment["method"] == "clock-snapshot" and alignment["matched"] > 0
    page = made_run.get(f"/api/traces/{rec['id']}/poller")
    assert page and "error" not in page
    # The old format: what the file's header says.
    old = traces["go1.19-httpnet.trace"]
    assert (SAMPLES / "go1.19-httpnet.trace").read_bytes()[:16].rstrip(b"\0") == b"go 1.19 trace"
    assert (old["go_version"], old["family"]) == ("1.19", "v1")
    # The flight-recorder snapshot: its logs as Go reads them, ending with the slow
    # request that triggered it, and beginning mid-run (the program's first rebuild
    # is older than the recorder's window).
    snap = traces["go1.27-slowreq-flightrecorder.trace"]
    logs = made_run.get(f"/api/traces/{snap['id']}/annotations")["logs"]["rows"]
    events, err = go_parsed(SAMPLES / "go1.27-slowreq-flightrecorder.trace")
    assert err is None
    assert [(r["ts"], r["category"], r["message"]) for r in logs] == [
        (e.ts, e.category, e.message) for e in events if e.kind == "Log"]
    assert logs[-1]["category"] == "slow request"
    assert "flight recorder snapshot" in logs[-1]["message"]
    assert FIRST_REBUILD not in [r["message"] for r in logs]
    assert logs[0]["message"].startswith("rebuilt ")


@pytest.mark.slow
def test_the_live_demo_moves(made_run: Run) -> None:
    note = wait_for("the demo's note", lambda: made_run.get("/api/live/demo")["demo"])
    assert [p["name"] for p in note["processes"]] == ["demoservice", "loadgen", "gmpscope live"]
    assert all(p["alive"] for p in note["processes"])
    assert "LIVE_DEMO=0" in note["stop"]
    out = made_run.output()
    for p in note["processes"]:
        assert f"live demo: {p['name']} (pid {p['pid']})" in out
    assert f"open {made_run.url}/live/demo" in out

    def segments() -> int:
        r = requests.get(made_run.url + "/api/live/sessions/demo", timeout=60)
        return int(r.json()["segments"]) if r.ok else 0

    first = wait_for("a first window", segments)
    wait_for("the next window", lambda: segments() > first)
    seconds = made_run.get("/api/live/sessions/demo/seconds")["seconds"]
    assert seconds and max(s["syscalls"] for s in seconds) > 0


@pytest.mark.slow
def test_the_library_shows_each_samples_line_and_the_demo(made_run: Run,
                                                          browser: Browser) -> None:
    from tests.support.browser import shot, wait_for_dash

    readme = {re.sub(r"`([^`]*)`.*", r"\1", first, count=1): (shows, click)
              for first, shows, click in parse_table((SAMPLES / "README.md").read_text())}
    hints = made_run.get("/api/samples")["samples"]
    assert len(hints) == len(readme)
    note = wait_for("the demo's note", lambda: made_run.get("/api/live/demo")["demo"])
    # The session's Chromium (tests/conftest.py): a second Playwright in this
    # worker would fail.
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.goto(made_run.url + "/")
        wait_for_dash(page, "#library-demo")
        shot(page, "library-samples-and-demo")
        for h in hints:
            shows, click = readme[h["path"]]
            page_name, hint = re.match(r"`(\w+)`:\s*(.*)", click).groups()  # type: ignore[union-attr]
            line = page.locator(f"#library-hint-{h['id']}")
            text = " ".join(line.inner_text().split())
            want = f"{shows} Click first: {page_name} ({hint})".replace("`", "")
            assert text == " ".join(want.split())
            assert line.locator("a").get_attribute("href") == \
                f"/traces/{h['id']}/{page_name}"
        demo = " ".join(page.locator("#library-demo").inner_text().split())
        for proc in note["processes"]:
            assert f"{proc['name']} (pid {proc['pid']})" in demo
        assert "make run LIVE_DEMO=0" in demo
        assert page.locator("#library-demo-link").get_attribute("href") == "/live/demo"
    finally:
        context.close()


@pytest.mark.slow
def test_ctrl_c_leaves_no_process(made_run: Run) -> None:
    # Last in this module: it stops the run the others use.
    note = made_run.get("/api/live/demo")["demo"]
    serve_pid = json.loads((made_run.data / "serve.json").read_text())["pid"]
    running = {pid for pid, _ in processes_of(made_run.data)}
    started = {made_run.proc.pid, serve_pid, *(p["pid"] for p in note["processes"])}
    assert started <= running and len(running) > len(started)  # gunicorn's workers too
    assert [p.name[:12] for p in (made_run.data / "tmp" / "demo").iterdir()] == ["demoservice-"]
    assert ctrl_c(made_run) == 0
    assert processes_of(made_run.data) == []
    assert list((made_run.data / "tmp" / "demo").iterdir()) == []  # the service's scratch
    assert not (made_run.data / "demo.json").exists()
    assert not (made_run.data / "serve.json").exists()
    assert "SIGINT: stopping the live demo and the explorer" in made_run.output()


@pytest.mark.slow
def test_live_demo_off(tmp_path: Path) -> None:
    samples = tmp_path / "samples"
    samples.mkdir()
    (samples / "go1.27-mutex.trace").write_bytes((SAMPLES / "go1.27-mutex.trace").read_bytes())
    (samples / "README.md").write_text(
        "| sample | what it shows | click first |\n| --- | --- | --- |\n"
        "| `go1.27-mutex.trace` | a contended mutex | `overview`: the finding |\n")
    run = start_run(tmp_path, "--live-demo", "0", "--samples", str(samples))
    try:
        assert run.get("/api/live/demo") == {"demo": None}
        assert run.get("/api/live/sessions") == {"sessions": []}
        assert [h["page"] for h in run.get("/api/samples")["samples"]] == ["overview"]
        assert "no live demo (LIVE_DEMO=0)" in run.output()
        assert ctrl_c(run) == 0
        assert processes_of(run.data) == []
    finally:
        clean_up(run)


def test_make_run_passes_live_demo() -> None:
    out = subprocess.run(["make", "-n", "run", "LIVE_DEMO=0", "-o", ".venv/.installed"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert re.search(r"-m tools\.run .*--live-demo 0", out.replace("\\\n", " "))
