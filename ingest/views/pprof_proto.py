"""A :class:`ingest.views.pprof.Profile` as a pprof file: the
``perftools.profiles.Profile`` message of pprof's profile.proto, gzipped,
as ``go tool pprof`` reads it.

The message is encoded by the ``protobuf`` runtime (a well-kept library
gmpscope already installs for the Perfetto export). Its classes are made at
run time from a descriptor written below from profile.proto (the messages
and field numbers of github.com/google/pprof/proto/profile.proto), so no
generated ``_pb2`` module, tied to one protoc version, is kept in the tree.

Built as Go's ``traceviewer.BuildProfile`` builds its profile: one location
per program counter, one function per (file, name), no mappings; ``go tool
pprof`` adds its own placeholder mapping when it reads either.
"""

from __future__ import annotations

import gzip
from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from ingest.views.pprof import Profile

_T = descriptor_pb2.FieldDescriptorProto
_INT64, _UINT64, _BOOL, _STRING, _MSG = (_T.TYPE_INT64, _T.TYPE_UINT64, _T.TYPE_BOOL,
                                         _T.TYPE_STRING, _T.TYPE_MESSAGE)
_ONE, _MANY = _T.LABEL_OPTIONAL, _T.LABEL_REPEATED

#: profile.proto's messages: (field name, number, type, repeated, message type).
_MESSAGES: dict[str, tuple[tuple[str, int, int, bool, str], ...]] = {
    "Profile": (
        ("sample_type", 1, _MSG, True, "ValueType"), ("sample", 2, _MSG, True, "Sample"),
        ("mapping", 3, _MSG, True, "Mapping"), ("location", 4, _MSG, True, "Location"),
        ("function", 5, _MSG, True, "Function"), ("string_table", 6, _STRING, True, ""),
        ("drop_frames", 7, _INT64, False, ""), ("keep_frames", 8, _INT64, False, ""),
        ("time_nanos", 9, _INT64, False, ""), ("duration_nanos", 10, _INT64, False, ""),
        ("period_type", 11, _MSG, False, "ValueType"), ("period", 12, _INT64, False, ""),
        ("comment", 13, _INT64, True, ""), ("default_sample_type", 14, _INT64, False, ""),
        ("doc_url", 15, _INT64, False, ""),
    ),
    "ValueType": (("type", 1, _INT64, False, ""), ("unit", 2, _INT64, False, "")),
    "Sample": (
        ("location_id", 1, _UINT64, True, ""), ("value", 2, _INT64, True, ""),
        ("label", 3, _MSG, True, "Label"),
    ),
    "Label": (
        ("key", 1, _INT64, False, ""), ("str", 2, _INT64, False, ""),
        ("num", 3, _INT64, False, ""), ("num_unit", 4, _INT64, False, ""),
    ),
    "Mapping": (
        ("id", 1, _UINT64, False, ""), ("memory_start", 2, _UINT64, False, ""),
        ("memory_limit", 3, _UINT64, False, ""), ("file_offset", 4, _UINT64, False, ""),
        ("filename", 5, _INT64, False, ""), ("build_id", 6, _INT64, False, ""),
        ("has_functions", 7, _BOOL, False, ""), ("has_filenames", 8, _BOOL, False, ""),
        ("has_line_numbers", 9, _BOOL, False, ""), ("has_inline_frames", 10, _BOOL, False, ""),
    ),
    "Location": (
        ("id", 1, _UINT64, False, ""), ("mapping_id", 2, _UINT64, False, ""),
        ("address", 3, _UINT64, False, ""), ("line", 4, _MSG, True, "Line"),
        ("is_folded", 5, _BOOL, False, ""),
    ),
    "Line": (
        ("function_id", 1, _UINT64, False, ""), ("line", 2, _INT64, False, ""),
        ("column", 3, _INT64, False, ""),
    ),
    "Function": (
        ("id", 1, _UINT64, False, ""), ("name", 2, _INT64, False, ""),
        ("system_name", 3, _INT64, False, ""), ("filename", 4, _INT64, False, ""),
        ("start_line", 5, _INT64, False, ""),
    ),
}
_PACKAGE = "perftools.profiles"


@cache
def profile_class() -> Any:
    """The ``perftools.profiles.Profile`` message class (made once per process,
    in a descriptor pool of its own)."""
    f = descriptor_pb2.FileDescriptorProto(name="gmpscope/profile.proto", package=_PACKAGE,
                                           syntax="proto3")
    for name, fields in _MESSAGES.items():
        m = f.message_type.add(name=name)
        for fname, number, ftype, many, msg in fields:
            fd = m.field.add(name=fname, number=number, type=ftype,
                             label=_MANY if many else _ONE)
            if msg:
                fd.type_name = f".{_PACKAGE}.{msg}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.Profile"))


def to_message(prof: Profile) -> Any:
    """``prof`` as a ``perftools.profiles.Profile`` message."""
    strings: dict[str, int] = {"": 0}

    def s(text: str) -> int:
        i = strings.get(text)
        if i is None:
            i = strings[text] = len(strings)
        return i

    msg = profile_class()()
    for typ, unit in prof.sample_types:
        msg.sample_type.add(type=s(typ), unit=s(unit))
    msg.period_type.type = s(prof.period_type[0])
    msg.period_type.unit = s(prof.period_type[1])
    msg.period = prof.period
    functions: dict[tuple[str, str], int] = {}
    for i, loc in enumerate(prof.locations):
        key = (loc["file"], loc["function"])
        fid = functions.get(key)
        if fid is None:
            fid = functions[key] = len(functions) + 1
            msg.function.add(id=fid, name=s(loc["function"]), system_name=s(loc["function"]),
                             filename=s(loc["file"]))
        msg.location.add(id=i + 1, address=loc["pc"]).line.add(function_id=fid,
                                                               line=loc["line"])
    for sample in prof.samples:
        msg.sample.add(location_id=[i + 1 for i in sample["stack"]], value=sample["values"])
    msg.string_table.extend(strings)  # insertion order: the indexes given above
    return msg


def encode(prof: Profile) -> bytes:
    """``prof`` as a gzipped profile.proto file (what ``go tool pprof`` reads)."""
    return gzip.compress(to_message(prof).SerializeToString(), mtime=0)


def decode(data: bytes) -> Any:
    """A pprof file (gzipped or not) as a ``perftools.profiles.Profile`` message."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    msg = profile_class()()
    msg.ParseFromString(data)
    return msg
