"""Decode the arguments that matter of each covered system call into a Row.

Argument positions follow the kernel's signatures as strace prints them
(see syscalls(2) and strace's own decoders). A syscall outside the covered
list keeps only its raw ``args`` text; an argument strace did not print
(a truncated line) leaves its column ``None``.
"""

from __future__ import annotations

from collections.abc import Callable

from collectors.poller.records import Row
from collectors.poller.syntax import (
    parse_fd,
    parse_int,
    parse_ms_timeout_ns,
    parse_timespec_ns,
    struct_field,
    unquote,
)


def _at(args: list[str], i: int) -> str | None:
    return args[i] if i < len(args) else None


def _set_fd(row: Row, arg: str | None) -> None:
    row.fd, row.fd_path = parse_fd(arg)


def _new_fd(row: Row, ret_decor: str | None) -> None:
    if row.result is not None and row.result >= 0:
        row.new_fd = row.result
        row.new_fd_path = ret_decor


def _epoll_create1(row: Row, a: list[str], ret_decor: str | None) -> None:
    row.flags = _at(a, 0)
    _new_fd(row, ret_decor)


def _epoll_ctl(row: Row, a: list[str], ret_decor: str | None) -> None:
    row.epfd = parse_fd(_at(a, 0))[0]
    row.op = _at(a, 1)
    _set_fd(row, _at(a, 2))
    row.events = struct_field(_at(a, 3), "events")


def _epoll_wait(row: Row, a: list[str], ret_decor: str | None) -> None:
    # epoll_wait(epfd, events, maxevents, timeout_ms[, sigmask, sigsetsize])
    row.epfd, row.fd_path = parse_fd(_at(a, 0))
    row.fd = row.epfd
    row.maxevents = parse_int(_at(a, 2))
    row.timeout_ns = parse_ms_timeout_ns(_at(a, 3))


def _epoll_pwait2(row: Row, a: list[str], ret_decor: str | None) -> None:
    _epoll_wait(row, a, ret_decor)
    row.timeout_ns = parse_timespec_ns(_at(a, 3))


def _poll(row: Row, a: list[str], ret_decor: str | None) -> None:
    row.maxevents = parse_int(_at(a, 1))
    row.timeout_ns = parse_ms_timeout_ns(_at(a, 2))


def _ppoll(row: Row, a: list[str], ret_decor: str | None) -> None:
    row.maxevents = parse_int(_at(a, 1))
    row.timeout_ns = parse_timespec_ns(_at(a, 2))


def _select(row: Row, a: list[str], ret_decor: str | None) -> None:
    # select(nfds, r, w, e, timeval); pselect6(nfds, r, w, e, timespec, sigmask)
    row.maxevents = parse_int(_at(a, 0))
    row.timeout_ns = parse_timespec_ns(_at(a, 4))


def _io_uring_setup(row: Row, a: list[str], ret_decor: str | None) -> None:
    row.count = parse_int(_at(a, 0))
    row.flags = struct_field(_at(a, 1), "flags")
    _new_fd(row, ret_decor)


def _io_uring_enter(row: Row, a: list[str], ret_decor: str | None) -> None:
    _set_fd(row, _at(a, 0))
    row.to_submit = parse_int(_at(a, 1))
    row.min_complete = parse_int(_at(a, 2))
    row.flags = _at(a, 3)


def _io_uring_register(row: Row, a: list[str], ret_decor: str | None) -> None:
    _set_fd(row, _at(a, 0))
    row.op = _at(a, 1)
    row.count = parse_int(_at(a, 3))


def _accept(row: Row, a: list[str], ret_decor: str | None) -> None:
    _set_fd(row, _at(a, 0))
    addr = _at(a, 1)
    row.addr = addr if addr is not None and addr.startswith("{") else None
    row.flags = _at(a, 3)
    _new_fd(row, ret_decor)


def _connect(row: Row, a: list[str], ret_decor: str | None) -> None:
    _set_fd(row, _at(a, 0))
    row.addr = _at(a, 1)


def _rw(row: Row, a: list[str], ret_decor: str | None) -> None:
    _set_fd(row, _at(a, 0))
    row.count = parse_int(_at(a, 2))


def _sendrecv(row: Row, a: list[str], ret_decor: str | None) -> None:
    # sendto/recvfrom(fd, buf, len, flags, addr, addrlen)
    _rw(row, a, ret_decor)
    row.flags = _at(a, 3)
    addr = _at(a, 4)
    row.addr = None if addr in (None, "NULL") else addr


def _openat(row: Row, a: list[str], ret_decor: str | None) -> None:
    row.path = unquote(_at(a, 1))
    row.flags = _at(a, 2)
    _new_fd(row, ret_decor)


def _close(row: Row, a: list[str], ret_decor: str | None) -> None:
    _set_fd(row, _at(a, 0))


def _nanosleep(row: Row, a: list[str], ret_decor: str | None) -> None:
    row.timeout_ns = parse_timespec_ns(_at(a, 0))


def _futex(row: Row, a: list[str], ret_decor: str | None) -> None:
    row.addr = _at(a, 0)
    row.op = _at(a, 1)
    op = row.op or ""
    # Only plain FUTEX_WAIT takes a relative timeout; the BITSET variants'
    # timeout is an absolute clock reading, not a duration.
    if op.startswith("FUTEX_WAIT") and "BITSET" not in op:
        row.timeout_ns = parse_timespec_ns(_at(a, 3))


_Decoder = Callable[[Row, list[str], "str | None"], None]

DECODERS: dict[str, _Decoder] = {
    "epoll_create1": _epoll_create1,
    "epoll_ctl": _epoll_ctl,
    "epoll_wait": _epoll_wait,
    "epoll_pwait": _epoll_wait,
    "epoll_pwait2": _epoll_pwait2,
    "poll": _poll,
    "ppoll": _ppoll,
    "select": _select,
    "pselect6": _select,
    "io_uring_setup": _io_uring_setup,
    "io_uring_enter": _io_uring_enter,
    "io_uring_register": _io_uring_register,
    "accept": _accept,
    "accept4": _accept,
    "connect": _connect,
    "read": _rw,
    "write": _rw,
    "recvfrom": _sendrecv,
    "sendto": _sendrecv,
    "openat": _openat,
    "close": _close,
    "nanosleep": _nanosleep,
    "futex": _futex,
}


def decode_args(row: Row, args: list[str], ret_decor: str | None) -> None:
    """Fill ``row``'s decoded columns from its split arguments (in place)."""
    decoder = DECODERS.get(row.name)
    if decoder is not None:
        decoder(row, args, ret_decor)
