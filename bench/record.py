"""The OS recorder's overhead: one fixed amount of work untraced, under eBPF and under strace.

    python bench/record.py [--requests 20000] [--clients 8] [--rounds 3] [--no-strace]
                           [--bpftrace] [--sched] [--json]

The work is the ``httpnet`` Go workload (collectors/workloads: a loopback HTTP
server and ``--clients`` client goroutines) stopping after ``--requests``
requests, built with the cached Go toolchain. Each round runs it untraced, then
under ``gmpscope record --backend ebpf`` (its default transport, the libbpf ring
buffer), with ``--bpftrace`` also through bpftrace's printf transport
(``$GMPSCOPE_EBPF_TRANSPORT=bpftrace``), then ``--backend strace`` (the order
rotates each round, so a slow moment of a shared machine does not always land on
the same one). ``--sched`` records the kernel's scheduling of its threads too, as
``gmpscope record --backend ebpf`` does by default (the benchmark leaves it out
otherwise, to measure the system calls alone). Times are the program's wall time:

- untraced: from spawning it to its exit;
- eBPF: from the moment the probes were attached (the program is started stopped
  and resumed then) to its exit, as ``meta.json``'s ``overhead.traced_wall_s``
  (the tracer's start-up, loading and attaching its probes, comes before and is
  not the program's time);
- strace: from starting strace to its exit, ``overhead.traced_wall_s``.

It prints each run, then the median of each and its ratio to the untraced median;
the target of issue 26 is eBPF <= 1.25x. Results: bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collectors.poller.backend import ebpf_missing  # noqa: E402
from collectors.poller.collect import Options, record  # noqa: E402
from collectors.poller.ebpf_recorder import TRANSPORT_ENV  # noqa: E402
from collectors.poller.recorder import run_baseline  # noqa: E402
from tests.support.workload_traces import build_workloads  # noqa: E402

MODES = ("untraced", "ebpf", "ebpf-bpftrace", "strace")


def _one(mode: str, command: list[str], work: Path, sched: bool) -> dict[str, Any]:
    if mode == "untraced":
        wall, status = run_baseline(command)
        return {"mode": mode, "wall_s": wall, "exit_status": status}
    out = work / mode
    shutil.rmtree(out, ignore_errors=True)
    # The eBPF transport is chosen by the environment (the recorder reads it at run time).
    os.environ[TRANSPORT_ENV] = "bpftrace" if mode == "ebpf-bpftrace" else "ringbuf"
    backend = "ebpf" if mode.startswith("ebpf") else mode
    meta = record(Options(out_dir=out, command=command, backend=backend,
                          sched=sched and backend == "ebpf"))
    if backend == "ebpf" and meta["ebpf"]["transport_note"]:
        print(f"bench/record.py: {meta['ebpf']['transport_note']}", file=sys.stderr)
    parse = meta["parse"]
    return {"mode": mode, "wall_s": meta["overhead"]["traced_wall_s"],
            "exit_status": meta["exit_status"], "syscalls": parse["syscalls"],
            "lost": parse.get("lost", 0), "tracer_cpu_s": meta["overhead"]["strace_cpu_s"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--go", default="1.27.3", help="Go toolchain the workload is built with")
    ap.add_argument("--no-strace", action="store_true", help="skip the (slow) strace runs")
    ap.add_argument("--bpftrace", action="store_true",
                    help="also run eBPF through bpftrace's printf transport")
    ap.add_argument("--sched", action="store_true",
                    help="record the scheduling too (eBPF; gmpscope record's default)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    missing = ebpf_missing()
    if missing is not None:
        print(f"bench/record.py: {missing}", file=sys.stderr)
        return 1
    binary = build_workloads(args.go) / "httpnet"
    command = [str(binary), "-max-requests", str(args.requests), "-clients", str(args.clients),
               "-duration", "10m"]
    modes = [m for m in MODES if not (args.no_strace and m == "strace")
             and not (not args.bpftrace and m == "ebpf-bpftrace")]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gmpscope-bench-record-") as tmp:
        for rnd in range(args.rounds):
            order = modes[rnd % len(modes):] + modes[:rnd % len(modes)]
            for mode in order:
                r = _one(mode, command, Path(tmp), args.sched)
                r["round"] = rnd
                runs.append(r)
                if not args.json:
                    extra = (f"  {r['syscalls']:,} calls recorded, {r['lost']} lost, tracer CPU "
                             f"{r['tracer_cpu_s']:.2f} s" if mode != "untraced" else "")
                    print(f"round {rnd} {mode:13s} {r['wall_s']:8.3f} s  exit "
                          f"{r['exit_status']}{extra}", flush=True)
    med = {m: statistics.median(r["wall_s"] for r in runs if r["mode"] == m) for m in modes}
    summary = {"command": command, "rounds": args.rounds, "median_wall_s": med,
               "ratio": {m: med[m] / med["untraced"] for m in modes}, "runs": runs}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"\nhttpnet, {args.requests:,} requests, {args.clients} clients, median of "
              f"{args.rounds}:")
        for m in modes:
            print(f"  {m:13s} {med[m]:8.3f} s  {summary['ratio'][m]:6.2f}x untraced")
    return 0


if __name__ == "__main__":
    sys.exit(main())
