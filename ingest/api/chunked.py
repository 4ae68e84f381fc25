"""Chunked upload sessions: a large trace sent as ordered byte ranges, spooled to disk.

A browser cannot stream a 1 GB file in one request it can resume, so it sends the
file in chunks: ``create`` opens a session for a declared size, ``write`` appends one
chunk at the offset the session has reached, ``complete`` hands the finished spool to
an ingest job. Sessions live in files in the upload directory, not in memory or the
database, so that any server process (gunicorn worker) can take any chunk:

- ``.upload-<id>.part``: the bytes received so far; its size *is* the offset reached,
  so a chunk cut off by a network error leaves a resumable prefix;
- ``.upload-<id>.json``: the declared name and size, and the job once completed.

Both names match what :func:`gmpscope.wsgi.remove_stale_uploads` clears at start.
An exclusive ``flock`` on the spool serialises writers of one session across
processes. Session ids are random hex, checked before they become a path. Nothing
here knows about Flask or the database.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from ingest.api.uploads import CHUNK, BadUpload, TooLarge, UploadError

#: Largest chunk one PUT may carry (the browser sends 8 MiB).
MAX_CHUNK = 64 << 20
#: Longest upload name kept (it is only a label).
MAX_NAME = 255
#: Sessions untouched for this long are removed when a new one is opened.
SESSION_TTL_S = 24 * 3600.0
_ID = re.compile(r"[0-9a-f]{32}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class NoSession(UploadError):
    status = 404


class Conflict(UploadError):
    """The chunk does not fit where the session is (a hole, an overlap, a race)."""

    status = 409


class NoSpace(UploadError):
    status = 507


@dataclass
class Session:
    """One chunked upload: what was declared and how far it has come."""

    id: str
    name: str
    size: int
    received: int
    created: float
    job_id: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"upload_id": self.id, "name": self.name, "size": self.size,
                "received": self.received, "job_id": self.job_id}


def clean_name(name: str) -> str:
    """An upload's name as a label: no control characters, at most MAX_NAME characters."""
    return _CONTROL.sub("", name).strip()[:MAX_NAME]


class Sessions:
    """The chunked upload sessions kept in ``directory`` (Settings.tmp_dir)."""

    def __init__(self, directory: Path, limit: int) -> None:
        self.directory = directory
        self.limit = limit

    # -- paths -------------------------------------------------------------

    def _check_id(self, upload_id: str) -> str:
        if not _ID.fullmatch(upload_id):
            raise NoSession(f"no upload {upload_id[:40]!r}")
        return upload_id

    def spool_path(self, upload_id: str) -> Path:
        return self.directory / f".upload-{self._check_id(upload_id)}.part"

    def _meta_path(self, upload_id: str) -> Path:
        return self.directory / f".upload-{self._check_id(upload_id)}.json"

    # -- sessions ----------------------------------------------------------

    def create(self, name: str, size: int) -> Session:
        """Open a session for ``size`` bytes; TooLarge past the limit, NoSpace
        when the disk cannot hold it."""
        if size <= 0:
            raise BadUpload("size must be a positive number of bytes")
        if size > self.limit:
            raise TooLarge(f"upload of {size:,} bytes is larger than the limit of "
                           f"{self.limit:,} bytes")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.sweep()
        free = shutil.disk_usage(self.directory).free
        if free < size:
            raise NoSpace(f"not enough disk space for {size:,} bytes ({free:,} free)")
        s = Session(id=secrets.token_hex(16), name=clean_name(name), size=size, received=0,
                    created=time.time())
        self.spool_path(s.id).touch(exist_ok=False)
        self._save(s)
        return s

    def get(self, upload_id: str) -> Session:
        """The session with its current offset; NoSession when there is none."""
        meta = self._load(upload_id)
        try:
            meta.received = self.spool_path(upload_id).stat().st_size
        except FileNotFoundError:
            raise NoSession(f"no upload {upload_id}") from None
        return meta

    def write(self, upload_id: str, offset: int, length: int | None,
              stream: IO[bytes]) -> Session:
        """Append the chunk ``stream`` (``length`` bytes) at ``offset``.

        The offset must be where the session is; a chunk that ends exactly there
        and holds the same bytes is a retry of the last one and is accepted
        without change. Anything else is a Conflict naming the offset to send from.
        """
        if length is None:
            raise BadUpload("a chunk needs a Content-Length")
        if length > MAX_CHUNK:
            raise TooLarge(f"chunk of {length:,} bytes is over the {MAX_CHUNK:,} byte limit "
                           "of one chunk")
        if offset < 0:
            raise BadUpload("offset must not be negative")
        with self._locked(upload_id) as f:
            meta = self._load(upload_id)
            if meta.job_id:
                raise Conflict("this upload is complete; it can no longer change")
            received = os.fstat(f.fileno()).st_size
            if offset + length > meta.size:
                raise BadUpload(f"chunk {offset:,}-{offset + length:,} goes past the declared "
                                f"size of {meta.size:,} bytes")
            if offset > received:
                raise Conflict(f"chunk at offset {offset:,} leaves a hole: the upload has "
                               f"{received:,} bytes; send from there")
            if offset < received:
                if offset + length != received or not _same_bytes(f, offset, length, stream):
                    raise Conflict(f"chunk at offset {offset:,} overlaps the {received:,} "
                                   "bytes already received; send from there")
            else:
                f.seek(received)
                left = length
                while left > 0:
                    data = stream.read(min(CHUNK, left))
                    if not data:
                        break  # the client went away: keep the prefix, it resumes from there
                    f.write(data)
                    left -= len(data)
                f.flush()
                if left:
                    raise BadUpload(f"chunk ended after {length - left:,} of {length:,} bytes")
            meta.received = os.fstat(f.fileno()).st_size
            self._touch(upload_id)
            return meta

    def complete(self, upload_id: str, start: Callable[[Session, Path], str],
                 dead: Callable[[str], bool] = lambda job_id: False) -> Session:
        """Hand the finished spool to ``start`` (which returns a job id) once.

        Completing again answers the same job (a retried request), unless that job
        is ``dead`` (its server process died): then the spool, still here, goes
        to a new job, so the bytes need not be sent again.
        """
        with self._locked(upload_id) as f:
            meta = self._load(upload_id)
            meta.received = os.fstat(f.fileno()).st_size
            if meta.job_id and not dead(meta.job_id):
                return meta
            if meta.received != meta.size:
                raise Conflict(f"upload incomplete: {meta.received:,} of {meta.size:,} bytes "
                               "received")
            meta.job_id = start(meta, self.spool_path(upload_id))
            self._save(meta)
            return meta

    def abort(self, upload_id: str) -> None:
        """Drop a session and its bytes (refused once a job owns them)."""
        with self._locked(upload_id):
            meta = self._load(upload_id)
            if meta.job_id:
                raise Conflict(f"upload already handed to job {meta.job_id}")
            self.remove(upload_id)

    def finish(self, upload_id: str) -> None:
        """Delete a session's files once its job is done.

        Waits for the session's lock first: a job on a tiny or garbage file can
        end before ``complete`` (which holds the lock) has saved the job id, and
        removing the files under it would let that save bring the ``.json`` back
        as an orphan.
        """
        try:
            f = open(self.spool_path(upload_id), "r+b")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            self.remove(upload_id)
            return
        with f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            self.remove(upload_id)

    def remove(self, upload_id: str) -> None:
        """Delete a session's files (the caller holds its lock or it is stale)."""
        self.spool_path(upload_id).unlink(missing_ok=True)
        self._meta_path(upload_id).unlink(missing_ok=True)

    def sweep(self, ttl_s: float = SESSION_TTL_S) -> None:
        """Remove sessions nobody has written to for ``ttl_s`` seconds."""
        cutoff = time.time() - ttl_s
        for meta in self.directory.glob(".upload-*.json"):
            upload_id = meta.name[len(".upload-"):-len(".json")]
            if not _ID.fullmatch(upload_id):
                continue
            try:
                spool = self.spool_path(upload_id)
                newest = max(meta.stat().st_mtime,
                             spool.stat().st_mtime if spool.exists() else 0.0)
            except OSError:
                continue
            if newest < cutoff:
                self.remove(upload_id)

    # -- storage -----------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, upload_id: str) -> Iterator[IO[bytes]]:
        try:
            f = open(self.spool_path(upload_id), "r+b")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            raise NoSession(f"no upload {upload_id}") from None
        with f:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno in (errno.EAGAIN, errno.EACCES):
                    raise Conflict("another chunk of this upload is being written; "
                                   "ask where it stands and retry") from None
                raise
            yield f

    def _load(self, upload_id: str) -> Session:
        try:
            raw = json.loads(self._meta_path(upload_id).read_text())
        except FileNotFoundError:
            raise NoSession(f"no upload {upload_id}") from None
        return Session(**raw)

    def _save(self, s: Session) -> None:
        path = self._meta_path(s.id)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(asdict(s)))
        os.replace(tmp, path)

    def _touch(self, upload_id: str) -> None:
        with contextlib.suppress(OSError):
            os.utime(self._meta_path(upload_id))


def _same_bytes(f: IO[bytes], offset: int, length: int, stream: IO[bytes]) -> bool:
    """Whether ``stream`` holds exactly the ``length`` bytes stored at ``offset``."""
    f.seek(offset)
    left = length
    same = True
    while left > 0:
        data = stream.read(min(CHUNK, left))
        if not data:
            return False
        if same and f.read(len(data)) != data:
            same = False  # keep reading: the body must be consumed either way
        left -= len(data)
    return same
