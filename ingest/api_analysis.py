"""JSON API of the analysis views (being written)."""

from __future__ import annotations

from flask import Blueprint

bp = Blueprint("gmpscope_api_analysis", __name__)
