"""A private, throwaway PostgreSQL cluster for the tests (standard library only).

``python -m tools.postgres start`` makes sure Debian's ``postgresql`` is installed
(``apt-get install -y postgresql`` when running as root and it is missing), creates a
cluster of its own with ``initdb`` (never the system's ``main`` cluster), starts it on a
free localhost port with a private unix socket directory, creates the ``gmpscope_test``
database and prints a ``postgresql+psycopg://`` URL for it. Running it again while the
cluster is up only prints the URL. ``stop`` stops the cluster, ``url`` prints the URL
(starting the cluster if needed).

The cluster lives in ``$GMPSCOPE_CACHE/pg`` (default ``~/.cache/gmpscope/pg``). As root,
``initdb`` refuses to run, so the cluster is made and run by the ``postgres`` OS user;
when that user cannot reach the cache directory (``/root`` is usually mode 700) the
cluster goes to a fixed directory under the system temp dir instead.

It listens on 127.0.0.1 only, trusts local connections and runs with ``fsync=off``:
it is for tests, and its data is disposable.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

DATABASE = "gmpscope_test"
SUPERUSER = "postgres"
PG_ROOT = Path("/usr/lib/postgresql")


class PostgresError(RuntimeError):
    """The test cluster could not be installed, created or started."""


@dataclass(frozen=True)
class Cluster:
    """Where the private cluster lives and how to reach it."""

    base: Path
    bindir: Path
    os_user: str | None  # run the server as this OS user (None: as ourselves)

    @property
    def data(self) -> Path:
        return self.base / "data"

    @property
    def sockets(self) -> Path:
        return self.base / "run"

    @property
    def log(self) -> Path:
        return self.base / "server.log"


def cache_dir() -> Path:
    env = os.environ.get("GMPSCOPE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "gmpscope"


def find_bindir() -> Path | None:
    """The newest installed PostgreSQL server's bin directory, if any."""
    if not PG_ROOT.is_dir():
        return None
    versions = []
    for d in PG_ROOT.iterdir():
        if (d / "bin" / "initdb").is_file() and (d / "bin" / "pg_ctl").is_file():
            try:
                versions.append((float(d.name), d / "bin"))
            except ValueError:
                continue
    return max(versions)[1] if versions else None


def ensure_installed() -> Path:
    """Return the server bin directory, installing Debian's postgresql if root."""
    found = find_bindir()
    if found is not None:
        return found
    if os.geteuid() != 0:
        raise PostgresError(
            "PostgreSQL is not installed and we are not root: run "
            "`sudo apt-get install -y postgresql` (Debian) and try again"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    print("tools.postgres: installing Debian's postgresql ...", file=sys.stderr)
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "postgresql"]
    if subprocess.run(install, env=env, stdout=subprocess.DEVNULL).returncode != 0:
        # A fresh machine may have no package lists yet.
        subprocess.run(["apt-get", "update", "-q"], env=env, stdout=subprocess.DEVNULL,
                       check=False)
        subprocess.run(install, env=env, stdout=subprocess.DEVNULL, check=True)
    found = find_bindir()
    if found is None:
        raise PostgresError(f"apt-get installed postgresql but no server under {PG_ROOT}")
    return found


def _reachable_by(user: str, path: Path) -> bool:
    """Can ``user`` create files in ``path``? (Every parent needs the x bit.)"""
    r = subprocess.run(["test", "-w", str(path), "-a", "-x", str(path)], user=user,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return r.returncode == 0


def locate(bindir: Path) -> Cluster:
    """Pick the cluster directory (see the module docstring)."""
    preferred = cache_dir() / "pg"
    if os.geteuid() != 0:
        preferred.mkdir(parents=True, exist_ok=True)
        return Cluster(preferred, bindir, None)
    try:
        pw = pwd.getpwnam(SUPERUSER)
    except KeyError:
        raise PostgresError("running as root but there is no 'postgres' OS user") from None
    preferred.mkdir(parents=True, exist_ok=True)
    os.chown(preferred, pw.pw_uid, pw.pw_gid)
    if _reachable_by(SUPERUSER, preferred):
        return Cluster(preferred, bindir, SUPERUSER)
    key = hashlib.sha256(str(preferred).encode()).hexdigest()[:10]
    fallback = Path(tempfile.gettempdir()) / f"gmpscope-pg-{key}"
    fallback.mkdir(mode=0o700, exist_ok=True)
    os.chown(fallback, pw.pw_uid, pw.pw_gid)
    return Cluster(fallback, bindir, SUPERUSER)


def _run(c: Cluster, args: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(args, user=c.os_user, capture_output=True, text=True,
                       cwd=str(c.base), env=dict(os.environ, LC_ALL="C.UTF-8"))
    if check and r.returncode != 0:
        raise PostgresError(f"{' '.join(args)} failed ({r.returncode}): "
                            f"{(r.stderr or r.stdout).strip()}")
    return r


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def running_port(c: Cluster) -> int | None:
    """The port of the running cluster, or None when it is not running."""
    if not (c.data / "PG_VERSION").is_file():
        return None
    r = _run(c, [str(c.bindir / "pg_ctl"), "status", "-D", str(c.data)], check=False)
    if r.returncode != 0:
        return None
    try:
        # postmaster.pid: pid, data dir, start time, port, socket dir, ...
        lines = (c.data / "postmaster.pid").read_text().splitlines()
        return int(lines[3])
    except (OSError, IndexError, ValueError):
        return None


def _initdb(c: Cluster) -> None:
    if (c.data / "PG_VERSION").is_file():
        return
    if c.data.exists():
        shutil.rmtree(c.data)  # a half-made cluster from an interrupted initdb
    _run(c, [str(c.bindir / "initdb"), "-D", str(c.data), "-U", SUPERUSER, "--auth=trust",
             "-E", "UTF8", "--no-sync"])


def _psql(c: Cluster, port: int, sql: str, db: str = "postgres") -> str:
    r = _run(c, [str(c.bindir / "psql"), "-h", str(c.sockets), "-p", str(port), "-U",
                 SUPERUSER, "-d", db, "-v", "ON_ERROR_STOP=1", "-tAc", sql])
    return r.stdout.strip()


def url_for(port: int, database: str = DATABASE) -> str:
    return f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{port}/{database}"


def start() -> str:
    """Start the private cluster if needed; return the test database's URL."""
    c = locate(ensure_installed())
    port = running_port(c)
    if port is None:
        _initdb(c)
        c.sockets.mkdir(exist_ok=True)
        if c.os_user is not None:
            pw = pwd.getpwnam(c.os_user)
            os.chown(c.sockets, pw.pw_uid, pw.pw_gid)
        port = _free_port()
        opts = (f"-p {port} -k {c.sockets} -c listen_addresses=127.0.0.1 "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                "-c max_connections=200")
        _run(c, [str(c.bindir / "pg_ctl"), "start", "-w", "-t", "60", "-D", str(c.data),
                 "-l", str(c.log), "-o", opts])
        for _ in range(100):  # pg_ctl -w normally returns when it accepts connections
            if running_port(c) == port:
                break
            time.sleep(0.1)
    if _psql(c, port, f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'") != "1":
        _psql(c, port, f'CREATE DATABASE "{DATABASE}"')
    return url_for(port)


def stop() -> None:
    """Stop the private cluster (no-op when it is not running)."""
    bindir = find_bindir()
    if bindir is None:
        return
    c = locate(bindir)
    if running_port(c) is not None:
        _run(c, [str(c.bindir / "pg_ctl"), "stop", "-w", "-m", "fast", "-D", str(c.data)])


def create_database(name: str) -> str:
    """Create a fresh empty database in the running cluster; return its URL."""
    if not name.replace("_", "").isalnum():
        raise ValueError(f"bad database name {name!r}")
    start()
    c = locate(ensure_installed())
    port = running_port(c)
    assert port is not None
    _psql(c, port, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _psql(c, port, f'CREATE DATABASE "{name}"')
    return url_for(port, name)


def drop_database(name: str) -> None:
    """Drop a database made by :func:`create_database` (connections are ended)."""
    if not name.replace("_", "").isalnum():
        raise ValueError(f"bad database name {name!r}")
    c = locate(ensure_installed())
    port = running_port(c)
    if port is not None:
        _psql(c, port, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.postgres", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=["start", "stop", "url"])
    args = ap.parse_args(argv)
    try:
        if args.action == "stop":
            stop()
        else:
            print(start())
    except (PostgresError, subprocess.CalledProcessError) as e:
        print(f"tools.postgres: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
