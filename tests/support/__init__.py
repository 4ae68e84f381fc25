"""Shared test support: Go's reference parser as an oracle, and comparisons.

- :mod:`support.goparsed` parses ``go tool trace -d=parsed`` output into
  :class:`support.goparsed.GoEvent` and converts our events to the same form.
- :mod:`support.asserts` compares two event lists with readable diffs.
- :mod:`support.rawtext` turns Go's raw text trace form (the ``.test`` golden
  files) into the binary wire format.
"""

from __future__ import annotations

import importlib.util
import os
import sys

# The support modules import the decoder's model; make the repo root
# importable however pytest was started (plain `pytest` only puts tests/ on
# sys.path because tests/ is not a package).
if importlib.util.find_spec("collectors") is None:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
