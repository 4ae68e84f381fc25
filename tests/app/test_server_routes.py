"""The explorer's app (``gmpscope serve``) keeps the API's answers for paths it
does not know: an unknown ``/api/...`` path is a JSON 404 there too, not the
explorer's HTML page (issue 27's defect), while pages and known endpoints are
unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.server import create_app
from ingest.config import Settings, sqlite_url


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    d = tmp_path_factory.mktemp("routes")
    app = create_app(Settings.from_env({}, data_dir=d, db_url=sqlite_url(Path(d) / "t.db")))
    return app.test_client()


@pytest.mark.parametrize("path", ["/api/nope", "/api/traces/1/nope", "/api/x/y/z"])
def test_unknown_api_paths_are_json_404(client, path: str) -> None:  # type: ignore[no-untyped-def]
    r = client.get(path)
    assert r.status_code == 404 and r.is_json and "no such API endpoint" in r.get_json()["error"]


def test_pages_and_known_endpoints_unchanged(client) -> None:  # type: ignore[no-untyped-def]
    page = client.get("/traces/1/overview")
    assert page.status_code == 200 and page.content_type.startswith("text/html")
    assert client.get("/api/traces").status_code == 200
    put = client.put("/api/traces")
    assert put.status_code == 405 and put.is_json
