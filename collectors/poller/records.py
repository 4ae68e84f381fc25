"""The row model of ``poller.parquet``: one completed system call, signal or exit.

Columns are documented in docs/schema.md (section ``poller.parquet``). Integer
columns that do not apply to a row are ``None`` (null in Parquet), never a
made-up sentinel, except ``timeout_ns`` where ``-1`` means "wait forever"
(a NULL timeout pointer or a negative millisecond timeout), as the kernel
reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

#: Every system call the recorder asks strace for (issue 5's list).
COVERED_SYSCALLS: tuple[str, ...] = (
    "epoll_create1",
    "epoll_ctl",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "poll",
    "ppoll",
    "select",
    "pselect6",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "accept",
    "accept4",
    "connect",
    "read",
    "write",
    "recvfrom",
    "sendto",
    "openat",
    "close",
    "nanosleep",
    "futex",
)

#: Row kinds: a system call, a signal delivered to a thread, a thread exit.
KIND_SYSCALL = "syscall"
KIND_SIGNAL = "signal"
KIND_EXIT = "exit"


@dataclass(slots=True)
class Row:
    """One line of the recording, with ``<unfinished ...>``/``resumed`` halves joined."""

    ts_ns: int  # wall-clock entry time, ns since the Unix epoch
    tid: int  # OS thread id (strace's pid column under -f)
    kind: str  # KIND_SYSCALL, KIND_SIGNAL or KIND_EXIT
    name: str  # syscall name, signal name (SIGURG) or "exited"/"killed"
    duration_ns: int | None = None  # time spent in the call (strace -T); None if unknown
    result: int | None = None  # return value; None for "?" (thread died inside the call)
    errno: str | None = None  # EAGAIN, ETIMEDOUT, ERESTARTSYS, ...
    fd: int | None = None  # descriptor the call acts on (target fd for epoll_ctl)
    fd_path: str | None = None  # strace -yy decoration of fd: path, TCP:[a->b], anon_inode:...
    new_fd: int | None = None  # descriptor the call created (openat, accept*, epoll_create1, ...)
    new_fd_path: str | None = None  # decoration of new_fd
    epfd: int | None = None  # the epoll instance (epoll_ctl and the epoll waits)
    op: str | None = None  # EPOLL_CTL_ADD, FUTEX_WAIT_PRIVATE, IORING_REGISTER_..., ...
    events: str | None = None  # epoll_ctl interest mask as strace spells it (EPOLLIN|EPOLLET)
    timeout_ns: int | None = None  # requested timeout/sleep; -1 means no timeout
    maxevents: int | None = None  # epoll maxevents; nfds of poll/ppoll/select/pselect6
    count: int | None = None  # bytes asked for (read, write, recvfrom, sendto); ring entries
    to_submit: int | None = None  # io_uring_enter
    min_complete: int | None = None  # io_uring_enter
    flags: str | None = None  # open/accept4/sendto/recvfrom/io_uring flags as strace spells them
    path: str | None = None  # openat path (decoded from strace's C escapes)
    addr: str | None = None  # socket address (connect, accept, sendto, recvfrom) or futex word
    args: str = ""  # the raw argument text, both halves joined
    partial: bool = False  # the call's start was not seen (it began before attaching)
    ready_fds: str | None = None  # epoll waits: the fds returned ready, "7,9,?" (ready.py)
    extra: dict[str, str] = field(default_factory=dict)  # not written; handy in tests

    @property
    def end_ns(self) -> int | None:
        """Wall-clock time the call returned, when its duration is known."""
        return None if self.duration_ns is None else self.ts_ns + self.duration_ns


#: Column names in file order (every Row field but ``extra``).
COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Row) if f.name != "extra")
