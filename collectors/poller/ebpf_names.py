"""Numbers the eBPF probes see, spelled as strace spells them.

The probes print raw integers (an epoll op, a flag mask, a signal number, a
sockaddr's bytes); these tables turn them into the same text strace writes in
``poller.parquet`` (``EPOLL_CTL_ADD``, ``EPOLLIN|EPOLLET``, ``SIGURG``,
``{sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr("127.0.0.1")}``),
so a view grouping by those strings sees one vocabulary whichever backend recorded.
Values are Linux x86-64's (include/uapi).
"""

from __future__ import annotations

import errno as _errno
import ipaddress
import signal as _signal
import socket

EPOLL_CTL_OPS = {1: "EPOLL_CTL_ADD", 2: "EPOLL_CTL_DEL", 3: "EPOLL_CTL_MOD"}

_EPOLL_EVENTS = (
    (0x001, "EPOLLIN"), (0x002, "EPOLLPRI"), (0x004, "EPOLLOUT"), (0x008, "EPOLLERR"),
    (0x010, "EPOLLHUP"), (0x040, "EPOLLRDNORM"), (0x080, "EPOLLRDBAND"),
    (0x100, "EPOLLWRNORM"), (0x200, "EPOLLWRBAND"), (0x400, "EPOLLMSG"),
    (0x2000, "EPOLLRDHUP"), (1 << 28, "EPOLLEXCLUSIVE"), (1 << 29, "EPOLLWAKEUP"),
    (1 << 30, "EPOLLONESHOT"), (1 << 31, "EPOLLET"),
)

_OPEN_FLAGS = (
    (0o100, "O_CREAT"), (0o200, "O_EXCL"), (0o400, "O_NOCTTY"), (0o1000, "O_TRUNC"),
    (0o2000, "O_APPEND"), (0o4000, "O_NONBLOCK"), (0o10000, "O_DSYNC"), (0o20000, "O_ASYNC"),
    (0o40000, "O_DIRECT"), (0o200000, "O_DIRECTORY"), (0o400000, "O_NOFOLLOW"),
    (0o1000000, "O_NOATIME"), (0o2000000, "O_CLOEXEC"), (0o10000000, "O_PATH"),
)
_O_LARGEFILE = 0o100000  # set by the C library on 64-bit; strace leaves it out
_SOCK_FLAGS = ((0o4000, "SOCK_NONBLOCK"), (0o2000000, "SOCK_CLOEXEC"))
_MSG_FLAGS = (
    (0x1, "MSG_OOB"), (0x2, "MSG_PEEK"), (0x4, "MSG_DONTROUTE"), (0x8, "MSG_CTRUNC"),
    (0x20, "MSG_TRUNC"), (0x40, "MSG_DONTWAIT"), (0x80, "MSG_EOR"), (0x100, "MSG_WAITALL"),
    (0x4000, "MSG_NOSIGNAL"), (0x8000, "MSG_MORE"), (0x40000000, "MSG_CMSG_CLOEXEC"),
)
_URING_ENTER_FLAGS = (
    (1, "IORING_ENTER_GETEVENTS"), (2, "IORING_ENTER_SQ_WAKEUP"), (4, "IORING_ENTER_SQ_WAIT"),
    (8, "IORING_ENTER_EXT_ARG"), (16, "IORING_ENTER_REGISTERED_RING"),
)
_URING_SETUP_FLAGS = (
    (1, "IORING_SETUP_IOPOLL"), (2, "IORING_SETUP_SQPOLL"), (4, "IORING_SETUP_SQ_AFF"),
    (8, "IORING_SETUP_CQSIZE"), (16, "IORING_SETUP_CLAMP"), (32, "IORING_SETUP_ATTACH_WQ"),
    (64, "IORING_SETUP_R_DISABLED"), (128, "IORING_SETUP_SUBMIT_ALL"),
    (256, "IORING_SETUP_COOP_TASKRUN"), (512, "IORING_SETUP_TASKRUN_FLAG"),
    (1024, "IORING_SETUP_SQE128"), (2048, "IORING_SETUP_CQE32"),
    (4096, "IORING_SETUP_SINGLE_ISSUER"), (8192, "IORING_SETUP_DEFER_TASKRUN"),
)

URING_REGISTER_OPS = {
    0: "IORING_REGISTER_BUFFERS", 1: "IORING_UNREGISTER_BUFFERS", 2: "IORING_REGISTER_FILES",
    3: "IORING_UNREGISTER_FILES", 4: "IORING_REGISTER_EVENTFD", 5: "IORING_UNREGISTER_EVENTFD",
    6: "IORING_REGISTER_FILES_UPDATE", 7: "IORING_REGISTER_EVENTFD_ASYNC",
    8: "IORING_REGISTER_PROBE", 9: "IORING_REGISTER_PERSONALITY",
    10: "IORING_UNREGISTER_PERSONALITY", 11: "IORING_REGISTER_RESTRICTIONS",
    12: "IORING_REGISTER_ENABLE_RINGS", 13: "IORING_REGISTER_FILES2",
    14: "IORING_REGISTER_FILES_UPDATE2", 15: "IORING_REGISTER_BUFFERS2",
    16: "IORING_REGISTER_BUFFERS_UPDATE", 17: "IORING_REGISTER_IOWQ_AFF",
    18: "IORING_UNREGISTER_IOWQ_AFF", 19: "IORING_REGISTER_IOWQ_MAX_WORKERS",
    20: "IORING_REGISTER_RING_FDS", 21: "IORING_UNREGISTER_RING_FDS",
    22: "IORING_REGISTER_PBUF_RING", 23: "IORING_UNREGISTER_PBUF_RING",
}

#: io_uring opcodes (enum io_uring_op), as liburing names them without the prefix.
URING_OPCODES = (
    "NOP", "READV", "WRITEV", "FSYNC", "READ_FIXED", "WRITE_FIXED", "POLL_ADD", "POLL_REMOVE",
    "SYNC_FILE_RANGE", "SENDMSG", "RECVMSG", "TIMEOUT", "TIMEOUT_REMOVE", "ACCEPT",
    "ASYNC_CANCEL", "LINK_TIMEOUT", "CONNECT", "FALLOCATE", "OPENAT", "CLOSE", "FILES_UPDATE",
    "STATX", "READ", "WRITE", "FADVISE", "MADVISE", "SEND", "RECV", "OPENAT2", "EPOLL_CTL",
    "SPLICE", "PROVIDE_BUFFERS", "REMOVE_BUFFERS", "TEE", "SHUTDOWN", "RENAMEAT", "UNLINKAT",
    "MKDIRAT", "SYMLINKAT", "LINKAT", "MSG_RING", "FSETXATTR", "SETXATTR", "FGETXATTR",
    "GETXATTR", "SOCKET", "URING_CMD", "SEND_ZC", "SENDMSG_ZC", "READ_MULTISHOT", "WAITID",
    "FUTEX_WAIT", "FUTEX_WAKE", "FUTEX_WAITV", "FIXED_FD_INSTALL", "FTRUNCATE", "BIND",
    "LISTEN", "RECV_ZC", "EPOLL_WAIT", "READV_FIXED", "WRITEV_FIXED", "PIPE",
)

_FUTEX_CMDS = {
    0: "FUTEX_WAIT", 1: "FUTEX_WAKE", 2: "FUTEX_FD", 3: "FUTEX_REQUEUE", 4: "FUTEX_CMP_REQUEUE",
    5: "FUTEX_WAKE_OP", 6: "FUTEX_LOCK_PI", 7: "FUTEX_UNLOCK_PI", 8: "FUTEX_TRYLOCK_PI",
    9: "FUTEX_WAIT_BITSET", 10: "FUTEX_WAKE_BITSET", 11: "FUTEX_WAIT_REQUEUE_PI",
    12: "FUTEX_CMP_REQUEUE_PI", 13: "FUTEX_LOCK_PI2",
}
_FUTEX_PRIVATE, _FUTEX_CLOCK_REALTIME = 128, 256

#: The kernel's restart codes: strace prints these calls' result as ``?``.
RESTART_ERRNOS = {512: "ERESTARTSYS", 513: "ERESTARTNOINTR", 514: "ERESTARTNOHAND",
                  516: "ERESTART_RESTARTBLOCK"}


def _mask(value: int, table: tuple[tuple[int, str], ...], zero: str = "0") -> str:
    names, rest = [], value
    for bit, name in table:
        if rest & bit:
            names.append(name)
            rest &= ~bit
    if rest:
        names.append(hex(rest))
    return "|".join(names) if names else zero


def epoll_events(mask: int) -> str:
    """``EPOLLIN|EPOLLOUT|EPOLLRDHUP|EPOLLET``."""
    return _mask(mask & 0xFFFFFFFF, _EPOLL_EVENTS)


def open_flags(flags: int) -> str:
    """``O_RDONLY|O_CLOEXEC``: the access mode, then the flags set."""
    acc = ("O_RDONLY", "O_WRONLY", "O_RDWR", "O_ACCMODE")[flags & 3]
    rest = _mask(flags & ~3 & ~_O_LARGEFILE, _OPEN_FLAGS, zero="")
    return acc + ("|" + rest if rest else "")


def sock_flags(flags: int) -> str:
    """accept4's ``SOCK_CLOEXEC|SOCK_NONBLOCK`` (``0`` for none)."""
    return _mask(flags, _SOCK_FLAGS)


def msg_flags(flags: int) -> str:
    """sendto/recvfrom's ``MSG_DONTWAIT|MSG_NOSIGNAL`` (``0`` for none)."""
    return _mask(flags, _MSG_FLAGS)


def uring_enter_flags(flags: int) -> str:
    """``IORING_ENTER_GETEVENTS`` (``0`` for none)."""
    return _mask(flags, _URING_ENTER_FLAGS)


def uring_setup_flags(flags: int) -> str:
    """io_uring_params' flags (``0`` for none)."""
    return _mask(flags, _URING_SETUP_FLAGS)


def uring_opcode(op: int) -> str:
    """``READ``, ``WRITE_FIXED``, ...; ``OP_<n>`` for one this table does not know."""
    return URING_OPCODES[op] if 0 <= op < len(URING_OPCODES) else f"OP_{op}"


def futex_op(op: int) -> str:
    """``FUTEX_WAIT_PRIVATE``, ``FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME``, ..."""
    cmd = _FUTEX_CMDS.get(op & 127, f"{op & 127:#x}")
    name = cmd + ("_PRIVATE" if op & _FUTEX_PRIVATE else "")
    return name + ("|FUTEX_CLOCK_REALTIME" if op & _FUTEX_CLOCK_REALTIME else "")


def errno_name(code: int) -> str:
    """``EAGAIN`` for 11; the kernel's restart codes by their names."""
    return RESTART_ERRNOS.get(code) or _errno.errorcode.get(code, f"E{code}")


def signal_name(sig: int) -> str:
    """``SIGURG`` for 23."""
    try:
        return _signal.Signals(sig).name
    except ValueError:
        return f"SIG{sig}"


def _port(be16: int) -> int:
    return ((be16 & 0xFF) << 8) | (be16 >> 8)


def _unsigned(family: int, port_be: int, in4: int, in6_hi: int, in6_lo: int
              ) -> tuple[int, int, int, int, int]:
    # bpftrace 0.17 sign-extends a dereferenced uint16/uint32 into its int64
    # maps (a port of 0x8000 and above printed negative; an IPv4 address whose
    # last octet is 128 or more): the fields' own widths, whichever transport.
    return (family & 0xFFFF, port_be & 0xFFFF, in4 & 0xFFFFFFFF, in6_hi & (2**64 - 1),
            in6_lo & (2**64 - 1))


def sockaddr_text(family: int, port_be: int, in4: int, in6_hi: int, in6_lo: int) -> str | None:
    """A sockaddr as strace prints it; None for an unreadable one (family 0)."""
    family, port_be, in4, in6_hi, in6_lo = _unsigned(family, port_be, in4, in6_hi, in6_lo)
    if family == socket.AF_INET:
        ip = ipaddress.IPv4Address(in4.to_bytes(4, "little"))
        return (f"{{sa_family=AF_INET, sin_port=htons({_port(port_be)}), "
                f'sin_addr=inet_addr("{ip}")}}')
    if family == socket.AF_INET6:
        ip6 = ipaddress.IPv6Address(in6_hi.to_bytes(8, "little") + in6_lo.to_bytes(8, "little"))
        return (f"{{sa_family=AF_INET6, sin6_port=htons({_port(port_be)}), "
                f'inet_pton(AF_INET6, "{ip6}", &sin6_addr)}}')
    if family == socket.AF_UNIX:
        return "{sa_family=AF_UNIX}"
    return None if family == 0 else f"{{sa_family={family}}}"


def endpoint(family: int, port_be: int, in4: int, in6_hi: int, in6_lo: int) -> str | None:
    """``127.0.0.1:80`` or ``[::1]:80``, as strace's -yy socket descriptions write one end."""
    family, port_be, in4, in6_hi, in6_lo = _unsigned(family, port_be, in4, in6_hi, in6_lo)
    if family == socket.AF_INET:
        return f"{ipaddress.IPv4Address(in4.to_bytes(4, 'little'))}:{_port(port_be)}"
    if family == socket.AF_INET6:
        ip6 = ipaddress.IPv6Address(in6_hi.to_bytes(8, "little") + in6_lo.to_bytes(8, "little"))
        return f"[{ip6}]:{_port(port_be)}"
    return None


def socket_kind(family: int, type_: int) -> str:
    """The protocol strace's -yy names a socket by: ``TCP``, ``UDPv6``, ``UNIX``, ..."""
    stream = (type_ & 0xF) == socket.SOCK_STREAM
    if family in (socket.AF_INET, socket.AF_INET6):
        proto = "TCP" if stream else "UDP"
        return proto + ("v6" if family == socket.AF_INET6 else "")
    if family == socket.AF_UNIX:
        return "UNIX"
    if family == 16:  # AF_NETLINK
        return "NETLINK"
    return "socket"
