"""The target's TCP and UDP sockets by inode, from the kernel's sock_diag netlink.

:mod:`collectors.poller.ebpf_fds` describes a socket descriptor as strace -yy
does (``TCP:[127.0.0.1:80->127.0.0.1:5555]``). ``/proc/PID/net/tcp`` lists
every socket of the namespace, TIME_WAIT ones included: after a loopback
benchmark that is tens of thousands of lines (6 MB, 60 ms of kernel time to
print, half a second for Python to parse), read every quarter second while the
target runs. sock_diag (``NETLINK_SOCK_DIAG``, ``SOCK_DIAG_BY_FAMILY``; the
kernel's UAPI, linux/inet_diag.h) answers with binary records and skips the
TIME_WAIT sockets in the kernel (no descriptor holds one).

It answers for the recorder's network namespace: :func:`sockets` returns None
when the target is in another one (or netlink fails), and the caller reads
``/proc/PID/net`` instead.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
TCP_TIME_WAIT = 6
_NLMSG = struct.Struct("=IHHII")
#: inet_diag_req_v2: family, protocol, ext, pad, states, then a zeroed sockid (48 bytes).
_REQ = struct.Struct("=BBBBI48x")
#: inet_diag_msg: family, state, timer, retrans, sport, dport (big-endian), src, dst
#: (16 bytes each), interface, cookie, expires, rqueue, wqueue, uid, inode.
_MSG = struct.Struct("=BBBB2s2s16s16sI8sIIIII")
_KINDS = ((socket.AF_INET, socket.IPPROTO_TCP, "TCP"),
          (socket.AF_INET6, socket.IPPROTO_TCP, "TCPv6"),
          (socket.AF_INET, socket.IPPROTO_UDP, "UDP"),
          (socket.AF_INET6, socket.IPPROTO_UDP, "UDPv6"))


def same_netns(pid: int) -> bool:
    """Whether ``pid`` shares this process's network namespace."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return False


def _endpoint(family: int, port: bytes, addr: bytes) -> tuple[str, int]:
    p = int.from_bytes(port, "big")
    if family == socket.AF_INET:
        return str(ipaddress.IPv4Address(addr[:4])), p
    return f"[{ipaddress.IPv6Address(addr)}]", p


def _dump(sock: socket.socket, family: int, proto: int, name: str, seq: int,
          out: dict[str, str]) -> None:
    states = 0xFFFFFFFF & ~(1 << TCP_TIME_WAIT)
    req = _REQ.pack(family, proto, 0, 0, states)
    sock.send(_NLMSG.pack(_NLMSG.size + len(req), SOCK_DIAG_BY_FAMILY,
                          NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + req)
    while True:
        data = sock.recv(1 << 16)
        off = 0
        while off + _NLMSG.size <= len(data):
            length, kind, _flags, _seq, _pid = _NLMSG.unpack_from(data, off)
            if kind == NLMSG_DONE:
                return
            if kind == NLMSG_ERROR or length < _NLMSG.size:
                raise OSError(f"sock_diag refused the {name} dump")
            body = off + _NLMSG.size
            if length - _NLMSG.size >= _MSG.size:
                f = _MSG.unpack_from(data, body)
                inode = f[-1]
                if inode:
                    la, lp = _endpoint(f[0], f[4], f[6])
                    ra, rp = _endpoint(f[0], f[5], f[7])
                    # A listening or unconnected socket has no peer: strace prints one end.
                    out[str(inode)] = (f"{name}:[{la}:{lp}]" if rp == 0
                                       else f"{name}:[{la}:{lp}->{ra}:{rp}]")
            off += (length + 3) & ~3


def sockets(pid: int) -> dict[str, dict[str, str] | None] | None:
    """Per kind (``TCP``, ``TCPv6``, ``UDP``, ``UDPv6``): inode -> ``TCP:[local->remote]``
    for the sockets of ``pid``'s namespace (not TIME_WAIT), or None for a kind
    sock_diag did not answer (udp_diag not loaded, ...); None for all when the
    target is in another network namespace."""
    if not same_netns(pid):
        return None
    out: dict[str, dict[str, str] | None] = {}
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
    except OSError:
        return None
    with sock:
        for seq, (family, proto, name) in enumerate(_KINDS, 1):
            found: dict[str, str] = {}
            try:
                _dump(sock, family, proto, name, seq, found)
            except OSError:
                out[name] = None
                continue
            out[name] = found
    return out
