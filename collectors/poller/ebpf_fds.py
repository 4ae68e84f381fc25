"""Descriptor descriptions for the eBPF backend: what strace's ``-yy`` prints.

strace decorates every descriptor as it prints a call (``7<TCP:[127.0.0.1:80->
127.0.0.1:5555]>``). The probes see only numbers, so the descriptions come from
two places:

- **snapshots** of ``/proc/PID/fd`` (readlink) with the kernel's sock_diag
  (:mod:`collectors.poller.ebpf_sockdiag`; ``/proc/PID/net/{tcp,tcp6,udp,udp6}``
  where it cannot answer) and ``/proc/PID/net/unix`` turning ``socket:[inode]``
  into ``TCP:[local->remote]``, only for sockets not already described, taken
  by the recorder when the probes are attached, every ``SNAPSHOT_EVERY_S`` while
  it records, and at the end while the target still runs;
- **the calls themselves**: ``openat``'s path, ``epoll_create1`` (an eventpoll),
  ``io_uring_setup`` (an io_uring), ``accept`` (the peer the probe read, and the
  listening socket's own address).

A descriptor number is reused after ``close``, so each row's descriptor is
described from a snapshot taken between the closes that bound its life (its
*epoch*), the nearest in time; failing that, from the call that created it.
A descriptor made and closed between two snapshots by an untraced call
(``socket``, ``pipe2``, ``dup``) stays without a description (null).
"""

from __future__ import annotations

import bisect
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass

from collectors.poller import ebpf_sockdiag as sockdiag
from collectors.poller.records import KIND_SYSCALL, Row

SNAPSHOT_EVERY_S = 0.25
_CREATORS = {"epoll_create1": "anon_inode:[eventpoll]", "io_uring_setup": "anon_inode:[io_uring]"}


@dataclass(frozen=True)
class Snapshot:
    """A process's descriptors at one moment (wall ns)."""

    wall_ns: int
    fds: dict[int, str]


def _hex_ip(text: str) -> str:
    raw = bytes.fromhex(text)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    # IPv6 in /proc: four 32-bit words, each in host (little-endian) order.
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    return f"[{ipaddress.IPv6Address(words)}]"


def _endpoint(text: str) -> tuple[str, int]:
    addr, port = text.split(":")
    return _hex_ip(addr), int(port, 16)


def _inet_table(path: str, proto: str, wanted: set[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        with open(path) as fh:
            next(fh, None)
            for line in fh:
                f = line.split()
                if len(f) < 10 or f[9] not in wanted:
                    continue
                (la, lp), (ra, rp) = _endpoint(f[1]), _endpoint(f[2])
                local = f"{la}:{lp}"
                # A listening or unconnected socket has no peer: strace prints one end.
                if rp == 0:
                    out[f[9]] = f"{proto}:[{local}]"
                else:
                    out[f[9]] = f"{proto}:[{local}->{ra}:{rp}]"
    except (OSError, ValueError):
        pass
    return out


def _sockets(pid: int, wanted: set[str]) -> dict[str, str]:
    """inode -> description for the socket inodes ``wanted``, from sock_diag where it
    answers (the target's namespace is ours), else from ``/proc/PID/net``."""
    base = f"/proc/{pid}/net/"
    diag = sockdiag.sockets(pid)
    out: dict[str, str] = {}
    for name, proto in (("tcp", "TCP"), ("tcp6", "TCPv6"), ("udp", "UDP"), ("udp6", "UDPv6")):
        part = diag.get(proto) if diag is not None else None
        if part is None:
            part = _inet_table(base + name, proto, wanted)
        out.update((k, v) for k, v in part.items() if k in wanted)
    if wanted - out.keys():
        try:
            with open(base + "unix") as fh:
                next(fh, None)
                for line in fh:
                    f = line.split()
                    if len(f) >= 7 and f[6] in wanted:
                        out[f[6]] = f"UNIX:[{f[6]}]"
        except OSError:
            pass
    return out


def snapshot(pid: int, wall_ns: int, known: dict[str, str] | None = None) -> Snapshot | None:
    """The descriptors of ``pid`` now, described as strace -yy would; None once it is gone.

    ``known`` (inode -> description), kept by the caller between snapshots, holds
    the sockets whose description cannot change (connected or listening): when
    every socket is there, no socket table is read.
    """
    base = f"/proc/{pid}/fd"
    try:
        names = os.listdir(base)
    except OSError:
        return None
    links: dict[int, str] = {}
    for n in names:
        try:
            links[int(n)] = os.readlink(f"{base}/{n}")
        except (OSError, ValueError):
            continue
    inodes = {v[8:-1] for v in links.values() if v.startswith("socket:[")}
    if not inodes:
        return Snapshot(wall_ns, links)
    cache = known if known is not None else {}
    missing = inodes - cache.keys()
    found = _sockets(pid, missing) if missing else {}
    for inode, desc in found.items():
        if "->" in desc or desc.startswith("UNIX:"):
            cache[inode] = desc  # a connected socket's ends are fixed
    for fd, v in links.items():
        if v.startswith("socket:["):
            inode = v[8:-1]
            links[fd] = cache.get(inode) or found.get(inode, v)
    return Snapshot(wall_ns, links)


def _local_end(desc: str | None) -> tuple[str, str] | None:
    """``("TCP", "127.0.0.1:80")`` from a listening socket's description."""
    if not desc or "->" in desc or ":[" not in desc:
        return None
    proto, rest = desc.split(":[", 1)
    return (proto, rest[:-1]) if rest.endswith("]") and ":" in rest else None


def _addr_end(addr: str) -> str | None:
    """``127.0.0.1:80`` from strace's ``{sa_family=AF_INET, sin_port=htons(80), ...}``."""
    import re

    m = re.search(r'htons\((\d+)\).*?"([^"]+)"', addr)
    if not m:
        return None
    return f"[{m.group(2)}]:{m.group(1)}" if ":" in m.group(2) else f"{m.group(2)}:{m.group(1)}"


def _with_kind(seen: str | None, created: str | None) -> str | None:
    """A new descriptor's description: what a snapshot saw of it, else what the
    call that made it says. A socket not yet bound or connected is in no socket
    table, so a snapshot sees only ``socket:[739688]``; strace -yy names it by
    its protocol, ``TCP:[739688]``, which the creating socket() call knows."""
    if seen is None:
        return created
    if seen.startswith("socket:[") and created and not created.startswith("socket:"):
        return created.split(":[", 1)[0] + seen[len("socket"):]
    return seen


class Describer:
    """Fills ``fd_path``/``new_fd_path`` of rows taken in entry-time order."""

    def __init__(self, rows: Sequence[Row], snapshots: Sequence[Snapshot]) -> None:
        self._snaps = sorted(snapshots, key=lambda s: s.wall_ns)
        self._times = [s.wall_ns for s in self._snaps]
        self._closes: dict[int, list[int]] = {}
        for r in rows:
            if r.kind == KIND_SYSCALL and r.name == "close" and r.result == 0 and r.fd is not None:
                self._closes.setdefault(r.fd, []).append(r.ts_ns)
        for v in self._closes.values():
            v.sort()
        self._cur: dict[int, str | None] = {}
        # When each descriptor's current life began (its creator's return), and
        # the life before it, for a close that entered before that return.
        self._born: dict[int, int] = {}
        self._before: dict[int, str | None] = {}

    def _from_snapshot(self, fd: int, ts: int) -> str | None:
        closes = self._closes.get(fd, [])
        k = bisect.bisect_left(closes, ts)
        lo = closes[k - 1] if k else -1  # the previous close ended the last life
        hi = closes[k] if k < len(closes) else 1 << 62  # the next close ends this one
        i = bisect.bisect_left(self._times, ts)
        best: tuple[int, str] | None = None
        for j in (i - 1, i, i - 2, i + 1):
            if 0 <= j < len(self._snaps):
                s = self._snaps[j]
                if lo < s.wall_ns <= hi and fd in s.fds:
                    d = abs(s.wall_ns - ts)
                    if best is None or d < best[0]:
                        best = (d, s.fds[fd])
        if best is None:  # the nearest ones missed: any snapshot of this life will do
            for j in range(bisect.bisect_right(self._times, lo), len(self._snaps)):
                s = self._snaps[j]
                if s.wall_ns > hi:
                    break
                if fd in s.fds:
                    return s.fds[fd]
        return None if best is None else best[1]

    def _known(self, fd: int, ts: int) -> str | None:
        if fd not in self._cur:
            self._cur[fd] = self._from_snapshot(fd, ts)
        return self._cur[fd]

    def feed(self, row: Row) -> None:
        """Describe one row (rows must come in entry-time order)."""
        if row.kind != KIND_SYSCALL:
            return
        fd = row.fd
        closing = row.name == "close" and row.result == 0 and fd is not None
        if fd is not None and fd >= 0 and self._born.get(fd, -1) > row.ts_ns:
            # Rows come in entry order, but a call that entered earlier made this
            # descriptor's new life after this call entered: it acts on the life
            # before (a close of it ends that life, not the new one).
            before = self._before.get(fd)
            row.fd_path = before if before is not None else self._from_snapshot(fd, row.ts_ns)
            if closing:
                self._before.pop(fd, None)
            return
        if fd is not None and fd >= 0:
            row.fd_path = self._known(fd, row.ts_ns)
        if row.new_fd is not None:
            born = row.ts_ns + (row.duration_ns or 0)
            desc = _with_kind(self._from_snapshot(row.new_fd, born), self._created(row))
            if row.new_fd in self._cur:
                self._before[row.new_fd] = self._cur[row.new_fd]
            self._cur[row.new_fd] = desc
            self._born[row.new_fd] = born
            row.new_fd_path = desc
        if closing and fd is not None:
            self._cur.pop(fd, None)
            self._before.pop(fd, None)
        elif row.fd is not None and row.errno in (None, "EINPROGRESS"):
            self._learn(row)

    def _learn(self, row: Row) -> None:
        """What a bind, getsockname or connect says about its socket, for the calls
        after it (strace prints a socket's ends as they are at each call)."""
        assert row.fd is not None
        cur = self._cur.get(row.fd)
        if not cur or ":[" not in cur or cur.startswith(("/", "anon")):
            return
        proto, rest = cur.split(":[", 1)
        local, _, remote = rest[:-1].partition("->")
        if local.isdigit():  # an inode (TCP:[739688]): no end known yet
            local = ""
        if row.name in ("bind", "getsockname") and row.extra.get("local"):
            local = row.extra["local"]
        elif row.name == "connect" and row.addr:
            remote = _addr_end(row.addr) or remote
        else:
            return
        self._cur[row.fd] = f"{proto}:[{local}->{remote}]" if remote else f"{proto}:[{local}]"

    def _created(self, row: Row) -> str | None:
        if row.name in _CREATORS:
            return _CREATORS[row.name]
        if row.name == "openat":
            return row.path
        if row.name == "socket":
            return f"{row.extra.get('socket', 'socket')}:[]"
        peer = row.extra.get("peer")
        if peer:
            local = _local_end(row.fd_path)
            if local is not None:
                return f"{local[0]}:[{local[1]}->{peer}]"
            return f"{'TCPv6' if peer.startswith('[') else 'TCP'}:[->{peer}]"
        return None
