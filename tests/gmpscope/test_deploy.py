"""The deployment files: docker-compose.yml runs commands and settings gmpscope
understands, each service starts with its compose arguments outside Docker, and
the wheel the Dockerfile installs works outside the source tree.

No Docker engine runs here, so the compose file is checked by running what it
describes without Docker: every gmpscope command line parses with our CLI, every
environment name is a setting gmpscope reads, and each service is started for
real as a subprocess with its compose arguments and environment (only the host,
port and paths moved to the test's own): the servers answer /healthz, the demo
service answers, the load generator keeps running and the collector delivers a
window to the ingest service. The servers listen on every address of their
containers, so the file requires a token (``${GMPSCOPE_TOKEN:?...}``: compose stops
until .env or the environment sets it); the services are started with one, as .env
would give it, and the compose commands without one are refused.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from gmpscope.cli import build_parser
from gmpscope.errors import CLIError
from gmpscope.wsgi import check_exposure
from ingest.config import Settings
from tests.support.demo import demo_binaries, free_port
from tests.support.server import Served

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "go1.27-syscallblock.trace"
#: The settings gmpscope reads (ingest.config.Settings, ingest.live.retention).
KNOWN_ENV = {"GMPSCOPE_DB", "GMPSCOPE_DATA", "GMPSCOPE_TOKEN", "GMPSCOPE_READ_TOKEN",
             "GMPSCOPE_MAX_UPLOAD",
             "GMPSCOPE_BUSY_TIMEOUT_MS", "GMPSCOPE_LIVE_DETAIL_S", "GMPSCOPE_LIVE_KEEP_S",
             "GMPSCOPE_LIVE_RETENTION_EVERY_S"}
GUARD_S = 180.0
_VAR = re.compile(r"\$\{([A-Z0-9_]+)(?::([-?])([^}]*))?\}")
#: The token the services get in the test, as .env would set it.
TOKEN = "compose-test-5ecret"


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    return data


def interpolate(value: str, env: dict[str, str] | None = None) -> str:
    """Compose's ``${VAR:-default}`` and ``${VAR:?message}`` with ``env`` set (default:
    nothing): the value, else the default; a required variable left unset raises, as
    compose stops."""
    env = env or {}

    def one(m: re.Match[str]) -> str:
        name, kind, rest = m.group(1), m.group(2), m.group(3) or ""
        if env.get(name):
            return env[name]
        if kind == "?":
            raise KeyError(f"{name}: {rest}")
        return rest
    return _VAR.sub(one, value)


def command(service: str) -> list[str]:
    return [interpolate(a) for a in compose()["services"][service]["command"]]


def environment(service: str, dotenv: dict[str, str] | None = None) -> dict[str, str]:
    """A service's environment with ``dotenv`` set (default: the token .env would hold)."""
    env = compose()["services"][service].get("environment") or {}
    given = {"GMPSCOPE_TOKEN": TOKEN} if dotenv is None else dotenv
    return {k: interpolate(str(v), given) for k, v in env.items()}


def test_compose_services_and_profiles() -> None:
    services = compose()["services"]
    assert set(services) == {"ingest", "app", "postgres", "demo", "loadgen", "collector"}
    profiles = {name: tuple(s.get("profiles", ())) for name, s in services.items()}
    assert profiles == {"ingest": (), "app": (), "postgres": ("postgres",),
                        "demo": ("demo",), "loadgen": ("demo",), "collector": ("demo",)}
    # Without the postgres profile, the dependency on it is optional.
    assert services["ingest"]["depends_on"]["postgres"]["required"] is False
    assert (REPO / "Dockerfile.demo").is_file()
    assert services["demo"]["build"]["dockerfile"] == "Dockerfile.demo"


@pytest.mark.parametrize("service,subcommand", [("ingest", "ingest-server"),
                                                ("app", "serve"), ("collector", "live")])
def test_compose_gmpscope_commands_parse(service: str, subcommand: str) -> None:
    svc = compose()["services"][service]
    cmd = command(service)
    assert cmd[0] == "gmpscope"
    args = build_parser().parse_args(cmd[1:])
    assert args.command == subcommand
    assert set(environment(service)) <= KNOWN_ENV
    if subcommand != "live":
        assert args.host == "0.0.0.0" and args.workers >= 2
        assert any(p.endswith(f":{args.port}") for p in svc["ports"])
        assert re.search(rf"EXPOSE .*\b{args.port}\b", (REPO / "Dockerfile").read_text())
        assert "healthz" in " ".join(svc["healthcheck"]["test"])
    else:
        # The collector points at the demo service and the ingest service by name.
        ingest_port = build_parser().parse_args(command("ingest")[1:]).port
        assert args.ingest == f"http://ingest:{ingest_port}"
        demo_addr = command("demo")[command("demo").index("-addr") + 1]
        assert args.target == f"http://demo:{demo_addr.rsplit(':', 1)[1]}"


def test_compose_database_settings() -> None:
    ingest, app = environment("ingest"), environment("app")
    assert ingest == app, "both servers share one database and data volume"
    assert ingest["GMPSCOPE_DB"].startswith("sqlite:////data/")
    # The PostgreSQL profile's URL, as docs/deploy.md gives it, matches the service.
    pg = compose()["services"]["postgres"]["environment"]
    url = f"{pg['POSTGRES_USER']}:{pg['POSTGRES_PASSWORD']}@postgres:5432/{pg['POSTGRES_DB']}"
    assert f"postgresql+psycopg://{url}" in (REPO / "docs" / "deploy.md").read_text()
    documented = set(re.findall(r"`(GMPSCOPE_[A-Z_]+)`", (REPO / "docs" / "deploy.md").read_text()))
    assert KNOWN_ENV <= documented


def test_compose_requires_a_token() -> None:
    """Without GMPSCOPE_TOKEN compose stops (``:?``) rather than serve every trace to
    anyone who reaches the ports; the servers' commands do not pass --insecure and,
    run without a token, refuse to listen on 0.0.0.0."""
    for service in ("ingest", "app", "collector"):
        with pytest.raises(KeyError, match="GMPSCOPE_TOKEN: set GMPSCOPE_TOKEN in .env"):
            environment(service, dotenv={})
        assert environment(service)["GMPSCOPE_TOKEN"] == TOKEN
    assert environment("app", {"GMPSCOPE_TOKEN": TOKEN})["GMPSCOPE_READ_TOKEN"] == ""
    assert "docs/security.md" in (REPO / "docker-compose.yml").read_text()
    for service in ("ingest", "app"):
        args = build_parser().parse_args(command(service)[1:])
        assert args.host == "0.0.0.0" and args.insecure is False
        with pytest.raises(CLIError, match="refusing to listen on 0.0.0.0 without a token"):
            check_exposure(args.host, Settings.from_env({}), args.insecure)
        check_exposure(args.host, Settings.from_env(environment(service)), args.insecure)
    assert "GMPSCOPE_TOKEN" in (REPO / "Dockerfile").read_text()


def test_demo_dockerfile_builds_the_demo_binaries() -> None:
    text = (REPO / "Dockerfile.demo").read_text()
    for binary in (command("demo")[0], command("loadgen")[0]):
        assert f"./cmd/{binary}" in text
        assert (REPO / "collectors" / "workloads" / "cmd" / binary / "main.go").is_file()


# --------------------------------------------------------------------------
# each service started outside Docker with its compose arguments


def _moved(cmd: list[str], port: int) -> list[str]:
    """The compose command listening on 127.0.0.1:``port`` instead."""
    out = list(cmd)
    for i, a in enumerate(out):
        if a == "--host":
            out[i + 1] = "127.0.0.1"
        elif a == "--port":
            out[i + 1] = str(port)
        elif a == "-addr":
            out[i + 1] = f"127.0.0.1:{port}"
    return out


class Proc:
    def __init__(self, cmd: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.p = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=out,
                                      start_new_session=True)

    def stop(self) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()


def _wait_ok(url: str, proc: Proc) -> None:
    deadline = time.monotonic() + GUARD_S
    while time.monotonic() < deadline:
        assert proc.p.poll() is None, proc.log.read_text()[-3000:]
        try:
            if requests.get(url, timeout=10).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"{url} never answered: {proc.log.read_text()[-3000:]}")


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for p in reversed(started):
        p.stop()


@pytest.mark.slow
def test_every_service_starts_outside_docker(tmp_path: Path, procs: list[Proc]) -> None:
    bindir = demo_binaries()
    data = tmp_path / "data"
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("GMPSCOPE_")}

    def env_of(service: str) -> dict[str, str]:
        env = environment(service)
        if "GMPSCOPE_DB" in env:  # the shared volume is the test's directory
            env["GMPSCOPE_DB"] = f"sqlite:///{data / 'gmpscope.db'}"
        if "GMPSCOPE_DATA" in env:
            env["GMPSCOPE_DATA"] = str(data)
        return {**base_env, **{k: v for k, v in env.items() if v != ""}}

    def python_cmd(cmd: list[str]) -> list[str]:
        assert cmd[0] == "gmpscope"
        return [sys.executable, "-m", "gmpscope", *cmd[1:]]

    urls: dict[str, str] = {}
    for service in ("ingest", "app"):
        port = free_port()
        procs.append(Proc(python_cmd(_moved(command(service), port)), env_of(service),
                          tmp_path / f"{service}.log"))
        urls[service] = f"http://127.0.0.1:{port}"
    for service in ("ingest", "app"):
        _wait_ok(urls[service] + "/healthz", procs[("ingest", "app").index(service)])
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert "react-entry-point" in requests.get(urls["app"] + "/", headers=auth, timeout=60).text
    assert "/login?next=/" in requests.get(urls["app"] + "/", timeout=60).url

    port = free_port()
    demo_cmd = _moved(command("demo"), port)
    procs.append(Proc([str(bindir / demo_cmd[0]), *demo_cmd[1:]], base_env,
                      tmp_path / "demo.log"))
    demo_url = f"http://127.0.0.1:{port}"
    _wait_ok(demo_url + "/healthz", procs[-1])

    lg = command("loadgen")
    lg[lg.index("-target") + 1] = demo_url
    procs.append(Proc([str(bindir / lg[0]), *lg[1:]], base_env, tmp_path / "loadgen.log"))

    col = command("collector")
    col[col.index("--target") + 1] = demo_url
    col[col.index("--ingest") + 1] = urls["ingest"]
    session = col[col.index("--session") + 1]
    procs.append(Proc(python_cmd(col), env_of("collector"), tmp_path / "collector.log"))

    def delivered() -> int:
        r = requests.get(f"{urls['app']}/api/live/sessions/{session}", headers=auth,
                         timeout=30)
        return int(r.json()["segments"]) if r.status_code == 200 else 0

    deadline = time.monotonic() + GUARD_S
    while delivered() < 1:
        assert time.monotonic() < deadline, (tmp_path / "collector.log").read_text()[-3000:]
        time.sleep(0.5)
    # The load generator is still sending; the collector still running.
    assert procs[-2].p.poll() is None and procs[-1].p.poll() is None
    # The app reads what the ingest service stored: one shared database.
    assert requests.get(f"{urls['app']}/live/{session}", headers=auth,
                        timeout=60).status_code == 200
    # Without the token the data stays behind the login form and a JSON 401.
    assert requests.get(f"{urls['app']}/api/live/sessions/{session}",
                        timeout=30).status_code == 401


@pytest.mark.slow
def test_installed_wheel_serves_outside_the_source_tree(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels),
                    str(REPO)], check=True, capture_output=True)
    (wheel,) = wheels.glob("gmpscope-*.whl")
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(site), str(wheel)], check=True, capture_output=True)
    env = {**os.environ, "PYTHONPATH": str(site), "GMPSCOPE_DATA": str(tmp_path / "data")}
    env.pop("GMPSCOPE_DB", None)
    where = subprocess.run([sys.executable, "-c", "import app, ingest; print(app.__file__, "
                            "ingest.__file__)"], cwd=tmp_path, env=env, check=True,
                           capture_output=True, text=True).stdout
    assert str(site) in where and str(REPO) not in where
    with Served(tmp_path / "data", [SAMPLE], extra_args=("--workers", "1"), cwd=tmp_path,
                env=env) as srv:
        traces = srv.get("/api/traces").json()["traces"]
        assert [t["name"] for t in traces] == [SAMPLE.name]
        css = srv.get("/assets/gmpscope.css")
        assert css.status_code == 200 and ".trace-nav" in css.text
        assert "react-entry-point" in srv.get("/").text
