"""Text and Markdown renderings of a real report (samples/go1.27-syscallblock.trace):
every finding, link and frame is there, and a hostile function name stays
inert text in Markdown."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from ingest.derive.frames import FrameStore
from ingest.diagnose import diagnose, render_markdown, render_text
from ingest.diagnose.render import md_escape
from ingest.load.pipeline import ingest_trace_file
from ingest.store.db import make_engine

SAMPLE = Path(__file__).resolve().parents[3] / "samples" / "go1.27-syscallblock.trace"
HOSTILE = "main.<script>alert(1)</script>*x*_[y](javascript:z)`\nnext"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("diag-render")
    engine = make_engine(f"sqlite:///{d / 'gmpscope.db'}")
    tid = ingest_trace_file(engine, SAMPLE, SAMPLE.name, data_dir=d).id
    rep = diagnose(engine, FrameStore(engine, d).get(tid))
    engine.dispose()
    return rep


def test_text_has_every_finding_and_link(report: dict[str, Any]) -> None:
    out = render_text(report, base_url="http://h:1")
    assert report["findings"]
    for f in report["findings"]:
        assert f["summary"] in out
        assert "http://h:1" + f["link"] in out
        for r in f["ranges"]:
            assert f"[{r['t1']}, {r['t2']})" in out
    for r in report["rules"]:
        assert f"{r['rule']}: {r['status']}" in out


def test_markdown_links_and_frames(report: dict[str, Any]) -> None:
    out = render_markdown(report)
    for f in report["findings"]:
        assert f"[Open in timeline]({f['link']})" in out
        for g in f["goroutines"]:
            assert f"]({g['link']})" in out
        for s in f["stacks"][:3]:
            for fr in s["frames"][:8]:
                assert f"    {fr['function']} {fr['file']}:{fr['line']}" in out


def test_markdown_keeps_hostile_names_inert(report: dict[str, Any]) -> None:
    rep = copy.deepcopy(report)
    f = rep["findings"][0]
    f["summary"] = f"blocked at {HOSTILE}"
    f["stacks"][0]["frames"][0]["function"] = HOSTILE
    out = render_markdown(rep)
    # Raw only inside indented code blocks (literal text there).
    assert all(line.startswith("    ") for line in out.splitlines() if "<script>" in line)
    assert md_escape(f"blocked at {HOSTILE}") in out
    assert r"\<script\>alert(1)\</script\>\*x\*\_\[y\](javascript:z)\` next" in out
    # In the indented code block the name stays on its one line.
    assert f"    {HOSTILE.replace(chr(10), ' ')} " in out


def _walk(node: Any) -> list[Any]:
    out = [node]
    kids = getattr(node, "children", None)
    if isinstance(kids, (list, tuple)):
        for k in kids:
            out += _walk(k)
    elif kids is not None:
        out += _walk(kids)
    return out


def test_panel_components_are_plain_text(report: dict[str, Any]) -> None:
    from dash import dcc

    from app.components_findings import findings_view

    rep = copy.deepcopy(report)
    rep["findings"][0]["stacks"][0]["frames"][0]["function"] = HOSTILE
    nodes = [n for top in findings_view(rep) for n in _walk(top)]
    assert not any(isinstance(n, dcc.Markdown) for n in nodes)
    assert not any(getattr(n, "dangerously_allow_html", False) for n in nodes)
    texts = [n for n in nodes if isinstance(n, str)]
    assert any(HOSTILE in t for t in texts)  # the stack text, verbatim
    hrefs = {getattr(n, "href", None) for n in nodes}
    for f in rep["findings"]:
        assert f["link"] in hrefs and f["summary"] in texts
        assert {r["link"] for r in f["ranges"]} <= hrefs
        assert {g["link"] for g in f["goroutines"]} <= hrefs
