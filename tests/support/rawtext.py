"""Go's raw text trace form -> the binary wire format (new family, Go 1.22+).

Go's golden tests (``internal/trace/testdata/tests/*.test``) are txtar files
with an ``expect`` section and a ``trace`` section written in the text form
that ``internal/trace/raw`` reads (see its ``doc.go``). Each text event maps
one to one onto a wire event: the event type byte, each argument as an
unsigned LEB128 varint, for stack events the frames' four varints each, and
for data events the data length as a varint followed by the bytes. The file
starts with the 16-byte header ``go 1.N trace\\0\\0\\0``. Batch sizes are taken
from the text as written (the tests state them explicitly), so the output is
what Go's own test harness feeds to its parser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .gostrings import go_unquote_bytes


@dataclass(frozen=True)
class Spec:
    """The shape of one wire event type."""

    name: str
    args: tuple[str, ...] = ()
    is_stack: bool = False  # args are followed by nframes groups of (pc, func, file, line)
    has_data: bool = False  # args are followed by a length-prefixed byte string


def _s(name: str, args: str = "", *, stack: bool = False, data: bool = False) -> Spec:
    return Spec(name, tuple(args.split()), stack, data)


# Event types of the new family, by wire number (tracev2/events.go).
_BASE: tuple[Spec, ...] = (
    _s(""),  # 0: none
    _s("EventBatch", "gen m time size"),
    _s("Stacks"),
    _s("Stack", "id nframes", stack=True),
    _s("Strings"),
    _s("String", "id", data=True),  # 5
    _s("CPUSamples"),
    _s("CPUSample", "time m p g stack"),
    _s("Frequency", "freq"),
    _s("ProcsChange", "dt procs_value stack"),
    _s("ProcStart", "dt p p_seq"),  # 10
    _s("ProcStop", "dt"),
    _s("ProcSteal", "dt p p_seq m"),
    _s("ProcStatus", "dt p pstatus"),
    _s("GoCreate", "dt new_g new_stack stack"),
    _s("GoCreateSyscall", "dt new_g"),  # 15
    _s("GoStart", "dt g g_seq"),
    _s("GoDestroy", "dt"),
    _s("GoDestroySyscall", "dt"),
    _s("GoStop", "dt reason_string stack"),
    _s("GoBlock", "dt reason_string stack"),  # 20
    _s("GoUnblock", "dt g g_seq stack"),
    _s("GoSyscallBegin", "dt p_seq stack"),
    _s("GoSyscallEnd", "dt"),
    _s("GoSyscallEndBlocked", "dt"),
    _s("GoStatus", "dt g m gstatus"),  # 25
    _s("STWBegin", "dt kind_string stack"),
    _s("STWEnd", "dt"),
    _s("GCActive", "dt gc_seq"),
    _s("GCBegin", "dt gc_seq stack"),
    _s("GCEnd", "dt gc_seq"),  # 30
    _s("GCSweepActive", "dt p"),
    _s("GCSweepBegin", "dt stack"),
    _s("GCSweepEnd", "dt swept_value reclaimed_value"),
    _s("GCMarkAssistActive", "dt g"),
    _s("GCMarkAssistBegin", "dt stack"),  # 35
    _s("GCMarkAssistEnd", "dt"),
    _s("HeapAlloc", "dt heapalloc_value"),
    _s("HeapGoal", "dt heapgoal_value"),
    _s("GoLabel", "dt label_string"),
    _s("UserTaskBegin", "dt task parent_task name_string stack"),  # 40
    _s("UserTaskEnd", "dt task stack"),
    _s("UserRegionBegin", "dt task name_string stack"),
    _s("UserRegionEnd", "dt task name_string stack"),
    _s("UserLog", "dt task key_string value_string stack"),  # 44: last of Go 1.22
    _s("GoSwitch", "dt g g_seq"),  # 45
    _s("GoSwitchDestroy", "dt g g_seq"),
    _s("GoCreateBlocked", "dt new_g new_stack stack"),
    _s("GoStatusStack", "dt g m gstatus stack"),
    _s("ExperimentalBatch", "exp gen m time", data=True),  # 49: last of Go 1.23
    _s("Sync"),  # 50
    _s("ClockSnapshot", "dt mono sec nsec"),  # 51: last of Go 1.25
    _s("EndOfGeneration"),  # 52
)
_EXPERIMENTAL_FIRST = 128
_EXPERIMENTAL: tuple[Spec, ...] = (
    _s("Span", "dt id npages_value kindclass"),  # 128
    _s("SpanAlloc", "dt id npages_value kindclass"),
    _s("SpanFree", "dt id"),
    _s("HeapObject", "dt id type"),
    _s("HeapObjectAlloc", "dt id type"),
    _s("HeapObjectFree", "dt id"),
    _s("GoroutineStack", "dt id order"),
    _s("GoroutineStackAlloc", "dt id order"),
    _s("GoroutineStackFree", "dt id"),  # 136
)

# How many base types each on-disk version knows (Go's version.Specs()).
_VERSION_BASE = {22: 45, 23: 50, 25: 52, 26: len(_BASE)}


def specs_for(version: int) -> dict[str, tuple[int, Spec]]:
    """Event name -> (wire type, spec) for on-disk version ``1.<version>``."""
    n = _VERSION_BASE.get(version)
    if n is None:
        raise ValueError(f"unknown or unsupported Go version 1.{version}")
    table = {sp.name: (i, sp) for i, sp in enumerate(_BASE[:n]) if sp.name}
    if version >= 26:
        for j, sp in enumerate(_EXPERIMENTAL):
            table[sp.name] = (_EXPERIMENTAL_FIRST + j, sp)
    return table


def uvarint(v: int) -> bytes:
    """Unsigned LEB128, as Go's ``binary.AppendUvarint``."""
    if v < 0 or v >= 1 << 64:
        raise ValueError(f"varint out of range: {v}")
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


# --------------------------------------------------------------------------
# Text reading (whitespace as Go's unicode.IsSpace; '#' starts a comment)

_GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_TOKEN = re.compile(f"[^{re.escape(_GO_SPACE)}#]+")
_SPACE = re.compile(f"[{re.escape(_GO_SPACE)}]*")


def _tokens(line: str) -> list[str]:
    """Whitespace-separated tokens; a comment ('#') anywhere ends the list
    but, as in Go, only a line that starts with one is a pure comment."""
    toks: list[str] = []
    pos = _SPACE.match(line).end()  # type: ignore[union-attr]
    while pos < len(line):
        if line[pos] == "#":
            if toks:
                raise ValueError(f"unexpected non-space at the end of an event: {line[pos:]!r}")
            break
        m = _TOKEN.match(line, pos)
        assert m is not None
        toks.append(m.group(0))
        pos = _SPACE.match(line, m.end()).end()  # type: ignore[union-attr]
    return toks


def _args(toks: list[str], names: tuple[str, ...], line: str) -> list[int]:
    if len(toks) < len(names):
        raise ValueError(f"no argument for {names[len(toks)]!r} in {line!r}")
    if len(toks) > len(names):
        raise ValueError(f"unexpected non-space at the end of an event: {line!r}")
    out = []
    for tok, name in zip(toks, names, strict=True):
        arg, eq, val = tok.partition("=")
        if not eq:
            raise ValueError(f"malformed argument: {tok!r}")
        if arg != name:
            raise ValueError(f"expected argument {name!r}, but got {arg!r}")
        if not val.isascii() or not val.isdigit() or int(val) >= 1 << 64:
            raise ValueError(f"failed to parse argument value {val!r} for arg {arg!r}")
        out.append(int(val))
    return out


def _data(line: str) -> bytes:
    key, eq, val = line.partition("=")
    if not eq or key.strip(_GO_SPACE) != "data":
        raise ValueError(f"malformed data: {line!r}")
    val = val.strip(_GO_SPACE)
    if len(val) >= 2 and val[0] == val[-1] == "`":
        return val[1:-1].replace("\r", "").encode("utf-8", "surrogateescape")
    return go_unquote_bytes(val)


def text_to_binary(text: str) -> tuple[int, bytes]:
    """Convert a whole raw text trace to wire bytes; returns (version, bytes).

    Raises ValueError for malformed text.
    """
    # Go reads lines with bufio.Scanner: split at "\n", one trailing "\r" dropped.
    lines = iter(ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n"))

    def next_raw() -> str | None:
        """The next line that is neither blank nor a comment."""
        for ln in lines:
            rest = ln[_SPACE.match(ln).end() :]  # type: ignore[union-attr]
            if rest and rest[0] != "#":
                return ln
        return None

    def next_line() -> tuple[str, list[str]] | None:
        ln = next_raw()
        return None if ln is None else (ln, _tokens(ln))

    first = next_line()
    if first is None or first[1][0] != "Trace":
        raise ValueError("failed to parse header")
    toks = first[1]
    if len(toks) < 2 or not toks[1].startswith("Go1.") or not toks[1][4:].isdigit():
        raise ValueError("failed to parse header Go version")
    if len(toks) > 2:
        raise ValueError(f"unexpected non-space at the end of the header: {first[0]!r}")
    version = int(toks[1][4:])
    table = specs_for(version)
    out = bytearray(b"go 1.%d trace\x00\x00\x00" % version)
    while (item := next_line()) is not None:
        ln, toks = item
        hit = table.get(toks[0])
        if hit is None:
            raise ValueError(f"unidentified event: {toks[0]}")
        typ, spec = hit
        args = _args(toks[1:], spec.args, ln)
        out.append(typ)
        for a in args:
            out += uvarint(a)
        if spec.is_stack:
            for _ in range(args[1]):
                fr = next_line()
                if fr is None:
                    raise ValueError(f"unexpected EOF while reading stack: args={args}")
                for a in _args(fr[1], ("pc", "func", "file", "line"), fr[0]):
                    out += uvarint(a)
        if spec.has_data:
            dl = next_raw()
            if dl is None:
                raise ValueError(f"unexpected EOF while reading data for {spec.name}: args={args}")
            data = _data(dl)
            out += uvarint(len(data))
            out += data
    return version, bytes(out)


# --------------------------------------------------------------------------
# Golden test files


def parse_txtar(text: str) -> list[tuple[str, str]]:
    """The files of a txtar archive, in order: (name, content)."""
    files: list[tuple[str, str]] = []
    marker = re.compile(r"^-- (.+?) --$")
    name: str | None = None
    buf: list[str] = []
    for ln in text.splitlines(keepends=True):
        m = marker.match(ln.rstrip("\n").rstrip("\r") if ln.endswith("\n") else ln)
        if m is not None:
            if name is not None:
                files.append((name, "".join(buf)))
            name, buf = m.group(1).strip(), []
        elif name is not None:
            buf.append(ln)
    if name is not None:
        files.append((name, "".join(buf)))
    return files


@dataclass(frozen=True)
class GoldenTest:
    """One ``.test`` file: what Go expects, and the trace as wire bytes."""

    name: str
    success: bool
    error_regexp: str | None  # a Go regexp the error must match (FAILURE only)
    version: int
    data: bytes


def load_golden(path: str | Path) -> GoldenTest:
    """Read and convert a golden ``.test`` file."""
    p = Path(path)
    files = parse_txtar(p.read_text(encoding="utf-8", errors="surrogateescape"))
    if [n for n, _ in files] != ["expect", "trace"]:
        raise ValueError(f"malformed test {p.name}: files {[n for n, _ in files]}")
    head = files[0][1].split("\n", 1)[0]
    word, _, rest = head.partition(" ")
    if word == "SUCCESS":
        success, pattern = True, None
    elif word == "FAILURE":
        success = False
        pattern = go_unquote_bytes(rest).decode("utf-8", "surrogateescape")
    else:
        raise ValueError(f"bad header line: {head!r}")
    version, data = text_to_binary(files[1][1])
    return GoldenTest(p.name, success, pattern, version, data)


def go_regexp_search(pattern: str, text: str) -> bool:
    """``regexp.MatchString`` for the simple patterns the golden tests use
    (RE2 syntax is a subset of Python's for those)."""
    return re.search(pattern, text) is not None


def canonical_lines(text: str) -> list[tuple[str, ...] | bytes]:
    """Text trace lines in a comparable form: each event or frame line as its
    tuple of tokens, each data line as its bytes; blank and comment lines and
    the ``Trace`` header dropped. Go's ``go tool trace -d=wire`` prints a
    wire trace in this same text form, which lets a test check a conversion
    without our decoder."""
    out: list[tuple[str, ...] | bytes] = []
    for ln in text.split("\n"):
        ln = ln[:-1] if ln.endswith("\r") else ln
        rest = ln[_SPACE.match(ln).end() :]  # type: ignore[union-attr]
        if not rest or rest[0] == "#":
            continue
        if rest.startswith("data=") or rest.startswith("data "):
            out.append(_data(ln))
            continue
        toks = tuple(_tokens(ln))
        if toks[0] != "Trace":
            out.append(toks)
    return out
