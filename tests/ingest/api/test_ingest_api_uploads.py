"""ingest.api.uploads: bodies streamed to disk under a limit, archives extracted safely."""

from __future__ import annotations

import hashlib
import io
import stat
import tarfile
import zipfile
from pathlib import Path
from typing import IO, cast

import pytest

from ingest.api import uploads
from ingest.api.uploads import BadUpload, TooLarge


class Trickle(io.RawIOBase):
    """A stream that hands out at most ``step`` bytes per read, like a slow socket."""

    def __init__(self, data: bytes, step: int) -> None:
        self.buf = io.BytesIO(data)
        self.step = step

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        return self.buf.read(self.step if n < 0 else min(n, self.step))


def multipart(parts: list[tuple[str, str | None, bytes]], boundary: str = "XyZzy42") -> bytes:
    out = io.BytesIO()
    for name, filename, data in parts:
        out.write(f"--{boundary}\r\n".encode())
        disp = f'form-data; name="{name}"'
        if filename is not None:
            disp += f'; filename="{filename}"'
        out.write(f"Content-Disposition: {disp}\r\n".encode())
        if filename is not None:
            out.write(b"Content-Type: application/octet-stream\r\n")
        out.write(b"\r\n" + data + b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue()


# --------------------------------------------------------------------------
# bodies


def test_spool_raw_copies_in_chunks(tmp_path: Path) -> None:
    data = bytes(range(256)) * 9000  # > 2 chunks
    got = uploads.spool_raw(cast(IO[bytes], Trickle(data, 70001)), tmp_path / "f", limit=len(data))
    assert got.size == len(data)
    assert got.sha256 == hashlib.sha256(data).hexdigest()
    assert (tmp_path / "f").read_bytes() == data


def test_spool_raw_over_limit(tmp_path: Path) -> None:
    with pytest.raises(TooLarge):
        uploads.spool_raw(io.BytesIO(b"x" * 101), tmp_path / "f", limit=100)


def test_declared_length_over_limit() -> None:
    uploads.check_declared_length(None, 10)
    uploads.check_declared_length(10, 10)
    with pytest.raises(TooLarge):
        uploads.check_declared_length(11, 10)


@pytest.mark.parametrize("step", [1, 7, 4096, 1 << 20])
def test_spool_multipart_file_and_fields(tmp_path: Path, step: int) -> None:
    payload = b"go 1.22 trace\r\n--XyZzy4 not a boundary\r\n" + bytes(range(256)) * 40
    body = multipart([("name", None, b"my run"), ("file", "app.trace", payload),
                      ("other", "junk.bin", b"ignored")])
    form = uploads.spool_multipart(cast(IO[bytes], Trickle(body, step)), b"XyZzy42", tmp_path / "f",
                                   limit=len(body))
    assert (tmp_path / "f").read_bytes() == payload
    assert form.size == len(payload)
    assert form.sha256 == hashlib.sha256(payload).hexdigest()
    assert form.filename == "app.trace"
    assert form.fields == {"name": "my run"}


def test_spool_multipart_limit_counts_the_whole_body(tmp_path: Path) -> None:
    body = multipart([("pad", "a", b"p" * 5000), ("file", "t", b"small")])
    with pytest.raises(TooLarge):
        uploads.spool_multipart(io.BytesIO(body), b"XyZzy42", tmp_path / "f", limit=1000)


def test_spool_multipart_truncated(tmp_path: Path) -> None:
    body = multipart([("file", "t", b"0123456789" * 100)])
    with pytest.raises(BadUpload, match="malformed multipart"):
        uploads.spool_multipart(io.BytesIO(body[:-40]), b"XyZzy42", tmp_path / "f",
                                limit=1 << 20)


def test_spool_multipart_without_file_field(tmp_path: Path) -> None:
    body = multipart([("name", None, b"x"), ("upload", "t", b"data")])
    with pytest.raises(BadUpload, match="no file field"):
        uploads.spool_multipart(io.BytesIO(body), b"XyZzy42", tmp_path / "f", limit=1 << 20)


def test_spool_multipart_garbage(tmp_path: Path) -> None:
    with pytest.raises(BadUpload):
        uploads.spool_multipart(io.BytesIO(b"\x00" * 3000), b"XyZzy42", tmp_path / "f",
                                limit=1 << 20)


# --------------------------------------------------------------------------
# archives


def make_tar(path: Path, members: list[tarfile.TarInfo], data: dict[str, bytes],
             mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as tf:  # type: ignore[call-overload]
        for info in members:
            payload = data.get(info.name)
            if payload is not None:
                info.size = len(payload)
                tf.addfile(info, io.BytesIO(payload))
            else:
                tf.addfile(info)
    return path


def reg(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.REGTYPE
    return info


def test_tar_gz_with_top_folder(tmp_path: Path) -> None:
    d = tarfile.TarInfo("out")
    d.type = tarfile.DIRTYPE
    arc = make_tar(tmp_path / "a.tgz", [d, reg("out/meta.json"), reg("out/x.parquet")],
                   {"out/meta.json": b"{}", "out/x.parquet": b"PAR1"})
    dest = tmp_path / "x"
    dest.mkdir()
    uploads.extract_archive(arc, dest, max_bytes=1000)
    assert uploads.find_decoded_dir(dest) == dest / "out"
    assert (dest / "out" / "x.parquet").read_bytes() == b"PAR1"


def test_zip_at_top_level(tmp_path: Path) -> None:
    arc = tmp_path / "a.zip"
    with zipfile.ZipFile(arc, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("./meta.json", b"{}")
        zf.writestr("stacks.parquet", b"PAR1")
    dest = tmp_path / "x"
    dest.mkdir()
    uploads.extract_archive(arc, dest, max_bytes=1000)
    assert uploads.find_decoded_dir(dest) == dest


@pytest.mark.parametrize("name", ["../evil", "a/../../evil", "/etc/evil", "a\\..\\evil",
                                  "C:/evil"])
def test_traversal_refused(tmp_path: Path, name: str) -> None:
    for kind in ("zip", "tar"):
        dest = tmp_path / f"x-{kind}"
        dest.mkdir()
        if kind == "zip":
            arc = tmp_path / "a.zip"
            with zipfile.ZipFile(arc, "w") as zf:
                zf.writestr(name, b"evil")
        else:
            arc = make_tar(tmp_path / "a.tar", [reg(name)], {name: b"evil"}, mode="w")
        with pytest.raises(BadUpload):
            uploads.extract_archive(arc, dest, max_bytes=1000)
        assert not (tmp_path / "evil").exists()


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE,
                                  tarfile.FIFOTYPE])
def test_tar_links_and_devices_refused(tmp_path: Path, kind: bytes) -> None:
    info = tarfile.TarInfo("meta.json")
    info.type = kind
    info.linkname = "/etc/passwd"
    arc = make_tar(tmp_path / "a.tar", [info], {}, mode="w")
    dest = tmp_path / "x"
    dest.mkdir()
    with pytest.raises(BadUpload):
        uploads.extract_archive(arc, dest, max_bytes=1000)
    assert list(dest.iterdir()) == []


def test_zip_symlink_refused(tmp_path: Path) -> None:
    arc = tmp_path / "a.zip"
    with zipfile.ZipFile(arc, "w") as zf:
        info = zipfile.ZipInfo("meta.json")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, b"/etc/passwd")
    dest = tmp_path / "x"
    dest.mkdir()
    with pytest.raises(BadUpload, match="symbolic link"):
        uploads.extract_archive(arc, dest, max_bytes=1000)


def test_zip_bomb_stopped_by_bytes_written(tmp_path: Path) -> None:
    arc = tmp_path / "bomb.zip"
    with zipfile.ZipFile(arc, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("meta.json", b"\0" * (8 << 20))
    assert arc.stat().st_size < 100_000
    dest = tmp_path / "x"
    dest.mkdir()
    with pytest.raises(TooLarge):
        uploads.extract_archive(arc, dest, max_bytes=1 << 20)
    assert sum(p.stat().st_size for p in dest.rglob("*") if p.is_file()) <= 1 << 20


def test_tar_header_size_lies_do_not_matter(tmp_path: Path) -> None:
    # Many members, each small, adding up past the budget.
    names = [f"f{i}" for i in range(50)]
    arc = make_tar(tmp_path / "a.tgz", [reg(n) for n in names], {n: b"y" * 1000 for n in names})
    dest = tmp_path / "x"
    dest.mkdir()
    with pytest.raises(TooLarge):
        uploads.extract_archive(arc, dest, max_bytes=10_000)


def test_too_many_members(tmp_path: Path) -> None:
    arc = tmp_path / "a.zip"
    with zipfile.ZipFile(arc, "w") as zf:
        for i in range(20):
            zf.writestr(f"f{i}", b"")
    dest = tmp_path / "x"
    dest.mkdir()
    with pytest.raises(BadUpload, match="more than 10 members"):
        uploads.extract_archive(arc, dest, max_bytes=1000, max_members=10)


def test_duplicate_member_refused(tmp_path: Path) -> None:
    arc = make_tar(tmp_path / "a.tar", [reg("meta.json"), reg("meta.json")],
                   {"meta.json": b"{}"}, mode="w")
    dest = tmp_path / "x"
    dest.mkdir()
    with pytest.raises(BadUpload, match="twice"):
        uploads.extract_archive(arc, dest, max_bytes=1000)


@pytest.mark.parametrize("data", [b"", b"PK\x03\x04garbage", b"\x1f\x8b\x08\x00" + b"\0" * 100,
                                  b"go 1.22 trace\x00\x00\x00"])
def test_not_an_archive(tmp_path: Path, data: bytes) -> None:
    arc = tmp_path / "a.bin"
    arc.write_bytes(data)
    dest = tmp_path / "x"
    dest.mkdir()
    with pytest.raises(BadUpload):
        uploads.extract_archive(arc, dest, max_bytes=1000)


def test_no_or_two_decoded_dirs(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with pytest.raises(BadUpload, match="no meta.json"):
        uploads.find_decoded_dir(tmp_path)
    (tmp_path / "a" / "meta.json").write_text("{}")
    assert uploads.find_decoded_dir(tmp_path) == tmp_path / "a"
    (tmp_path / "b" / "meta.json").write_text("{}")
    with pytest.raises(BadUpload, match="2 decoded"):
        uploads.find_decoded_dir(tmp_path)
