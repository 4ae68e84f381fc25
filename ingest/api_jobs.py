"""JSON API of the jobs views (being written)."""

from __future__ import annotations

from flask import Blueprint

bp = Blueprint("gmpscope_api_jobs", __name__)
