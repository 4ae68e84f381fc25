"""Many clients uploading and reading at once against a running gmpscope server.

Each client (a thread with its own HTTP session) first uploads the same trace
as every other client at the same moment, then runs ``--ops`` random
operations: a one-shot upload (``POST /api/traces``), a chunked upload
(``/api/uploads``, its chunks, ``complete``, the job polled to its end), the
trace list, one trace's summary, and its page APIs (timeline, overview,
syscalls, annotations). Uploads pick from the real traces of the repository,
so several clients send the same content.

Checked on the way (any failure is an error, printed and counted):

- no 5xx answer, no "database is locked" in any answer, no connection error;
- every upload of the same content answers the same trace id (stored once);
- every read of a trace's summary is whole (status complete or damaged,
  transition counts adding up to ``transitions``) and identical to every
  other read of it; every listed trace reads back;
- at the end: one trace per distinct sha256 uploaded, no other trace.

Prints requests, clients, errors and latency percentiles (p50/p99/max) per
kind of request. Usage::

    gmpscope serve --port 8079 --data-dir /tmp/lt --workers 2 --threads 8 &
    python -m tools.load_test http://127.0.0.1:8079 --clients 16 --ops 30
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

REPO = Path(__file__).resolve().parents[1]
#: Real traces small enough to upload many times.
TRACES = sorted(p for p in [*(REPO / "tests" / "data" / "traces").glob("*.trace"),
                            *(REPO / "samples").glob("*.trace")]
                if p.stat().st_size < 300_000)
PAGE_APIS = ("timeline", "overview", "syscalls/summary", "annotations")
#: Weights of the operations after the first upload.
OPS = {"upload": 2, "chunked": 2, "list": 3, "summary": 3, "page": 4}
#: A guard against a job that never ends (a hang, not a speed limit).
JOB_GUARD_S = 600.0


@dataclass
class Stats:
    """Everything the clients saw, shared under a lock."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)
    #: sha256 -> trace ids answered for uploads of it
    stored: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    #: trace id -> the first summary read of it
    summaries: dict[int, dict[str, Any]] = field(default_factory=dict)

    def error(self, msg: str) -> None:
        with self.lock:
            self.errors.append(msg)

    @property
    def requests(self) -> int:
        return sum(len(v) for v in self.latencies.values())


class Client:
    """One client: a session, a random generator, and the shared stats."""

    def __init__(self, url: str, stats: Stats, seed: int, chunks: int) -> None:
        self.url = url
        self.stats = stats
        self.rng = random.Random(seed)
        self.http = requests.Session()
        self.chunks = chunks
        self.trace_ids: list[int] = []

    def call(self, kind: str, method: str, path: str, **kw: Any) -> requests.Response | None:
        t0 = time.perf_counter()
        try:
            r = self.http.request(method, self.url + path, timeout=600, **kw)
        except requests.RequestException as e:
            self.stats.error(f"{method} {path}: {type(e).__name__}: {e}")
            return None
        took = time.perf_counter() - t0
        with self.stats.lock:
            self.stats.latencies[kind].append(took)
        if r.status_code >= 500 or "database is locked" in r.text:
            self.stats.error(f"{method} {path}: {r.status_code} {r.text[:200]}")
        return r

    def stored(self, sha: str, tid: int) -> None:
        with self.stats.lock:
            self.stats.stored[sha].add(tid)
        self.trace_ids.append(tid)

    def upload(self, path: Path) -> None:
        data = path.read_bytes()
        r = self.call("upload", "POST", "/api/traces", params={"name": path.name}, data=data)
        if r is None:
            return
        if r.status_code not in (200, 201):
            self.stats.error(f"upload {path.name}: {r.status_code} {r.text[:200]}")
            return
        body = r.json()
        if body["sha256"] != hashlib.sha256(data).hexdigest():
            self.stats.error(f"upload {path.name}: answered sha256 {body['sha256']}")
        self.stored(body["sha256"], int(body["id"]))

    def chunked(self, path: Path) -> None:
        data = path.read_bytes()
        r = self.call("chunked", "POST", "/api/uploads",
                      params={"name": path.name, "size": len(data)})
        if r is None or r.status_code != 201:
            self.stats.error(f"open upload {path.name}: {r and r.status_code} {r and r.text}")
            return
        up = r.json()["upload_id"]
        step = len(data) // self.chunks + 1
        for off in range(0, len(data), step):
            r = self.call("chunk", "PUT", f"/api/uploads/{up}", params={"offset": off},
                          data=data[off:off + step])
            if r is None or r.status_code != 200:
                self.stats.error(f"chunk {off} of {path.name}: {r and r.status_code}")
                return
        r = self.call("chunked", "POST", f"/api/uploads/{up}/complete")
        if r is None or r.status_code != 202:
            self.stats.error(f"complete {path.name}: {r and r.status_code} {r and r.text}")
            return
        job_id = r.json()["job_id"]
        guard = time.monotonic() + JOB_GUARD_S
        while time.monotonic() < guard:
            r = self.call("job", "GET", f"/api/jobs/{job_id}")
            if r is None:
                return
            job = r.json()
            if job.get("state") == "done":
                self.stored(job["sha256"], int(job["trace_id"]))
                if job["sha256"] != hashlib.sha256(data).hexdigest():
                    self.stats.error(f"job {job_id}: sha256 {job['sha256']}")
                return
            if job.get("state") == "failed":
                self.stats.error(f"job {job_id} of {path.name} failed: {job.get('error')}")
                return
            time.sleep(0.1)
        self.stats.error(f"job {job_id} of {path.name} did not end")

    def summary(self, tid: int) -> None:
        r = self.call("summary", "GET", f"/api/traces/{tid}")
        if r is None:
            return
        if r.status_code != 200:
            self.stats.error(f"summary {tid}: {r.status_code} {r.text[:200]}")
            return
        s = r.json()
        total = sum(c["count"] for c in s["transition_counts"])
        if s["status"] not in ("complete", "damaged") or total != s["transitions"] \
                or s["goroutines"] <= 0:
            self.stats.error(f"summary {tid} not whole: status {s['status']}, "
                             f"{total} of {s['transitions']} transitions, "
                             f"{s['goroutines']} goroutines")
        with self.stats.lock:
            first = self.stats.summaries.setdefault(tid, s)
        if first != s:
            self.stats.error(f"summary {tid} changed between reads")

    def listing(self) -> None:
        r = self.call("list", "GET", "/api/traces")
        if r is None or r.status_code != 200:
            return
        listed = r.json()["traces"]
        shas = [t["sha256"] for t in listed]
        if len(shas) != len(set(shas)):
            self.stats.error(f"list holds a sha256 twice: {sorted(shas)}")
        if listed:
            self.summary(int(self.rng.choice(listed)["id"]))

    def page(self, tid: int) -> None:
        api = self.rng.choice(PAGE_APIS)
        r = self.call(f"page:{api}", "GET", f"/api/traces/{tid}/{api}")
        if r is not None and r.status_code != 200:
            self.stats.error(f"/api/traces/{tid}/{api}: {r.status_code} {r.text[:200]}")

    def run(self, first: Path, ops: int, start: threading.Barrier) -> None:
        start.wait()
        self.upload(first)
        kinds, weights = zip(*OPS.items(), strict=True)
        for _ in range(ops):
            op = self.rng.choices(kinds, weights)[0]
            if op == "upload":
                self.upload(self.rng.choice(TRACES))
            elif op == "chunked":
                self.chunked(self.rng.choice(TRACES))
            elif op == "list":
                self.listing()
            elif op == "summary" and self.trace_ids:
                self.summary(self.rng.choice(self.trace_ids))
            elif self.trace_ids:
                self.page(self.rng.choice(self.trace_ids))


def final_check(url: str, stats: Stats) -> None:
    """One trace per distinct content uploaded, the same id every time."""
    for sha, ids in stats.stored.items():
        if len(ids) != 1:
            stats.error(f"content {sha[:12]} stored as traces {sorted(ids)}")
    listed = requests.get(url + "/api/traces", timeout=600).json()["traces"]
    by_sha = {t["sha256"]: t["id"] for t in listed}
    if len(by_sha) != len(listed):
        stats.error("the final list holds a sha256 twice")
    if set(by_sha) != set(stats.stored):
        stats.error(f"stored {len(by_sha)} traces for {len(stats.stored)} distinct uploads")
    for sha, ids in stats.stored.items():
        if by_sha.get(sha) not in ids:
            stats.error(f"content {sha[:12]}: listed as {by_sha.get(sha)}, answered {ids}")


def run(url: str, clients: int = 16, ops: int = 30, seed: int = 1, chunks: int = 3) -> Stats:
    """Run the load; return what was seen (errors included)."""
    stats = Stats()
    start = threading.Barrier(clients)
    first = random.Random(seed).choice(TRACES)
    workers = [Client(url, stats, seed * 1000 + i, chunks) for i in range(clients)]
    threads = [threading.Thread(target=w.run, args=(first, ops, start)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final_check(url, stats)
    return stats


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    s = sorted(values)
    return s[max(0, min(len(s) - 1, int(round(q / 100 * len(s) + 0.5)) - 1))]


def report(stats: Stats, clients: int, seconds: float) -> str:
    lines = [f"clients {clients}, requests {stats.requests}, errors {len(stats.errors)}, "
             f"distinct traces {len(stats.stored)}, {seconds:.1f} s "
             f"({stats.requests / seconds:.1f} requests/s)",
             f"{'kind':<24}{'n':>6}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}"]
    every: list[float] = []
    for kind in sorted(stats.latencies):
        v = stats.latencies[kind]
        every += v
        lines.append(f"{kind:<24}{len(v):>6}{percentile(v, 50) * 1e3:>10.0f}"
                     f"{percentile(v, 99) * 1e3:>10.0f}{max(v) * 1e3:>10.0f}")
    if every:
        lines.append(f"{'all':<24}{len(every):>6}{percentile(every, 50) * 1e3:>10.0f}"
                     f"{percentile(every, 99) * 1e3:>10.0f}{max(every) * 1e3:>10.0f}")
    lines += [f"ERROR {e}" for e in stats.errors[:50]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.load_test", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url", help="the server's base URL, e.g. http://127.0.0.1:8079")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--ops", type=int, default=30, help="operations per client")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--chunks", type=int, default=3, help="chunks per chunked upload")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    stats = run(args.url.rstrip("/"), args.clients, args.ops, args.seed, args.chunks)
    print(report(stats, args.clients, time.perf_counter() - t0))
    return 1 if stats.errors else 0


if __name__ == "__main__":
    sys.exit(main())
