"""JSON API of the views views (being written)."""

from __future__ import annotations

from flask import Blueprint

bp = Blueprint("gmpscope_api_views", __name__)
