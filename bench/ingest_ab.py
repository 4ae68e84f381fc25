"""A change to the load, measured: `gmpscope ingest` of this tree against another
revision's, run alternately on the same trace.

    python bench/ingest_ab.py --against REV [--trace FILE] [--repeat 4]

This host's speed moves by half or more within an hour (docs/ingest.md: `go tool
trace` took 12 s at one hour and 33 s the next), so a change is measured against
the revision before it in one interleaved run, not against figures from another
hour. REV (a commit, a branch, `HEAD~1`) is checked out into a temporary git
worktree and its C extensions (and, where REV has it, its SQLite library) built
there; each round runs this tree, then REV
(the order alternates from round to round), each on a fresh SQLite database, and
reports per run and as medians: wall seconds until exit, peak RSS (MiB, from
wait4), user and system CPU seconds and the loader's phases. The trace defaults
to the benchmark trace of bench/ingest.py (generated once and cached).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.decode import make_large_trace  # noqa: E402
from bench.ingest import run_gmpscope_ingest  # noqa: E402

#: The loader phases shown per run (bench/ingest.py prints them all).
PHASES = ("decode wait", "derive", "insert intervals", "after commit", "load")


@contextmanager
def worktree(rev: str) -> Iterator[Path]:
    """REV checked out in a temporary worktree with its C extensions built."""
    tmp = Path(tempfile.mkdtemp(prefix="gmpscope-ab-"))
    tree = tmp / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree),
                    rev], check=True)
    try:
        built = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
                               cwd=tree, capture_output=True, text=True, check=False)
        if built.returncode != 0:
            raise SystemExit(f"building {rev}'s extensions failed:\n{built.stderr[-2000:]}")
        # `python -m gmpscope` run from the tree must import the tree's code,
        # not this one's (an editable install resolves after the working directory).
        found = subprocess.run([sys.executable, "-c", "import ingest; print(ingest.__file__)"],
                               cwd=tree, capture_output=True, text=True, check=True).stdout
        if not Path(found.strip()).resolve().is_relative_to(tree.resolve()):
            raise SystemExit(f"{rev}'s tree imports ingest from {found.strip()}, not itself")
        yield tree
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                       check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def one_run(root: Path, trace: Path, work: Path) -> dict[str, Any]:
    """One `gmpscope ingest` from ``root`` into a fresh database under ``work``."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    return run_gmpscope_ingest(trace, f"sqlite:///{work / 'ab.db'}", work / "data", root=root)


def line(label: str, r: dict[str, Any]) -> str:
    t = r.get("timings") or {}
    phases = ", ".join(f"{p} {t[p]:.2f}" for p in PHASES if p in t)
    return (f"{label:<10}{r['seconds']:>8.2f} s{r['peak_mb']:>7.0f} MiB  user {r['user_s']:.2f}"
            f" sys {r['system_s']:.2f}  ({phases})")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--against", required=True, help="the revision to compare with")
    ap.add_argument("--trace", type=Path, help="trace to ingest (default: bench/ingest.py's)")
    ap.add_argument("--size-mb", type=float, default=20.0)
    ap.add_argument("--repeat", type=int, default=4, help="runs of each side")
    args = ap.parse_args()
    if args.repeat < 1:
        raise SystemExit("--repeat needs a positive count")
    trace = args.trace or make_large_trace(args.size_mb)
    if not trace.is_file():
        raise SystemExit(f"no trace at {trace}")
    print(f"trace: {trace} ({trace.stat().st_size / 1e6:.1f} MB); this tree against "
          f"{args.against}, {args.repeat} runs each, alternately", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {"this tree": [], args.against: []}
    with worktree(args.against) as other, tempfile.TemporaryDirectory(
            prefix="gmpscope-ab-runs-") as tmp:
        sides = {"this tree": ROOT, args.against: other}
        for i in range(args.repeat):
            order = list(sides) if i % 2 == 0 else list(sides)[::-1]
            for name in order:
                r = one_run(sides[name], trace, Path(tmp) / "run")
                runs[name].append(r)
                print(f"round {i + 1}: " + line(name, r), flush=True)
    print(f"medians of {args.repeat} runs each:")
    med = {name: {k: statistics.median(r[k] for r in rs)
                  for k in ("seconds", "peak_mb", "user_s", "system_s")}
           for name, rs in runs.items()}
    for name, m in med.items():
        print(f"  {name:<20}{m['seconds']:>8.2f} s{m['peak_mb']:>7.0f} MiB  "
              f"user {m['user_s']:.2f} sys {m['system_s']:.2f}")
    a, b = med["this tree"], med[args.against]
    print(f"this tree against {args.against}: time {a['seconds'] / b['seconds'] - 1:+.1%}, "
          f"peak {a['peak_mb'] / b['peak_mb'] - 1:+.1%}, CPU "
          f"{(a['user_s'] + a['system_s']) / (b['user_s'] + b['system_s']) - 1:+.1%}")


if __name__ == "__main__":
    main()
