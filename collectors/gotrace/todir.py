"""Decode a trace file into a Parquet directory, atomically.

Shared by ``gmpscope decode`` and the ingest service: the files appear in the
output directory only once the whole decode has succeeded, so a failed or
interrupted decode never leaves a half-written directory behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from collectors.gotrace.errors import TraceFormatError


def decode_bytes_to_dir(data: bytes | memoryview, out_dir: Path,
                        source: Path | None = None) -> dict[str, Any]:
    """Decode ``data`` (a whole trace) into ``out_dir`` (non-atomic); return meta.json.

    Uses the C decoder for Go 1.22+ traces when it is built (identical
    output), the pure-Python decoder otherwise. Raises TraceFormatError.
    """
    from collectors.gotrace import columnar
    from collectors.gotrace.parquet_out import source_facts, write_parquet
    from collectors.gotrace.reader import open_trace, read_header

    _, family = read_header(data)
    facts = source_facts(source, data) if source is not None else None
    if family == "v2" and columnar.available():
        return columnar.write_parquet_fast(data, out_dir, source=facts)
    trace = open_trace(data)
    return write_parquet(trace.events(), trace.stacks, lambda: trace.info, out_dir,
                         source=facts)


def decode_file_to_dir(src: Path, out_dir: Path) -> dict[str, Any]:
    """Decode the trace file ``src`` into ``out_dir`` and return meta.json's content.

    The files are written to a temporary sibling directory and moved into
    ``out_dir`` (created if needed) only after a successful decode. Raises
    TraceFormatError for input that is not a readable trace (an empty file
    included) and OSError for I/O problems.
    """
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".gmpscope-decode-", dir=out_dir.parent))
    try:
        data = src.read_bytes()
        if not data:
            raise TraceFormatError(-1, "empty file, not a Go trace")
        meta = decode_bytes_to_dir(data, tmp, source=src)
        del data
        out_dir.mkdir(exist_ok=True)
        for item in tmp.iterdir():
            os.replace(item, out_dir / item.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return meta
