"""The ingest's optional C extensions (built by setup.py where a compiler is).

Each has a numpy form beside it for machines without a compiler; one switch,
``GMPSCOPE_PURE=1``, makes every path (the decoder's too) take that form, so
that tests can compare the two.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

#: Set to 1 to use the Python and numpy forms even where the C is built.
PURE_ENV = "GMPSCOPE_PURE"


def pure() -> bool:
    """True when ``$GMPSCOPE_PURE`` asks for the Python and numpy forms."""
    return os.environ.get(PURE_ENV, "") == "1"


def optional_extension(module: str) -> Any | None:
    """The extension ``module`` (a dotted name, e.g. ``ingest.derive._summaries``);
    None when it is not built or when :func:`pure` says so."""
    if pure():
        return None
    try:
        return importlib.import_module(module)
    except ImportError:
        return None
