"""Real traces of the workloads in collectors/workloads, one per toolchain.

``workload_trace(go_version, workload)`` builds the workload with that
toolchain, runs it with ``-trace`` and returns the trace file, cached at
``$GMPSCOPE_CACHE/traces/go<version>/<workload>-<hash>.trace``. The hash
covers the workload's Go source (its cmd/ directory, the shared internal/
package and go.mod), the exact toolchain version and the run arguments, so
a cache filled once (by a developer or an earlier CI run) is reused until one
of those changes. A trace is kept only if Go 1.27's reference parser reads
it without error (checked with :func:`support.goparsed.go_parsed_raw`, which
caches Go's output for the later comparison); a failed run or a rejected
trace is retried once.

Binaries are built once per toolchain and source state, all workloads in one
``go build -o DIR ./cmd/...``, into ``$GMPSCOPE_CACHE/workloads/bin/``.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if importlib.util.find_spec("tools") is None:  # plain `pytest` puts only tests/ on sys.path
    sys.path.insert(0, str(REPO))

from tools import gotoolchains  # noqa: E402

from .goparsed import go_parsed_raw  # noqa: E402

WORKLOADS_DIR = REPO / "collectors" / "workloads"

#: Every workload, one per collectors/workloads/cmd/<name>.
WORKLOADS: tuple[str, ...] = (
    "annotations",
    "chain",
    "connleak",
    "gcpressure",
    "goroutineleak",
    "healthy",
    "httpnet",
    "mutex",
    "schedlatency",
    "syscallblock",
    "timers",
)
#: Programs under cmd/ that the tests build but do not trace: the live
#: dashboard's demo service and its load generator (docs/live.md), the busy
#: service bench/scale.py traces for its ~200 MB trace, and the flight-recorder
#: service (Go 1.25+ only: older toolchains skip it) whose snapshot is a sample;
#: and the CPU-quota program the scheduling recorder's tests run under bpftrace
#: (tests/support/sched_recordings.py).
SERVICES: tuple[str, ...] = ("busyservice", "cpuquota", "demoservice", "flightrec", "loadgen")
#: Every toolchain the tests trace with (see tools/gotoolchains.py).
TOOLCHAINS: tuple[str, ...] = gotoolchains.VERSIONS

#: Bump to invalidate every cached trace (e.g. when the run procedure changes).
GENERATOR_REVISION = "1"
#: Extra arguments per workload; part of the hash. Defaults live in the Go code.
RUN_ARGS: dict[str, tuple[str, ...]] = {}
#: A workload that takes longer than this is broken, not slow.
RUN_TIMEOUT_S = 120.0
BUILD_TIMEOUT_S = 600.0


class WorkloadError(RuntimeError):
    """A workload did not build, did not run, or wrote an unusable trace."""


def _source_files(workload: str | None) -> list[Path]:
    """go.mod, internal/**, and cmd/<workload>/** (every cmd/ when None)."""
    files = [WORKLOADS_DIR / "go.mod"]
    for sub in ("internal", f"cmd/{workload}" if workload else "cmd"):
        root = WORKLOADS_DIR / sub
        if not root.is_dir():
            raise WorkloadError(f"no workload source at {root}")
        files += [p for p in root.rglob("*") if p.is_file()]
    go_sum = WORKLOADS_DIR / "go.sum"
    if go_sum.is_file():
        files.append(go_sum)
    return sorted(files)


def _digest(go_version_exact: str, files: Sequence[Path], extra: Sequence[str]) -> str:
    h = hashlib.sha256()
    h.update(f"gmpscope-workload {GENERATOR_REVISION}\0{go_version_exact}\0".encode())
    for arg in extra:
        h.update(arg.encode() + b"\0")
    for p in files:
        rel = p.relative_to(WORKLOADS_DIR).as_posix()
        data = p.read_bytes()
        h.update(f"{rel}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:16]


def workload_hash(go_version: str, workload: str) -> str:
    """The cache key of one workload's trace with one toolchain."""
    _check_workload(workload)
    go = gotoolchains.go_binary(go_version)
    return _digest(
        gotoolchains.goroot_version(go), _source_files(workload), RUN_ARGS.get(workload, ())
    )


def _check_workload(workload: str) -> None:
    if workload not in WORKLOADS:
        raise WorkloadError(f"unknown workload {workload!r}; known: {', '.join(WORKLOADS)}")


def _version_dir(go_version: str) -> str:
    return "go" + gotoolchains.canonical_version(go_version)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    # pytest-xdist workers (or two CI jobs sharing a cache) may race here.
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_workloads(go_version: str) -> Path:
    """Directory holding every workload binary built with this toolchain."""
    go = gotoolchains.go_binary(go_version)
    key = _digest(gotoolchains.goroot_version(go), _source_files(None), ())
    base = gotoolchains.cache_dir() / "workloads" / "bin"
    out = base / f"{_version_dir(go_version)}-{key}"
    if all((out / w).is_file() for w in WORKLOADS):
        return out
    with _locked(base / f".{_version_dir(go_version)}.lock"):
        if all((out / w).is_file() for w in WORKLOADS):
            return out
        tmp = Path(tempfile.mkdtemp(dir=base, prefix=f".{out.name}-"))
        try:
            proc = subprocess.run(
                [str(go), "build", "-trimpath", "-o", str(tmp) + os.sep, "./cmd/..."],
                cwd=WORKLOADS_DIR,
                env=gotoolchains.go_env(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
            )
            if proc.returncode != 0:
                raise WorkloadError(
                    f"go build with {go} failed ({proc.returncode}):\n{proc.stderr}{proc.stdout}"
                )
            missing = [w for w in WORKLOADS if not (tmp / w).is_file()]
            if missing:
                raise WorkloadError(f"go build produced no binary for {', '.join(missing)}")
            if out.exists():
                shutil.rmtree(out)
            os.replace(tmp, out)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        _prune(base, f"{_version_dir(go_version)}-*", keep=out)
    return out


def _prune(directory: Path, pattern: str, keep: Path) -> None:
    """Remove entries for older source states so the cache stays bounded."""
    for old in directory.glob(pattern):
        if old == keep or old.name.endswith(".lock"):
            continue
        if old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)


def _run_once(binary: Path, workload: str, dest: Path) -> str | None:
    """Run the workload writing ``dest``; return why it is unusable, or None."""
    with tempfile.TemporaryDirectory(prefix=f"gmpscope-{workload}-") as work:
        try:
            proc = subprocess.run(
                [str(binary), "-trace", str(dest), *RUN_ARGS.get(workload, ())],
                cwd=work,
                env=gotoolchains.go_env(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return f"timed out after {RUN_TIMEOUT_S:.0f}s"
    if proc.returncode != 0:
        return f"exit status {proc.returncode}: {proc.stderr.strip()[-2000:]}"
    try:
        with open(dest, "rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        return f"no trace written: {exc}"
    if not head.startswith(b"go 1.") or b" trace" not in head:
        return f"not a trace header: {head!r}"
    rc, _out, err = go_parsed_raw(str(dest))
    if rc != 0:
        return (
            f"Go's parser rejected the trace (status {rc}): {err.decode(errors='replace')[-2000:]}"
        )
    return None


def workload_trace(go_version: str, workload: str) -> Path:
    """Path of a real trace of ``workload`` written by toolchain ``go_version``
    (any spelling :func:`tools.gotoolchains.canonical_version` accepts),
    generating it on a cache miss."""
    _check_workload(workload)
    key = workload_hash(go_version, workload)
    dest_dir = gotoolchains.cache_dir() / "traces" / _version_dir(go_version)
    dest = dest_dir / f"{workload}-{key}.trace"
    if dest.is_file():
        return dest
    with _locked(dest_dir / f".{workload}.lock"):
        if dest.is_file():
            return dest
        binary = build_workloads(go_version) / workload
        problems: list[str] = []
        for _attempt in range(2):
            tmp = dest_dir / f".{workload}-{key}.{os.getpid()}.tmp"
            try:
                why = _run_once(binary, workload, tmp)
                if why is None:
                    os.replace(tmp, dest)
                    _prune(dest_dir, f"{workload}-*.trace", keep=dest)
                    return dest
                problems.append(why)
            finally:
                if tmp.exists():
                    tmp.unlink()
        raise WorkloadError(
            f"{workload} with Go {go_version} gave no usable trace in two runs:\n  "
            + "\n  ".join(problems)
        )


def all_workload_traces(
    versions: Sequence[str] = TOOLCHAINS, workloads: Sequence[str] = WORKLOADS
) -> dict[tuple[str, str], Path]:
    """Fill the cache for every (toolchain, workload) pair."""
    return {(v, w): workload_trace(v, w) for v in versions for w in workloads}
