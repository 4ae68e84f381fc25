"""The ingest's optional C extensions (built by setup.py where a compiler is):
each is used unless its own switch or ``GMPSCOPE_PURE=1`` asks for the Python
or numpy form beside it, which tests compare it with."""

from __future__ import annotations

import importlib
import os
from typing import Any


def optional_extension(name: str, pure_env: str) -> Any | None:
    """The module ``ingest.<name>``; None when it is not built or when
    ``$<pure_env>`` or ``$GMPSCOPE_PURE`` is 1."""
    if "1" in (os.environ.get(pure_env), os.environ.get("GMPSCOPE_PURE")):
        return None
    try:
        return importlib.import_module(f"ingest.{name}")
    except ImportError:
        return None
