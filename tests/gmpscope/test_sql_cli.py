"""``gmpscope sql`` as a real subprocess on a database holding one sample trace:
an example's rows equal the decoded trace read in plain Python, a refusal is
one line with status 2 and changes nothing, the row cap is said on stderr."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from collectors.gotrace.todir import decode_file_to_dir
from gmpscope.commands.sql import render_table
from tests.support.server import SAMPLES
from tests.support.sql_oracle import read_decoded, time_per_state_per_p

ROOT = Path(__file__).resolve().parents[2]
TRACE = next(p for p in SAMPLES if p.name == "go1.27-syscallblock.trace")


def _gmpscope(*args: str, data: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gmpscope", *args, "--data-dir", str(data)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("sql-cli")
    r = _gmpscope("ingest", str(TRACE), data=d / "data")
    assert r.returncode == 0, r.stderr
    return d


def test_example_rows_equal_the_decoded_trace(data: Path) -> None:
    r = _gmpscope("sql", "--example", "time-per-state-per-p", "-f", "json", data=data / "data")
    assert r.returncode == 0, r.stderr
    body = json.loads(r.stdout)
    decode_file_to_dir(TRACE, data / "decoded")
    want = time_per_state_per_p(read_decoded(data / "decoded"))
    got = {(row[0], row[1]): (row[2], row[3]) for row in body["rows"]}
    assert body["columns"] == ["p", "state", "intervals", "total_ns"]
    assert got == want
    table = _gmpscope("sql", "--example", "time-per-state-per-p", data=data / "data")
    assert table.stdout == render_table(body["columns"], body["rows"])


def test_refusal_is_one_line_and_changes_nothing(data: Path) -> None:
    count = "SELECT count(*) AS n FROM intervals"
    before = _gmpscope("sql", count, "-f", "csv", data=data / "data").stdout
    for sql in ("DELETE FROM traces", "PRAGMA writable_schema=1", "DROP TABLE traces"):
        r = _gmpscope("sql", sql, data=data / "data")
        assert r.returncode == 2, (sql, r.stderr)
        assert r.stderr.count("\n") == 1 and "not allowed" in r.stderr and not r.stdout
    assert _gmpscope("sql", count, "-f", "csv", data=data / "data").stdout == before
    assert int(list(csv.reader(io.StringIO(before)))[1][0]) > 0


def test_row_cap_is_said_on_stderr(data: Path) -> None:
    r = _gmpscope("sql", "SELECT id FROM intervals ORDER BY id", "--limit", "5", "-f", "csv",
                  data=data / "data")
    assert r.returncode == 0
    assert len(r.stdout.splitlines()) == 6
    assert "cut at 5 rows" in r.stderr
    bad = _gmpscope("sql", "SELECT 1", "--limit", "0", data=data / "data")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
