"""``gmpscope ingest-server`` stays light: serving the ingest API (uploads, the
trace list, every table download) never imports Dash, Plotly or the app.

The figure downloads are the UI's (``app.export_api``); the ingest-only server
does not answer them. Run in a fresh interpreter so that nothing this test
session imported counts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ingest.views.tables import TABLES

REPO = Path(__file__).resolve().parents[3]
TRACE = REPO / "tests" / "data" / "traces" / "go1.23-allocfree.trace"

_SCRIPT = r"""
import json, sys
from pathlib import Path

from ingest.api.server import create_app
from ingest.config import Settings

tmp, trace, tables = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
app = create_app(Settings.from_env({}, data_dir=tmp / "data",
                                   db_url=f"sqlite:///{tmp / 'g.db'}"))
c = app.test_client()
status = {}
r = c.post("/api/traces", data=trace.read_bytes())
status["upload"] = r.status_code
tid = r.get_json()["id"]
r = c.get("/api/traces")
status["list"] = r.status_code
status["listed"] = [t["id"] for t in r.get_json()["traces"]] == [tid]
for name in tables:
    for fmt in ("csv", "parquet"):
        r = c.get(f"/api/traces/{tid}/tables/{name}.{fmt}")
        status[f"{name}.{fmt}"] = r.status_code
        status[f"{name}.{fmt}.bytes"] = len(r.data) > 0
        r.close()
status["export"] = c.get(f"/api/traces/{tid}/export?diagram=states&format=dot").status_code
status["diagrams"] = c.get("/api/export/diagrams").status_code
heavy = sorted(m for m in sys.modules
               if m.split(".")[0].startswith(("dash", "plotly", "kaleido"))
               or m == "app" or m.startswith("app."))
print(json.dumps({"status": status, "heavy": heavy}))
"""


def test_ingest_server_never_imports_the_ui(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path), str(TRACE), json.dumps(list(TABLES))],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    status = got["status"]
    assert status.pop("upload") == 201
    assert status.pop("list") == 200 and status.pop("listed") is True
    # Figures are the UI server's: the ingest-only server has no such routes.
    assert status.pop("export") == 404
    assert status.pop("diagrams") == 404
    assert status == {k: v for name in TABLES for k, v in (
        (f"{name}.csv", 200), (f"{name}.csv.bytes", True),
        (f"{name}.parquet", 200), (f"{name}.parquet.bytes", True))}
    assert got["heavy"] == [], f"the ingest server imported UI modules: {got['heavy']}"
