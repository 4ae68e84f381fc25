"""Make the sample traces of samples/ again, each from a real run of a workload.

``python -m tools.samples [NAME ...]`` (from the repository root) writes the named
samples into ``samples/`` (``--out DIR`` elsewhere); ``--list`` prints every recipe.
The workloads are built with the cached Go toolchains (tools/gotoolchains.py,
tests/support/workload_traces.py), so the Go versions are the ones the tests use.
A run's trace differs byte for byte from the committed one (timestamps, scheduling):
what a sample shows is described in samples/README.md, not its exact numbers.

Recipes:

- ``go1.27-WORKLOAD.trace`` (the small ones): the workload traced as the tests trace
  it (``workload_trace("1.27.3", WORKLOAD)``);
- ``go1.19-httpnet.trace``: the same with Go 1.19 (Debian's golang-1.19-go), the old
  trace format;
- ``go1.27-httpnet-os/``: ``gmpscope record`` (strace) running httpnet with its own
  ``-trace``: the recording directory with the Go trace of the same run inside;
- ``go1.27-slowreq-flightrecorder.trace``: the ``flightrec`` workload's flight-recorder
  snapshot, written by Go 1.27's ``runtime/trace.FlightRecorder`` when a request
  was slow.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLES_DIR = REPO / "samples"
GO = "1.27.3"
#: The small Go 1.27 samples, one per workload (traced as the tests trace them).
SMALL = ("annotations", "connleak", "gcpressure", "httpnet", "mutex", "syscallblock", "timers")
#: A guard against a run that hangs (a hang, not a speed target).
RUN_GUARD_S = 300.0


def _traced(version: str, workload: str) -> Callable[[Path], None]:
    def make(dest: Path) -> None:
        from tests.support.workload_traces import workload_trace

        shutil.copyfile(workload_trace(version, workload), dest)
    return make


def _bin(name: str) -> Path:
    from tests.support.workload_traces import build_workloads

    path = build_workloads(GO) / name
    if not path.is_file():
        raise SystemExit(f"tools.samples: no {name} binary in {path.parent}")
    return path


def make_os_recording(dest: Path) -> None:
    """``gmpscope record`` of httpnet, its Go trace beside the recording."""
    trace_name = f"{dest.name}.trace"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    # The command runs in the recording directory, so its -trace file lands
    # inside it, where `gmpscope serve DIR` finds the Go trace meta.json names.
    # strace, as samples/README.md says (as root the default would be eBPF).
    subprocess.run([sys.executable, "-m", "gmpscope", "record", "--backend", "strace",
                    "--go-trace", trace_name, "-o", ".", "--", str(_bin("httpnet")),
                    "-trace", trace_name],
                   cwd=dest, check=True, timeout=RUN_GUARD_S)


def make_flight_recorder(dest: Path) -> None:
    """The flightrec workload's snapshot (written when a request is slow)."""
    with tempfile.TemporaryDirectory(prefix="gmpscope-sample-") as work:
        snap = Path(work) / dest.name
        subprocess.run([str(_bin("flightrec")), "-snapshot", str(snap)], cwd=work,
                       check=True, timeout=RUN_GUARD_S)
        shutil.copyfile(snap, dest)


def recipes() -> dict[str, Callable[[Path], None]]:
    """Sample name (file or directory in samples/) -> the function that writes it."""
    out: dict[str, Callable[[Path], None]] = {
        f"go1.27-{w}.trace": _traced(GO, w) for w in SMALL}
    out["go1.19-httpnet.trace"] = _traced("1.19", "httpnet")
    out["go1.27-httpnet-os"] = make_os_recording
    out["go1.27-slowreq-flightrecorder.trace"] = make_flight_recorder
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.samples",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help="samples to make")
    parser.add_argument("--out", type=Path, default=SAMPLES_DIR, help="where (samples/)")
    parser.add_argument("--list", action="store_true", help="print the recipes' names")
    args = parser.parse_args(argv)
    known = recipes()
    if args.list or not args.names:
        print("\n".join(known))
        return 0
    unknown = [n for n in args.names if n not in known]
    if unknown:
        print(f"tools.samples: unknown sample {', '.join(unknown)}; known: {', '.join(known)}",
              file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.names:
        dest = args.out / name
        known[name](dest)
        size = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file()) \
            if dest.is_dir() else dest.stat().st_size
        print(f"tools.samples: {dest} ({size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
