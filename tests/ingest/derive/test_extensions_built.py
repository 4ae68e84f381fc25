"""Every C extension is built where the tests run (``make test`` installs what
they need): the tests that compare each fast path with its Python or numpy form
would otherwise skip without saying so, and CI would pass on the slow paths alone."""

from __future__ import annotations

import importlib

import pytest

EXTENSIONS = ("collectors.gotrace._v2fast", "ingest.derive._intervalorder",
              "ingest.derive._summaries", "ingest.store._sqlitebulk", "ingest.load._columnappend",
              "ingest.derive._lanesets", "ingest.load._pairing", "ingest.views._binsums",
              "ingest.views._waits",
              "ingest.views._waitedges",
              "ingest.views._lanesums",
              "ingest.store._intervalfiles")


@pytest.mark.parametrize("name", EXTENSIONS)
def test_extension_is_built(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__file__ is not None and module.__file__.endswith(".so")
