"""Scaffold of the library page (being written)."""

from __future__ import annotations

from typing import Any

from dash import Dash, html

ROUTES = ("/",)
TITLE = "library"


def layout(query: dict[str, str], **args: Any) -> Any:
    return html.Div(html.H2(TITLE))


def register(dash_app: Dash) -> None:
    return None
