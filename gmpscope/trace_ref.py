"""TRACE_OR_ID arguments: a stored trace id, a raw trace file or a decoded directory."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from gmpscope.errors import EXIT_BAD_INPUT, CLIError


def resolve_trace(engine: Any, settings: Any, ref: str, command: str) -> int:
    """A stored trace id from an id or a path (ingested when new, found by hash
    otherwise); ``command`` names the subcommand in the message about an ingest."""
    from ingest.load.pipeline import (
        IngestError,
        file_sha256,
        find_by_sha,
        ingest_trace_file,
        load_parquet_dir,
    )
    from ingest.store.traces import get_trace

    path = Path(ref)
    if ref.isdigit() and not path.exists():
        if get_trace(engine, int(ref)) is None:
            raise CLIError(f"no trace with id {ref} in the database", EXIT_BAD_INPUT)
        return int(ref)
    if not path.exists():
        raise CLIError(f"no stored trace id or file: {ref}", EXIT_BAD_INPUT)
    try:
        if path.is_dir():  # found by its hash inside load_parquet_dir when stored
            res = load_parquet_dir(engine, path, path.name, data_dir=settings.data_dir)
        else:
            res = find_by_sha(engine, file_sha256(path)) or ingest_trace_file(
                engine, path, path.name, data_dir=settings.data_dir)
    except IngestError as e:
        raise CLIError(str(e), EXIT_BAD_INPUT) from None
    if res.created:
        print(f"gmpscope {command}: trace {res.id} ingested: {path.name}", file=sys.stderr)
    return res.id
