"""Go's string literals as Go prints them (``strconv.Quote``, ``%q``), undone
exactly: ``\\xHH`` escapes of bytes that are not valid UTF-8 become lone
surrogates (Python's ``surrogateescape``), as the decoder reads trace bytes."""

from __future__ import annotations

import re

QUOTED = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3}|[abfnrtv\\'\"])")
_SIMPLE_ESCAPES = {
    "a": b"\x07",
    "b": b"\x08",
    "f": b"\x0c",
    "n": b"\n",
    "r": b"\r",
    "t": b"\t",
    "v": b"\x0b",
    "\\": b"\\",
    "'": b"'",
    '"': b'"',
}


def _enc(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


def go_unquote_bytes(lit: str) -> bytes:
    """Undo ``strconv.Quote`` (``lit`` includes the double quotes) to the
    exact bytes of the Go string."""
    if len(lit) < 2 or lit[0] != '"' or lit[-1] != '"':
        raise ValueError(f"not a Go quoted string: {lit!r}")
    body = lit[1:-1]
    if "\\" not in body:
        return _enc(body)
    out = bytearray()
    pos = 0
    for m in _ESCAPE.finditer(body):
        if m.start() != pos:
            chunk = body[pos : m.start()]
            if "\\" in chunk:
                raise ValueError(f"bad escape in Go string {lit!r}")
            out += _enc(chunk)
        esc = m.group(1)
        c = esc[0]
        if c == "x":
            out.append(int(esc[1:], 16))  # a byte, possibly not valid UTF-8 on its own
        elif c in "uU":
            out += chr(int(esc[1:], 16)).encode("utf-8", "surrogatepass")
        elif c in "01234567":
            if int(esc, 8) > 255:
                raise ValueError(f"octal escape out of range in {lit!r}")
            out.append(int(esc, 8))
        else:
            out += _SIMPLE_ESCAPES[c]
        pos = m.end()
    rest = body[pos:]
    if "\\" in rest:
        raise ValueError(f"bad escape in Go string {lit!r}")
    out += _enc(rest)
    return bytes(out)


def go_unquote(lit: str) -> str:
    """Undo ``strconv.Quote``: ``lit`` includes the surrounding quotes.
    Bytes that are not valid UTF-8 become surrogate escapes."""
    body = lit[1:-1]
    if len(lit) >= 2 and lit[0] == '"' and lit[-1] == '"' and "\\" not in body:
        return body
    return go_unquote_bytes(lit).decode("utf-8", "surrogateescape")


def go_quote(s: str) -> str:
    """``strconv.Quote`` for display (printability approximated by Python's)."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if 0xDC80 <= o <= 0xDCFF:  # an escaped invalid byte
            out.append(f"\\x{o - 0xDC00:02x}")
        elif ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch in "\a\b\f\n\r\t\v":
            out.append("\\" + "abfnrtv"["\a\b\f\n\r\t\v".index(ch)])
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


def take_quoted(s: str, pos: int) -> tuple[str, int]:
    """Parse a Go quoted string starting at ``s[pos]``; return (value, end)."""
    m = QUOTED.match(s, pos)
    if m is None:
        raise ValueError(f"expected a Go quoted string at {pos} in {s!r}")
    return go_unquote(m.group(0)), m.end()
