"""Go's pprof tools as test oracles: ``go tool trace -pprof=TYPE`` (the
profiles gmpscope's must equal) and ``go tool pprof -raw`` (the consumer
that reads both), with the raw text parsed back into stacks and values."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass

from .goparsed import cache_dir, go_env, oracle_go, trace_tool

_tool_paths: dict[str, str] = {}


def pprof_tool() -> list[str]:
    """Command prefix of Go 1.27's ``go tool pprof`` (the cached binary, as
    :func:`support.goparsed.trace_tool` finds the trace tool's)."""
    go = oracle_go()
    key = go + os.pathsep + cache_dir()
    path = _tool_paths.get(key)
    if path is None or not os.path.exists(path):
        proc = subprocess.run([go, "tool", "-n", "pprof"], stdin=subprocess.DEVNULL,
                              capture_output=True, env=go_env(), check=False)
        path = proc.stdout.decode(errors="replace").strip()
        if proc.returncode != 0 or not path or not os.path.exists(path):
            return [go, "tool", "pprof"]
        _tool_paths[key] = path
    return [path]


def go_trace_pprof(trace_path: str | os.PathLike[str], kind: str) -> bytes:
    """``go tool trace -pprof=KIND TRACE``'s profile (gzipped profile.proto)."""
    proc = subprocess.run([*trace_tool(), f"-pprof={kind}", str(trace_path)],
                          stdin=subprocess.DEVNULL, capture_output=True, env=go_env(),
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"go tool trace -pprof={kind} failed ({proc.returncode}): "
                           f"{proc.stderr.decode(errors='replace')[-2000:]}")
    return proc.stdout


@dataclass
class RawProfile:
    """What ``go tool pprof -raw`` printed: the sample types, the number of
    samples, and per stack (function names, innermost first) the summed
    values of its samples."""

    sample_types: list[str]
    samples: int
    stacks: dict[tuple[str, ...], list[int]]

    def totals(self) -> list[int]:
        return [sum(v[i] for v in self.stacks.values()) for i in range(len(self.sample_types))]


_LOCATION = re.compile(r"^\s*(\d+): 0x[0-9a-f]+(?: M=\d+)? (.*)$")


def parse_raw(text: str) -> RawProfile:
    """``go tool pprof -raw``'s text -> :class:`RawProfile`."""
    lines = text.splitlines()
    i = lines.index("Samples:")
    types = lines[i + 1].split()
    samples: list[tuple[list[int], list[int]]] = []
    i += 2
    while lines[i] != "Locations":
        values, _, locs = lines[i].partition(":")
        samples.append(([int(v) for v in values.split()], [int(x) for x in locs.split()]))
        i += 1
    i += 1
    funcs: dict[int, list[str]] = {}
    current: list[str] = []
    while i < len(lines) and lines[i] != "Mappings":
        m = _LOCATION.match(lines[i])
        rest = m.group(2) if m else lines[i].strip()
        # "FUNC FILE:LINE:COL s=START"; FUNC may be empty, never has spaces at its end.
        fn = rest.rsplit(" ", 2)[0] if rest.count(" ") >= 2 else ""
        if m:
            current = funcs[int(m.group(1))] = []
        current.append(fn)
        i += 1
    stacks: dict[tuple[str, ...], list[int]] = {}
    for vals, loc_ids in samples:
        key = tuple(name for loc in loc_ids for name in funcs[loc])
        acc = stacks.setdefault(key, [0] * len(vals))
        for k, v in enumerate(vals):
            acc[k] += v
    return RawProfile(types, len(samples), stacks)


def pprof_raw(data: bytes) -> RawProfile:
    """A profile file's bytes as ``go tool pprof -raw`` reads them."""
    with tempfile.NamedTemporaryFile(suffix=".pb.gz") as f:
        f.write(data)
        f.flush()
        proc = subprocess.run([*pprof_tool(), "-raw", f.name], stdin=subprocess.DEVNULL,
                              capture_output=True, env=go_env(), check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"go tool pprof -raw failed ({proc.returncode}): "
                           f"{proc.stderr.decode(errors='replace')[-2000:]}")
    return parse_raw(proc.stdout.decode())
