"""The workload programs, the toolchain list and the workload trace cache."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import workload_traces as wt

from tools import gotoolchains

#: The header each toolchain writes, as seen in real recordings of these
#: workloads (Go 1.27 still writes the 1.26 format).
HEADER_VERSION = {
    "1.19": "1.19",
    "1.21.13": "1.21",
    "1.22.10": "1.22",
    "1.23.9": "1.23",
    "1.25.5": "1.25",
    "1.27.3": "1.26",
}


def test_workload_list_matches_sources() -> None:
    cmds = sorted(p.name for p in (wt.WORKLOADS_DIR / "cmd").iterdir() if p.is_dir())
    assert cmds == sorted(wt.WORKLOADS + wt.SERVICES)
    for name in cmds:
        assert (wt.WORKLOADS_DIR / "cmd" / name / "main.go").is_file()


def test_go_mod_targets_oldest_toolchain() -> None:
    text = (wt.WORKLOADS_DIR / "go.mod").read_text()
    assert re.search(r"^module gmpscope/workloads$", text, re.M)
    assert re.search(r"^go 1\.19$", text, re.M)
    assert "require" not in text  # standard library only


def test_readme_names_every_workload() -> None:
    readme = (wt.WORKLOADS_DIR / "README.md").read_text()
    for name in wt.WORKLOADS:
        assert f"`{name}`" in readme


def test_canonical_versions() -> None:
    assert gotoolchains.canonical_version("1.19") == "1.19"
    assert gotoolchains.canonical_version("go1.22") == "1.22.10"
    assert gotoolchains.canonical_version("1.27.3") == "1.27.3"
    with pytest.raises(gotoolchains.ToolchainError):
        gotoolchains.canonical_version("1.24")
    assert set(HEADER_VERSION) == set(gotoolchains.VERSIONS)


def test_cache_dir_follows_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GMPSCOPE_CACHE", str(tmp_path))
    assert gotoolchains.cache_dir() == tmp_path
    monkeypatch.delenv("GMPSCOPE_CACHE")
    assert gotoolchains.cache_dir() == Path.home() / ".cache" / "gmpscope"


@pytest.mark.slow
def test_ensure_is_quiet_when_cached() -> None:
    gotoolchains.ensure()
    proc = subprocess.run(
        [sys.executable, "-m", "tools.gotoolchains", "ensure"],
        cwd=wt.REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""


@pytest.mark.slow
@pytest.mark.parametrize("version", gotoolchains.VERSIONS)
def test_toolchain_reports_its_version(version: str) -> None:
    go = gotoolchains.go_binary(version)
    exact = gotoolchains.goroot_version(go)
    out = subprocess.run(
        [str(go), "env", "GOVERSION"], env=gotoolchains.go_env(), capture_output=True, text=True
    )
    assert out.stdout.strip() == exact
    assert exact == f"go{version}" or (version == "1.19" and exact.startswith("go1.19."))


@pytest.mark.slow
def test_workloads_are_gofmt_clean() -> None:
    gofmt = gotoolchains.go_binary(gotoolchains.ORACLE_VERSION).with_name("gofmt")
    out = subprocess.run(
        [str(gofmt), "-l", "."], cwd=wt.WORKLOADS_DIR, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == ""


@pytest.mark.slow
@pytest.mark.parametrize("version", gotoolchains.VERSIONS)
def test_all_workloads_build(version: str) -> None:
    out = wt.build_workloads(version)
    for name in wt.WORKLOADS:
        assert os.access(out / name, os.X_OK)


@pytest.mark.slow
@pytest.mark.parametrize("workload", wt.WORKLOADS)
@pytest.mark.parametrize("version", gotoolchains.VERSIONS)
def test_workload_trace_is_cached_and_versioned(version: str, workload: str) -> None:
    path = wt.workload_trace(version, workload)
    assert path == wt.workload_trace(version, workload)  # second call: the cache
    assert path.parent.name == f"go{version}"
    assert path.name == f"{workload}-{wt.workload_hash(version, workload)}.trace"
    head = path.read_bytes()[:16]
    assert head.rstrip(b"\0") == f"go {HEADER_VERSION[version]} trace".encode()
    # Small enough for the tests that read them: the busiest (gcpressure) wrote
    # 4.66 MB on a 2-core AMD EPYC machine (session 36), less on slower ones.
    assert 1_000 < path.stat().st_size < 8_000_000


def test_hash_depends_on_source_and_version(monkeypatch: pytest.MonkeyPatch) -> None:
    files = wt._source_files("mutex")
    rels = {p.relative_to(wt.WORKLOADS_DIR).as_posix() for p in files}
    assert "go.mod" in rels and "cmd/mutex/main.go" in rels and "internal/wl/wl.go" in rels
    assert not any(r.startswith("cmd/timers/") for r in rels)
    a = wt._digest("go1.22.10", files, ())
    assert a == wt._digest("go1.22.10", files, ())
    assert a != wt._digest("go1.23.9", files, ())
    assert a != wt._digest("go1.22.10", files, ("-duration", "1s"))
    assert a != wt._digest("go1.22.10", wt._source_files("timers"), ())
    monkeypatch.setattr(wt, "GENERATOR_REVISION", "test")
    assert a != wt._digest("go1.22.10", files, ())
