"""Debian packages the tests need besides Python ones (standard library only).

``python -m tools.system_packages ensure`` makes sure these are installed:

- ``chromium`` (``/usr/bin/chromium``): the browser tests (Playwright drives it)
  and the SVG/PNG exports (Kaleido drives it);
- ``strace``: the poller collector's syscall tracing;
- ``libsqlite3-dev`` (``sqlite3.h``): the loader's SQLite binder (an optional C
  extension, built only where the header is; the tests check both ways of loading).

A missing one is installed with ``apt-get install -y`` when running as root
(``apt-get update`` first when the package lists are missing or stale); otherwise
the command says what to install and fails. ``check`` only reports.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

#: Debian package -> the executable that shows it is installed.
PACKAGES = {
    "chromium": "/usr/bin/chromium",
    "strace": "strace",
    "libsqlite3-dev": "/usr/include/sqlite3.h",
}


class MissingPackages(RuntimeError):
    pass


def installed(exe: str) -> bool:
    """Whether the executable ``exe`` (a path or a name on $PATH) is there."""
    return Path(exe).is_file() if "/" in exe else shutil.which(exe) is not None


def missing() -> list[str]:
    """The packages of PACKAGES that are not installed."""
    return [pkg for pkg, exe in PACKAGES.items() if not installed(exe)]


def ensure() -> None:
    """Install the missing packages (as root) or raise MissingPackages."""
    todo = missing()
    if not todo:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise MissingPackages(f"missing {', '.join(todo)}: run `sudo apt-get install -y "
                              f"{' '.join(todo)}` (Debian) and try again")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    print(f"tools.system_packages: installing Debian's {' '.join(todo)} ...", file=sys.stderr)
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *todo]
    if subprocess.run(install, env=env, stdout=subprocess.DEVNULL).returncode != 0:
        # A fresh machine may have no package lists yet.
        subprocess.run(["apt-get", "update", "-q"], env=env, stdout=subprocess.DEVNULL,
                       check=False)
        subprocess.run(install, env=env, stdout=subprocess.DEVNULL, check=True)
    still = missing()
    if still:
        raise MissingPackages(f"apt-get ran but {', '.join(still)} still missing")


def main(argv: list[str]) -> int:
    cmd = argv[0] if argv else "ensure"
    if cmd == "check":
        todo = missing()
        print("missing: " + " ".join(todo) if todo else "all installed")
        return 1 if todo else 0
    if cmd != "ensure":
        print("usage: python -m tools.system_packages [ensure|check]", file=sys.stderr)
        return 2
    try:
        ensure()
    except (MissingPackages, subprocess.CalledProcessError) as e:
        print(f"tools.system_packages: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
