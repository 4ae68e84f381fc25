"""The sample traces' lines on the library page: what each shows and the page to open first.

The lines live with the samples, in the table of ``samples/README.md`` (columns
``sample | what it shows | click first``; the last cell starts with the page's name in
backticks). ``gmpscope serve --samples DIR`` reads that table with :func:`read_catalog`
and keeps it in the data directory (:func:`write_catalog`, ``DATA/samples.json``),
each sample identified by the SHA-256 of its Go trace, the key the traces table
stores; the library matches its traces to it (:func:`hints_for`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

README = "README.md"
CATALOG_FILE = "samples.json"
#: The pages of a trace a hint may send to (``/traces/<id>/<page>``).
TRACE_PAGES = ("overview", "timeline", "states", "goroutines", "syscalls", "latency",
               "annotations", "poller")
_HEADER = ("sample", "what it shows", "click first")
_CODE = re.compile(r"`([^`]+)`")


class CatalogError(ValueError):
    """The samples' README has no usable table, or names a sample that is not there."""


@dataclass(frozen=True)
class Sample:
    """One sample: where it is, the Go trace it stores, and its line."""

    #: As written in the README, relative to the samples directory (a directory ends in /).
    path: str
    #: The file name of its Go trace (a recording directory's is inside it).
    trace_file: str
    #: SHA-256 of the Go trace's bytes, as ``traces.sha256``.
    sha256: str
    shows: str
    #: The trace page to open first (one of TRACE_PAGES).
    page: str
    #: What to look at there.
    hint: str


def _cells(line: str) -> list[str]:
    inner = line.strip().strip("|")
    return [c.strip() for c in re.split(r"(?<!\\)\|", inner)]


def parse_table(text: str) -> list[tuple[str, str, str]]:
    """The rows (sample, what it shows, click first) of the README's sample table."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.lstrip().startswith("|") and tuple(c.lower() for c in _cells(line)) == _HEADER:
            rows = []
            for row in lines[i + 2:]:
                if not row.lstrip().startswith("|"):
                    break
                cells = _cells(row)
                if len(cells) != 3:
                    raise CatalogError(f"{README}: a sample row needs 3 cells: {row.strip()}")
                rows.append((cells[0], cells[1], cells[2]))
            return rows
    raise CatalogError(f"{README}: no table with the columns {' | '.join(_HEADER)}")


def _go_trace(directory: Path) -> Path:
    """The Go trace inside a recording directory (the one its meta.json names)."""
    try:
        meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
        name = Path(str(meta["go_trace"]["name"])).name
    except (OSError, ValueError, KeyError, TypeError):
        raise CatalogError(f"{directory.name}: meta.json names no Go trace") from None
    trace = directory / name
    if not trace.is_file():
        raise CatalogError(f"{directory.name}: its Go trace {name} is not there")
    return trace


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_catalog(samples_dir: Path) -> list[Sample]:
    """Every sample of ``samples_dir``'s README table, in its order; CatalogError when
    the table is missing or malformed, or names a sample that is not there."""
    try:
        text = (samples_dir / README).read_text(encoding="utf-8")
    except OSError as e:
        raise CatalogError(f"{samples_dir / README}: {e.strerror or e}") from None
    out = []
    for first, shows, click in parse_table(text):
        m = _CODE.search(first)
        if m is None:
            raise CatalogError(f"{README}: no `path` in the sample cell {first!r}")
        path = m.group(1)
        where = samples_dir / path
        trace = _go_trace(where) if where.is_dir() else where
        if not trace.is_file():
            raise CatalogError(f"{README} names {path}, which is not in {samples_dir}")
        page_m = re.match(r"`([a-z]+)`\s*:?\s*(.*)$", click)
        if page_m is None or page_m.group(1) not in TRACE_PAGES:
            raise CatalogError(f"{README}: {path}: 'click first' must start with a page "
                               f"({', '.join(TRACE_PAGES)}) in backticks")
        out.append(Sample(path=path, trace_file=trace.name, sha256=_sha256(trace),
                          shows=shows, page=page_m.group(1), hint=page_m.group(2)))
    return out


def write_catalog(data_dir: Path, samples: list[Sample]) -> Path:
    """Keep ``samples`` in ``data_dir`` for the library (replacing what was there)."""
    path = data_dir / CATALOG_FILE
    tmp = path.with_name(f".{CATALOG_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"samples": [asdict(s) for s in samples]}, indent=1))
    os.replace(tmp, path)
    return path


def kept_catalog(data_dir: Path) -> list[Sample]:
    """The samples kept in ``data_dir`` (none when no ``serve --samples`` ran there, or
    the file is unreadable: the library then shows no lines)."""
    try:
        raw = json.loads((data_dir / CATALOG_FILE).read_text(encoding="utf-8"))
        return [Sample(**s) for s in raw["samples"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def hints_for(traces: list[dict[str, Any]], data_dir: Path) -> dict[int, dict[str, Any]]:
    """Trace id -> its sample's line (``shows``, ``page``, ``hint``, ``href``, ``path``),
    for the stored traces that are samples kept in ``data_dir``."""
    by_sha = {s.sha256: s for s in kept_catalog(data_dir)}
    out = {}
    for t in traces:
        s = by_sha.get(str(t.get("sha256")))
        if s is not None:
            tid = int(t["id"])
            out[tid] = {"path": s.path, "shows": s.shows, "page": s.page, "hint": s.hint,
                        "href": f"/traces/{tid}/{s.page}"}
    return out
