"""Upload plumbing for the HTTP API: bodies streamed to disk, archives unpacked safely.

Nothing here holds a whole upload in memory: bodies are copied to a temporary file in
chunks while the bytes are counted against the size limit, and archives are extracted
member by member with every path, type, count and byte checked as it is written.
This module knows nothing about Flask or the database.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.sansio.multipart import Data, Epilogue, Field, File, MultipartDecoder, NeedData

CHUNK = 1 << 20
#: The multipart form field that carries the file.
FILE_FIELD = "file"
#: Small text fields (e.g. ``name``) are kept in memory up to this size each.
MAX_FIELD_BYTES = 4096
MAX_FORM_PARTS = 16
DECODER_SLICE = 64 << 10

#: Archive limits: a decoded Parquet directory is a handful of files.
MAX_MEMBERS = 256
#: Extracted bytes may exceed the archive size this many times (Parquet is already
#: compressed, so honest archives stay far below this); past it we call it a bomb.
MAX_EXPANSION = 20


class UploadError(Exception):
    """An upload we refuse; ``status`` is the HTTP status to answer with."""

    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TooLarge(UploadError):
    status = 413


class BadUpload(UploadError):
    status = 400


def _limit_message(limit: int) -> str:
    return f"upload larger than the limit of {limit:,} bytes"


def check_declared_length(content_length: int | None, limit: int) -> None:
    """Refuse up front when the declared Content-Length is over the limit."""
    if content_length is not None and content_length > limit:
        raise TooLarge(_limit_message(limit))


@contextmanager
def temp_path(directory: Path, suffix: str = "") -> Iterator[Path]:
    """A fresh temporary file path in ``directory``, removed on exit."""
    directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".upload-", suffix=suffix, dir=directory)
    os.close(fd)
    path = Path(name)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


@contextmanager
def temp_dir(directory: Path) -> Iterator[Path]:
    """A fresh temporary directory under ``directory``, removed with its contents."""
    directory.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=".extract-", dir=directory))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class _Counter:
    """Writes chunks to a file, refusing to go past ``limit`` bytes in total,
    and hashes them on the way (so the file need not be read again for it)."""

    def __init__(self, out: IO[bytes], limit: int) -> None:
        self.out = out
        self.limit = limit
        self.n = 0
        self.hash = hashlib.sha256()

    def write(self, data: bytes) -> None:
        self.n += len(data)
        if self.n > self.limit:
            raise TooLarge(_limit_message(self.limit))
        self.hash.update(data)
        self.out.write(data)


@dataclass
class Spooled:
    """An upload on disk."""

    size: int
    sha256: str  # of the file's bytes


def _chunks(read: Callable[[int], bytes]) -> Iterator[bytes]:
    while True:
        data = read(CHUNK)
        if not data:
            return
        yield data


def spool_raw(stream: IO[bytes], dest: Path, limit: int) -> Spooled:
    """Copy a raw request body to ``dest`` in chunks."""
    with open(dest, "wb") as out:
        counter = _Counter(out, limit)
        for data in _chunks(stream.read):
            counter.write(data)
    return Spooled(counter.n, counter.hash.hexdigest())


@dataclass
class SpooledForm(Spooled):
    """A multipart body whose file went to disk (``size``, ``sha256``: the file's)."""

    filename: str  # as the client named it ("" if it did not)
    fields: dict[str, str]  # the small text fields


def spool_multipart(stream: IO[bytes], boundary: bytes, dest: Path, limit: int) -> SpooledForm:
    """Stream the multipart field ``file`` of a form body to ``dest``.

    Other file fields are read and dropped (their bytes still count against the
    limit); text fields are kept, each up to ``MAX_FIELD_BYTES``.
    """
    # The decoder refuses to buffer more than max_form_memory_size bytes at a
    # time, whatever the part: feed it slices well below that and drain its
    # events after each one. Text fields are bounded separately below.
    decoder = MultipartDecoder(boundary, max_form_memory_size=4 * DECODER_SLICE,
                               max_parts=MAX_FORM_PARTS)
    fields: dict[str, str] = {}
    seen_file = False
    filename = ""
    total = 0
    with open(dest, "wb") as out:
        counter = _Counter(out, limit)
        # What the Data events of the current part feed: the file, a small
        # text field, or nothing (a second file field).
        part = "none"
        field_name = ""
        field_buf = bytearray()
        finished = False
        for data in _chunks(stream.read):
            total += len(data)
            # The whole body counts, so that a form padded with junk fields
            # cannot get around the limit.
            if total > limit:
                raise TooLarge(_limit_message(limit))
            view = memoryview(data)
            try:
                for start in range(0, len(data), DECODER_SLICE):
                    decoder.receive_data(bytes(view[start:start + DECODER_SLICE]))
                    event = decoder.next_event()
                    while not isinstance(event, NeedData | Epilogue):
                        if isinstance(event, File):
                            part = ("file" if event.name == FILE_FIELD and not seen_file
                                    else "none")
                            if part == "file":
                                seen_file = True
                                filename = event.filename or ""
                        elif isinstance(event, Field):
                            part = "field"
                            field_name = event.name
                            field_buf = bytearray()
                        elif isinstance(event, Data):
                            if part == "file":
                                counter.write(event.data)
                            elif part == "field":
                                field_buf += event.data
                                if len(field_buf) > MAX_FIELD_BYTES:
                                    raise TooLarge(f"multipart text field {field_name!r} is "
                                                   f"over {MAX_FIELD_BYTES} bytes")
                                if not event.more_data:
                                    fields[field_name] = field_buf.decode("utf-8", "replace")
                        event = decoder.next_event()
                    if isinstance(event, Epilogue):
                        finished = True
            except ValueError as e:
                raise BadUpload(f"malformed multipart body: {e}") from None
            except RequestEntityTooLarge:
                raise TooLarge(f"multipart form has more than {MAX_FORM_PARTS} parts") from None
        if not finished:
            try:
                decoder.receive_data(None)
                event = decoder.next_event()
            except ValueError as e:
                raise BadUpload(f"malformed multipart body: {e}") from None
            if not isinstance(event, Epilogue):
                raise BadUpload("malformed multipart body: it ends before its closing boundary")
    if not seen_file:
        raise BadUpload(f"multipart body has no file field named {FILE_FIELD!r}")
    return SpooledForm(counter.n, counter.hash.hexdigest(), filename, fields)


# --------------------------------------------------------------------------
# archives


def _safe_member_path(name: str, root: Path) -> Path | None:
    """Where a member goes under ``root``, or None for a member to skip (``./``).

    Refuses absolute paths, drive letters, backslashes and ``..`` anywhere.
    """
    if "\\" in name or "\x00" in name:
        raise BadUpload(f"archive member has a bad name: {name!r}")
    p = PurePosixPath(name)
    if p.is_absolute() or (p.parts and ":" in p.parts[0]):
        raise BadUpload(f"archive member has an absolute path: {name!r}")
    parts = [part for part in p.parts if part not in ("", ".")]
    if any(part == ".." for part in parts):
        raise BadUpload(f"archive member escapes the archive: {name!r}")
    if not parts:
        return None
    return root.joinpath(*parts)


class _Budget:
    """Bytes and members an extraction may still use."""

    def __init__(self, max_bytes: int, max_members: int) -> None:
        self.bytes_left = max_bytes
        self.max_bytes = max_bytes
        self.members_left = max_members
        self.max_members = max_members

    def member(self) -> None:
        self.members_left -= 1
        if self.members_left < 0:
            raise BadUpload(f"archive has more than {self.max_members} members")

    def copy(self, src: IO[bytes], dest: Path) -> None:
        # Count what is actually written: header sizes can lie.
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(dest, "xb") as out:
            for data in _chunks(src.read):
                self.bytes_left -= len(data)
                if self.bytes_left < 0:
                    raise TooLarge(
                        f"archive expands past {self.max_bytes:,} bytes (a compression bomb?)"
                    )
                out.write(data)


def extract_archive(archive: Path, dest: Path, max_bytes: int,
                    max_members: int = MAX_MEMBERS) -> None:
    """Extract a zip, tar, tar.gz/bz2/xz into ``dest`` (an empty directory).

    Only regular files and directories are accepted: links, devices and FIFOs are
    refused, as are paths that leave ``dest``, more than ``max_members`` members,
    a member written twice, and more than ``max_bytes`` bytes written in total.
    """
    budget = _Budget(max_bytes, max_members)
    try:
        if zipfile.is_zipfile(archive):
            _extract_zip(archive, dest, budget)
            return
        if tarfile.is_tarfile(archive):
            _extract_tar(archive, dest, budget)
            return
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, ValueError,
            NotImplementedError, RuntimeError) as e:
        # zlib/lzma/bz2 errors, CRC mismatches, encrypted zips, duplicate names.
        if isinstance(e, FileExistsError):
            raise BadUpload("archive has the same member twice") from None
        raise BadUpload(f"unreadable archive: {type(e).__name__}: {e}") from None
    raise BadUpload("not a zip or tar archive")


def _extract_zip(archive: Path, dest: Path, budget: _Budget) -> None:
    with zipfile.ZipFile(archive) as zf:
        if len(zf.infolist()) > budget.max_members:
            raise BadUpload(f"archive has more than {budget.max_members} members")
        for info in zf.infolist():
            budget.member()
            target = _safe_member_path(info.filename, dest)
            # Unix zips keep st_mode in the high bits; many writers set only the
            # permission bits there (no file type), which means a regular file.
            kind = stat.S_IFMT(info.external_attr >> 16)
            if kind == stat.S_IFLNK:
                raise BadUpload(f"archive member is a symbolic link: {info.filename!r}")
            if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
                raise BadUpload(f"archive member is not a regular file: {info.filename!r}")
            if target is None:
                continue
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            with zf.open(info) as src:
                budget.copy(src, target)


def _extract_tar(archive: Path, dest: Path, budget: _Budget) -> None:
    # Streaming mode ("r|*") reads members in order and never seeks, so a tar
    # with a huge index cannot make us build it in memory first.
    with tarfile.open(archive, mode="r|*") as tf:
        for info in tf:
            budget.member()
            target = _safe_member_path(info.name, dest)
            if info.issym() or info.islnk():
                raise BadUpload(f"archive member is a link: {info.name!r}")
            if not (info.isfile() or info.isdir()):
                raise BadUpload(f"archive member is not a regular file: {info.name!r}")
            if target is None:
                continue
            if info.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            src = tf.extractfile(info)
            if src is None:  # pragma: no cover - isfile() members always have data
                raise BadUpload(f"archive member has no data: {info.name!r}")
            with src:
                budget.copy(src, target)


def find_decoded_dir(root: Path, marker: str = "meta.json") -> Path:
    """The directory of an extracted archive that holds a decoded trace.

    Archives made with ``tar czf x.tgz out/`` put everything under one folder,
    ``cd out && zip -r ../x.zip .`` puts it at the top: accept both.
    """
    if (root / marker).is_file():
        return root
    found = [p.parent for p in root.rglob(marker) if p.is_file()]
    if len(found) == 1:
        return found[0]
    if not found:
        raise BadUpload(f"archive has no {marker}: not a decoded trace directory "
                        "(what `gmpscope decode -o DIR` writes)")
    raise BadUpload(f"archive has {len(found)} decoded directories; send one per upload")
