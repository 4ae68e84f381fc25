"""Downloads as files: a safe attachment name and the headers that send it.

Shared by the table downloads (:mod:`ingest.api.tables`) and the UI's figure
export (``app.export_api``); plain string work, no web framework at import.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flask import Response


def safe_filename(*parts: object, ext: str) -> str:
    """A download file name from parts: only [A-Za-z0-9._-], never empty or hidden.

    ``ext`` is the file extension as it should appear (``csv``, ``mmd``...).
    """
    stem = "-".join(re.sub(r"[^A-Za-z0-9._-]+", "_", str(p)).strip("._-") for p in parts)
    stem = re.sub(r"-+", "-", stem).strip("-") or "gmpscope"
    return f"{stem[:120]}.{ext}"


def attachment(resp: Response, filename: str) -> Response:
    """``resp`` as a download named ``filename`` (a :func:`safe_filename` name)."""
    # The name is built by safe_filename: ASCII letters, digits, '.', '_', '-' only.
    resp.headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp
