"""The deployment files: the wheel the Dockerfile installs works outside the source tree,
and docker-compose.yml runs commands and settings gmpscope understands.

No Docker engine runs here, so the compose file is checked by running what it
describes without Docker: its command line parses with our CLI, its environment
names are the settings gmpscope reads, and the installed wheel serves the API and
the UI from its own package data (assets, migrations).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import requests
import yaml

from gmpscope.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "samples" / "go1.27-syscallblock.trace"
#: The settings ingest.config.Settings.from_env reads.
KNOWN_ENV = {"GMPSCOPE_DB", "GMPSCOPE_DATA", "GMPSCOPE_TOKEN", "GMPSCOPE_MAX_UPLOAD",
             "GMPSCOPE_BUSY_TIMEOUT_MS"}


def compose() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def test_compose_services_run_gmpscope_commands_we_have() -> None:
    services = compose()["services"]
    assert {"gmpscope", "postgres"} <= set(services)
    app = services["gmpscope"]
    cmd = app["command"]
    assert cmd[0] == "gmpscope"
    args = build_parser().parse_args(cmd[1:])
    assert args.command == "serve" and args.host == "0.0.0.0"
    port = str(args.port)
    assert any(p.endswith(f":{port}") for p in app["ports"])
    env = app["environment"]
    assert set(env) <= KNOWN_ENV
    assert env["GMPSCOPE_DB"].startswith("postgresql+psycopg://")
    pg = services["postgres"]["environment"]
    assert f"{pg['POSTGRES_USER']}:{pg['POSTGRES_PASSWORD']}@postgres:5432/{pg['POSTGRES_DB']}" \
        in env["GMPSCOPE_DB"]
    docker = (REPO / "Dockerfile").read_text()
    assert re.search(rf"EXPOSE {port}\b", docker)


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
    proc = subprocess.Popen([sys.executable, "-m", "gmpscope", "serve", "--port", "0",
                             "--workers", "1", str(SAMPLE)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        assert proc.stdout is not None
        url = ""
        for line in proc.stdout:
            m = re.search(rb"serving (http://\S+)", line)
            if m:
                url = m.group(1).decode()
                break
        assert url, "the server did not start"
        traces = requests.get(url + "/api/traces", timeout=60).json()["traces"]
        assert [t["name"] for t in traces] == [SAMPLE.name]
        css = requests.get(url + "/assets/gmpscope.css", timeout=60)
        assert css.status_code == 200 and ".trace-nav" in css.text
        assert "react-entry-point" in requests.get(url + "/", timeout=60).text
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(60)
