"""SVG/PNG export retries Kaleido once when Kaleido sent the render before its
page's script had loaded (a Kaleido 1.x race seen in a loaded CI run), and
only then: any other failure is the caller's at once."""

from __future__ import annotations

import sys
from typing import Any

import plotly.graph_objects as go  # type: ignore[import-untyped]
import pytest

from app import exporting


class JavascriptError(Exception):
    """Named as Kaleido's (kaleido._kaleido_tab._errors.JavascriptError)."""


def _fake(monkeypatch: pytest.MonkeyPatch, failures: list[Exception]) -> list[int]:
    import kaleido  # type: ignore[import-untyped]

    calls: list[int] = []

    def calc_fig_sync(fig: Any, opts: Any, kopts: Any) -> bytes:
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return b"<svg></svg>"

    monkeypatch.setattr(kaleido, "calc_fig_sync", calc_fig_sync)
    monkeypatch.setenv("BROWSER_PATH", sys.executable)  # any existing file
    return calls


def test_page_not_ready_is_retried_once(monkeypatch: pytest.MonkeyPatch) -> None:
    race = JavascriptError("{'description': 'ReferenceError: kaleido_scopes is not defined'}")
    calls = _fake(monkeypatch, [race])
    assert exporting.figure_image(go.Figure(), "svg") == b"<svg></svg>"
    assert len(calls) == 2


def test_twice_not_ready_and_other_errors_are_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    race = "ReferenceError: kaleido_scopes is not defined"
    calls = _fake(monkeypatch, [JavascriptError(race), JavascriptError(race)])
    with pytest.raises(JavascriptError):
        exporting.figure_image(go.Figure(), "svg")
    assert len(calls) == 2
    calls = _fake(monkeypatch, [JavascriptError("TypeError: bad figure")])
    with pytest.raises(JavascriptError):
        exporting.figure_image(go.Figure(), "svg")
    assert len(calls) == 1
