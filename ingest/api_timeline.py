"""JSON API of the timeline views (being written)."""

from __future__ import annotations

from flask import Blueprint

bp = Blueprint("gmpscope_api_timeline", __name__)
