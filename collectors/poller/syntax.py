"""Lexical helpers for strace's output syntax: splitting, strings, numbers, timespecs.

strace prints arguments as C-like expressions: quoted strings with C escapes,
structures in ``{}``, arrays in ``[]``, flag sets joined by ``|``, and, with
``-yy``, descriptors decorated as ``3</path>`` or ``5<TCP:[1.2.3.4:5->6.7.8.9:10]>``.
These functions are pure and total: malformed text gives ``None``, never an
exception.
"""

from __future__ import annotations

import re

_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {")", "]", "}"}


def scan_to_close(text: str) -> int:
    """Index of the first ``)`` in ``text`` not nested in brackets, strings or
    fd decorations; ``-1`` if there is none."""
    depth: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if depth and depth[-1] == "<":
            # Inside a -yy decoration: paths are unquoted; [] and <> nest
            # ("/dev/null<char 1:3>", "TCP:[1.2.3.4:5->6.7.8.9:10]").
            if c == "[":
                depth.append("[<")
            elif c == "<":
                depth.append("<")
            elif c == ">":
                depth.pop()
            i += 1
            continue
        if depth and depth[-1] == "[<":
            if c == "]":
                depth.pop()
            i += 1
            continue
        if c == '"':
            i = _skip_string(text, i)
            continue
        if c in _OPEN:
            depth.append(_OPEN[c])
        elif c in _CLOSE:
            if not depth:
                return i if c == ")" else -1
            if depth[-1] == c:
                depth.pop()
        elif c == "<" and i > 0 and text[i - 1].isdigit():
            depth.append("<")
        i += 1
    return -1


def _skip_string(text: str, i: int) -> int:
    """Index just past the string literal starting at ``text[i] == '"'``."""
    i += 1
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == '"':
            return i + 1
        i += 1
    return n


def split_args(text: str) -> list[str]:
    """Split an argument list at top-level commas; each part stripped."""
    parts: list[str] = []
    depth: list[str] = []
    start = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if depth and depth[-1] in ("<", "[<"):
            if depth[-1] == "<" and c in "[<":
                depth.append("[<" if c == "[" else "<")
            elif depth[-1] == "[<" and c == "]":
                depth.pop()
            elif depth[-1] == "<" and c == ">":
                depth.pop()
            i += 1
            continue
        if c == '"':
            i = _skip_string(text, i)
            continue
        if c in _OPEN:
            depth.append(_OPEN[c])
        elif c in _CLOSE:
            if depth and depth[-1] == c:
                depth.pop()
        elif c == "<" and i > 0 and text[i - 1].isdigit():
            depth.append("<")
        elif c == "," and not depth:
            parts.append(text[start:i].strip())
            start = i + 1
        i += 1
    last = text[start:].strip()
    if last or parts:
        parts.append(last)
    return parts


_FD = re.compile(r"^(-?\d+)(?:<(.*)>)?$", re.S)


def parse_fd(arg: str | None) -> tuple[int | None, str | None]:
    """``'3</tmp/x>'`` -> ``(3, '/tmp/x')``; ``AT_FDCWD`` and junk -> ``(None, None)``."""
    if arg is None:
        return None, None
    m = _FD.match(arg.strip())
    if not m:
        return None, None
    return int(m.group(1)), m.group(2)


def parse_int(arg: str | None) -> int | None:
    """A decimal, hex or octal integer as strace prints it (``-1``, ``0x10``, ``0644``)."""
    if arg is None:
        return None
    s = arg.strip()
    # A value with a decoration ("3</path>") or a comment ("16 /* ... */").
    for stop in ("<", " "):
        cut = s.find(stop)
        if cut > 0:
            s = s[:cut]
    try:
        if s.startswith(("0x", "-0x")):
            return int(s, 16)
        if len(s) > 1 and s.startswith("0") and s.isdigit():
            return int(s, 8)
        return int(s)
    except ValueError:
        return None


_TV = re.compile(r"tv_sec=(-?\d+).*?tv_(nsec|usec)=(-?\d+)", re.S)


def parse_timespec_ns(arg: str | None) -> int | None:
    """``{tv_sec=1, tv_nsec=5}`` or a timeval -> ns; ``NULL`` -> ``-1`` (no timeout)."""
    if arg is None:
        return None
    s = arg.strip()
    if s == "NULL":
        return -1
    m = _TV.search(s)
    if not m:
        return None
    sec, unit, frac = int(m.group(1)), m.group(2), int(m.group(3))
    return sec * 1_000_000_000 + (frac if unit == "nsec" else frac * 1000)


def parse_ms_timeout_ns(arg: str | None) -> int | None:
    """A millisecond timeout (epoll_wait, poll) -> ns; negative means forever: ``-1``."""
    ms = parse_int(arg)
    if ms is None:
        return None
    return -1 if ms < 0 else ms * 1_000_000


def struct_field(arg: str | None, name: str) -> str | None:
    """The text of ``name=...`` at the top level of a ``{...}`` structure."""
    if arg is None:
        return None
    s = arg.strip()
    if not (s.startswith("{") and s.endswith("}")):
        return None
    for part in split_args(s[1:-1]):
        key, eq, value = part.partition("=")
        if eq and key.strip() == name:
            return value.strip()
    return None


_ESCAPES = {"n": 10, "t": 9, "r": 13, "v": 11, "f": 12, "a": 7, "b": 8, "\\": 92, '"': 34}


def unquote(arg: str | None) -> str | None:
    """Decode a strace string literal (``"a\\nb"...``) to text; ``None`` if not one.

    Bytes that are not UTF-8 come back as ``\\xNN`` so the result is always
    valid text (Parquet strings must be UTF-8).
    """
    if arg is None:
        return None
    s = arg.strip()
    if not s.startswith('"'):
        return None
    end = _skip_string(s, 0)
    body = s[1 : end - 1] if end <= len(s) and s[end - 1 : end] == '"' else s[1:]
    out = bytearray()
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c != "\\" or i + 1 >= n:
            out += c.encode()
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt == "x" and i + 3 < n + 1 and _is_hex(body[i + 2 : i + 4]):
            out.append(int(body[i + 2 : i + 4], 16))
            i += 4
        elif nxt in "01234567":
            j = i + 1
            while j < n and j < i + 4 and body[j] in "01234567":
                j += 1
            out.append(int(body[i + 1 : j], 8) & 0xFF)
            i = j
        else:
            out += nxt.encode()
            i += 2
    return out.decode("utf-8", errors="backslashreplace")


def _is_hex(s: str) -> bool:
    return len(s) == 2 and all(c in "0123456789abcdefABCDEF" for c in s)


def parse_decimal_ns(sec: str, frac: str) -> int:
    """``'1796224642', '302991603'`` -> ns, whatever the precision of ``frac``."""
    frac = (frac + "000000000")[:9]
    return int(sec) * 1_000_000_000 + int(frac)
