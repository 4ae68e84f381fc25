"""A trace read through a mapping (collectors/gotrace/mapped.py): the same
hash and the same decode as the file's bytes, and the pages the decoder has
passed given back to the page cache (the ingest's peak holds about one
generation of the raw trace, not all of it)."""

from __future__ import annotations

import hashlib
import mmap
from pathlib import Path
from typing import Any

import pytest

from collectors.gotrace import columnar
from collectors.gotrace.mapped import MappedTrace

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
#: A real trace of several generations (Go 1.27's HTTP workload, 2 MB).
TRACE = SAMPLES / "go1.27-httpnet-2MB.trace"

pytestmark = pytest.mark.skipif(not columnar.available(), reason="C decoder not built")


def _resident(path: Path) -> int:
    """Bytes of ``path``'s mappings resident in this process (/proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if len(head) >= 6 and "-" in head[0] and head[-1] == str(path):
            inside = True
        elif len(head) >= 5 and "-" in head[0]:
            inside = False
        elif inside and line.startswith("Rss:"):
            total += int(head[1]) * 1024
    return total


def _decode(data: Any, release: Any = None) -> tuple[dict[str, Any], list[Any], list[int]]:
    rows: list[Any] = []
    passed: list[int] = []

    def note(n: int) -> None:
        passed.append(n)
        if release is not None:
            release(n)

    meta, tables = columnar.decode_in_memory(data, rows.append, source={"name": "t"},
                                             release=note)
    return meta, [*rows, tables["events"], tables["stacks"]], passed


def test_hash_is_the_files() -> None:
    mapped = MappedTrace(TRACE)
    try:
        assert mapped.sha256() == hashlib.sha256(TRACE.read_bytes()).hexdigest()
        assert len(mapped) == TRACE.stat().st_size
        assert _resident(TRACE) == 0  # every block given back after hashing
    finally:
        mapped.close()


def test_mapped_decode_is_the_bytes_decode_and_gives_pages_back() -> None:
    meta_b, tables_b, passed_b = _decode(TRACE.read_bytes())
    mapped = MappedTrace(TRACE)
    try:
        meta_m, tables_m, passed_m = _decode(mapped.buffer, mapped.release_before)
        assert meta_m == meta_b
        assert len(tables_m) == len(tables_b)
        for a, b in zip(tables_m, tables_b, strict=True):
            assert a.equals(b)
        # The decoder moved generation by generation: what it said it passed
        # never goes back, and ends past the first generation.
        assert passed_m == passed_b
        assert passed_m == sorted(passed_m)
        assert meta_b["generations"] > 1 and passed_m[-1] > 0
        # At the end the decoder has passed the whole file: only the page
        # holding its tail (not a whole page, so never given back) is left.
        assert passed_m[-1] == len(mapped)
        assert _resident(TRACE) <= mmap.PAGESIZE
    finally:
        mapped.close()


def test_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.trace"
    empty.write_bytes(b"")
    mapped = MappedTrace(empty)
    assert len(mapped) == 0 and mapped.buffer == b""
    assert mapped.sha256() == hashlib.sha256(b"").hexdigest()
    mapped.release_before(10)  # nothing mapped: nothing to give back
    mapped.close()
