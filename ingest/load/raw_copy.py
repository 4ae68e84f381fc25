"""The raw trace kept beside its decoded rows, zstd-compressed.

No datum is rebuilt from it, but it is what a user downloads to open the
trace elsewhere (``go tool trace``, gotraceui): ``GET /api/traces/<id>/trace``
streams it back, byte for byte. Kept as ``DATA/traces/<sha256>.trace.zst``:
Go's trace format compresses well (the 200 MB busyservice trace: 216 MB ->
118 MB at zstd level 2 in 0.7 s on one core; docs/ingest.md). Copies
kept by versions before it as plain ``<sha256>.trace`` are still read and
removed alike.

zstd through pyarrow (already a dependency for the Parquet files): its codec
compresses blocks into a stream of zstd frames that its
``CompressedInputStream`` reads back as one stream.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import Engine, select

from ingest.store import models

#: zstd's level. On the 200 MB benchmark trace (8 MB blocks, one core): 1 keeps
#: 131 MB in 0.60 s, 2 118 MB in 0.71 s, 3 (zstd's default) 108 MB in 1.1 s. The
#: copy runs beside a CPU-bound load, whose time is a target, and counts in
#: what a trace keeps on disk, also a target: 2.
LEVEL = 2
#: Bytes compressed at a time (one zstd frame each).
BLOCK = 8 << 20
SUFFIX = ".trace.zst"
#: How versions before the compression kept it.
PLAIN_SUFFIX = ".trace"


def raw_path(data_dir: Path, sha256: str) -> Path:
    """Where the raw trace with this hash is kept."""
    return data_dir / "traces" / f"{sha256}{SUFFIX}"


def kept_path(data_dir: Path, sha256: str) -> Path | None:
    """The kept raw trace with this hash (compressed, or plain from an older
    version); None when there is none."""
    for p in (raw_path(data_dir, sha256), data_dir / "traces" / f"{sha256}{PLAIN_SUFFIX}"):
        if p.exists():
            return p
    return None


def keep_raw(src: Path, dest: Path) -> None:
    """Write ``src`` compressed to ``dest`` (the caller renames it into place)."""
    import pyarrow as pa  # type: ignore[import-untyped]

    codec = pa.Codec("zstd", compression_level=LEVEL)
    with open(src, "rb") as f, open(dest, "wb") as out:
        while block := f.read(BLOCK):
            out.write(codec.compress(block, asbytes=True))


class RawCopy:
    """:func:`keep_raw` of ``src`` to ``dest`` on a thread, from now on: it
    overlaps the load instead of following it."""

    def __init__(self, src: Path, dest: Path) -> None:
        import threading

        self.dest = dest
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(src,), name="raw-copy",
                                        daemon=True)
        self._thread.start()

    def _run(self, src: Path) -> None:
        try:
            keep_raw(src, self.dest)
        except BaseException as e:  # noqa: BLE001 - raised by wait()
            self._error = e

    def wait(self) -> None:
        """Until the copy is written; raises what it failed with."""
        self._thread.join()
        if self._error is not None:
            raise self._error


def read_raw(path: Path, chunk: int = 1 << 20) -> Iterator[bytes]:
    """The raw trace's bytes from a kept copy, ``chunk`` at a time."""
    import pyarrow as pa

    if path.name.endswith(SUFFIX):
        with pa.CompressedInputStream(str(path), "zstd") as f:
            while block := f.read(chunk):
                yield bytes(block)
        return
    with open(path, "rb") as plain:
        while data := plain.read(chunk):
            yield data


def remove_raw(data_dir: Path, sha256: str) -> None:
    """Delete the kept raw trace with this hash (either form)."""
    for suffix in (SUFFIX, PLAIN_SUFFIX):
        (data_dir / "traces" / f"{sha256}{suffix}").unlink(missing_ok=True)


def remove_orphan_raw_files(engine: Engine, data_dir: Path, min_age_s: float = 3600.0) -> int:
    """Delete kept raw traces that no stored trace owns: a load killed after
    the raw copy was kept and before its commit leaves one. Only files older
    than ``min_age_s`` (another server may be loading one right now). Returns
    how many went."""
    root = data_dir / "traces"
    if not root.is_dir():
        return 0
    with engine.connect() as conn:
        owned = {str(s) for s in conn.execute(select(models.traces.c.sha256)).scalars()}
    cutoff = time.time() - min_age_s
    removed = 0
    for f in [*root.glob(f"*{SUFFIX}"), *root.glob(f"*{PLAIN_SUFFIX}")]:
        sha = f.name.removesuffix(SUFFIX).removesuffix(PLAIN_SUFFIX)
        try:
            if sha not in owned and f.stat().st_mtime < cutoff:
                os.unlink(f)
                removed += 1
        except OSError:
            continue
    return removed
