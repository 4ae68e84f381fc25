"""The target of ``gmpscope live --os``: its pid, from the port it listens on, and
the epoll registrations it made before the probes were attached.

Both read ``/proc`` (``/proc/net/tcp``, ``tcp6``, ``/proc/*/fd``,
``/proc/PID/fdinfo``); nothing here needs privileges beyond reading the
target's descriptors.
"""

from __future__ import annotations

import ipaddress
import os
import re
import urllib.parse

from collectors.poller.records import KIND_SYSCALL, Row

_LOCAL_HOSTS = ("localhost", "")


class OsSideError(RuntimeError):
    """The OS side cannot be recorded (one line saying why)."""


def _listening_inodes(port: int) -> set[str]:
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as fh:
                next(fh, None)
                for line in fh:
                    f = line.split()
                    # local_address is HEXIP:HEXPORT; state 0A is LISTEN.
                    if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                        found.add(f[9])
        except OSError:
            continue
    return found


def _is_local(host: str) -> bool:
    if host in _LOCAL_HOSTS:
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if ip.is_loopback or ip.is_unspecified:
        return True
    import socket

    try:
        own = {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        own = set()
    return str(ip) in own


def pid_of_target(target: str) -> int:
    """The pid of the local process listening on ``target``'s port; OsSideError saying
    why not (remote target, nobody listening, several processes) and naming --os-pid."""
    parts = urllib.parse.urlsplit(target)
    host = (parts.hostname or "").strip("[]")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if not _is_local(host):
        raise OsSideError(f"--os: the target {host} is not this machine: the OS side is "
                          "recorded locally; run gmpscope live there, or give --os-pid PID")
    inodes = _listening_inodes(port)
    if not inodes:
        raise OsSideError(f"--os: no process listens on port {port} here (/proc/net/tcp, "
                          "tcp6); give the service's pid with --os-pid PID")
    want = {f"socket:[{i}]" for i in inodes}
    pids: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{name}/fd"):
                if os.readlink(f"/proc/{name}/fd/{fd}") in want:
                    pids.add(int(name))
                    break
        except OSError:
            continue
    if len(pids) != 1:
        what = "no process (not allowed to read the others' descriptors?)" if not pids \
            else f"{len(pids)} processes ({', '.join(map(str, sorted(pids)))})"
        raise OsSideError(f"--os: port {port}'s listening socket is held by {what}; "
                          "give the service's pid with --os-pid PID")
    return pids.pop()


def registered(pid: int) -> dict[tuple[int, int], Row]:
    """The epoll registrations ``pid`` made before the probes were attached, from
    ``/proc/PID/fdinfo`` of its epoll descriptors (``tfd: N events: E data: D``),
    as epoll_ctl rows for :class:`ReadyResolver` (the listening socket, Go's wakeup
    eventfd and the connections open at start would otherwise resolve to ``?``)."""
    out: dict[tuple[int, int], Row] = {}
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for name in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}") != "anon_inode:[eventpoll]":
                continue
            with open(f"/proc/{pid}/fdinfo/{name}") as fh:
                text = fh.read()
        except OSError:
            continue
        epfd = int(name)
        for m in re.finditer(r"tfd:\s*(\d+)\s+events:\s*[0-9a-f]+\s+data:\s*([0-9a-f]+)", text):
            fd = int(m.group(1))
            row = Row(ts_ns=0, tid=pid, kind=KIND_SYSCALL, name="epoll_ctl", result=0, fd=fd,
                      epfd=epfd, op="EPOLL_CTL_ADD")
            row.extra["data"] = str(int(m.group(2), 16))
            out[(epfd, fd)] = row
    return out
