"""JSON API of the export views (being written)."""

from __future__ import annotations

from flask import Blueprint

bp = Blueprint("gmpscope_api_export", __name__)
