"""Parse the eBPF backend's output (:mod:`collectors.poller.ebpf_program`) into rows.

Pure and streaming like the strace parser: one line in, at most one
:class:`~collectors.poller.records.Row` out, plus the io_uring requests kept in
:attr:`EbpfParser.requests`. Probe times are CLOCK_MONOTONIC; ``to_wall`` maps
them to the wall clock. A line it does not understand is counted in
``stats.unknown`` (bpftrace's own notes, a ``Lost N events`` warning is counted
in ``lost``), never fatal.

What the rows cannot carry that strace's do: ``args`` (strace's argument text;
here a short ``name=value`` list of what the probe read), and ``fd_path`` /
``new_fd_path``, which :mod:`collectors.poller.ebpf_fds` fills afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from collectors.poller import ebpf_names as nm
from collectors.poller.ebpf_program import ALL_CALLS
from collectors.poller.records import KIND_EXIT, KIND_SIGNAL, KIND_SYSCALL, Row
from collectors.poller.strace_parse import ParseStats

_MAP_LINE = re.compile(r"^@(\w+)\[(\d+)\]: (-?\d+)$")
_LOST = re.compile(r"Lost (\d+) events")
_NAMES = tuple(c.name for c in ALL_CALLS)


@dataclass(slots=True)
class UringRequest:
    """One io_uring request, from its submission to its completion."""

    tid: int  # the thread that submitted it
    submit_ns: int  # wall clock
    complete_ns: int | None  # None: still in flight when the recording ended
    ring: int  # the ring's kernel address (one per io_uring instance), for grouping
    user_data: int
    opcode: str
    result: int | None
    cflags: int | None

    @property
    def latency_ns(self) -> int | None:
        """Submission to completion."""
        return None if self.complete_ns is None else self.complete_ns - self.submit_ns


@dataclass
class EbpfStats(ParseStats):
    """ParseStats plus what only the eBPF output says."""

    lost: int = 0  # events bpftrace reported lost (its ring buffer was full)
    ready_events: int = 0  # epoll events read from the waits' returned arrays
    uring_requests: int = 0
    uring_in_flight: int = 0
    started: bool = False  # the program's B line was seen
    ended: bool = False  # its END block ran (E line): the output is complete

    def as_dict(self) -> dict[str, object]:
        out = super().as_dict()
        out.update(lost=self.lost, ready_events=self.ready_events,
                   uring_requests=self.uring_requests, uring_in_flight=self.uring_in_flight,
                   complete=self.ended)
        return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


@dataclass
class EbpfParser:
    """Turns the program's lines into rows; ``to_wall`` maps monotonic ns to wall ns."""

    to_wall: Callable[[int], int]
    start_mono: int = 0  # when probes were attached: the entry time of calls begun before
    stats: EbpfStats = field(default_factory=EbpfStats)
    requests: list[UringRequest] = field(default_factory=list)
    _extra: dict[int, dict[str, object]] = field(default_factory=dict)
    _maps: dict[str, dict[int, int]] = field(default_factory=dict)

    def feed(self, line: str) -> Row | None:
        """One output line; the row it completes, if any."""
        self.stats.lines += 1
        line = line.rstrip("\n")
        parts = line.split(" ")
        tag = parts[0]
        try:
            if tag == "S":
                return self._syscall(parts)
            if tag == "R":
                ex = self._extra.setdefault(int(parts[1]), {})
                ready = ex.setdefault("ready", [])
                assert isinstance(ready, list)
                ready.append(int(parts[3]))
                self.stats.ready_events += 1
                return None
            if tag == "A":
                vals = [int(p) for p in parts[2:7]]
                self._extra.setdefault(int(parts[1]), {})["peer"] = vals
                return None
            if tag == "O":
                self._extra.setdefault(int(parts[1]), {})["path"] = line.split(" ", 2)[2] \
                    if len(parts) > 2 else ""
                return None
            if tag == "G":
                return self._signal(parts)
            if tag == "X":
                return self._exit(parts)
            if tag == "Q":
                self._request(parts)
                return None
            if tag == "B":
                self.stats.started = True
                self.start_mono = self.start_mono or int(parts[1])
                return None
            if tag in ("C", "E", "") or line.startswith("Attaching"):
                self.stats.ended |= tag == "E"
                return None
        except (ValueError, IndexError):
            pass
        m = _MAP_LINE.match(line)
        if m:
            self._maps.setdefault(m.group(1), {})[int(m.group(2))] = int(m.group(3))
            return None
        lost = _LOST.search(line)
        if lost:
            self.stats.lost += int(lost.group(1))
            return None
        self.stats.unknown += 1
        if len(self.stats.unknown_samples) < 20:
            self.stats.unknown_samples.append(line[:200])
        return None

    def _syscall(self, p: list[str]) -> Row:
        code, tid, t0, t1, ret = int(p[1]), int(p[2]), int(p[3]), int(p[4]), int(p[5])
        a = [int(x) for x in p[6:]]
        partial = t0 == 0
        start = self.start_mono if partial else t0
        ts = self.to_wall(start)
        row = Row(ts_ns=ts, tid=tid, kind=KIND_SYSCALL, name=_NAMES[code],
                  duration_ns=max(0, self.to_wall(t1) - ts), partial=partial)
        self.stats.orphan_resumed += partial
        _result(row, ret)
        decode(row, a, self._extra.pop(tid, {}))
        self._count(row)
        return row

    def _count(self, row: Row) -> None:
        self.stats.rows += 1
        if row.kind == KIND_SYSCALL:
            self.stats.syscalls += 1
            self.stats.by_name[row.name] += 1
        elif row.kind == KIND_SIGNAL:
            self.stats.signals += 1
        else:
            self.stats.exits += 1

    def _signal(self, p: list[str]) -> Row:
        name = nm.signal_name(int(p[3]))
        row = Row(ts_ns=self.to_wall(int(p[2])), tid=int(p[1]), kind=KIND_SIGNAL, name=name,
                  args=f"{{si_signo={name}, si_code={int(p[4])}}}")
        self._count(row)
        return row

    def _exit(self, p: list[str]) -> Row:
        code = int(p[3])
        sig = code & 0x7F
        name = "killed" if sig else "exited"
        row = Row(ts_ns=self.to_wall(int(p[2])), tid=int(p[1]), kind=KIND_EXIT, name=name,
                  result=None if sig else (code >> 8) & 0xFF,
                  args=nm.signal_name(sig) if sig else "")
        self._count(row)
        return row

    def _request(self, p: list[str]) -> None:
        self.requests.append(UringRequest(
            tid=int(p[1]), submit_ns=self.to_wall(int(p[2])), complete_ns=self.to_wall(int(p[3])),
            ring=int(p[4]), user_data=int(p[5]), opcode=nm.uring_opcode(int(p[6])),
            result=int(p[7]), cflags=int(p[8])))
        self.stats.uring_requests += 1

    def finish(self) -> Iterator[Row]:
        """The calls still in progress when the recording ended (no result, no
        duration, as strace's never-resumed calls), then the requests in flight."""
        t0s, nrs = self._maps.get("t0", {}), self._maps.get("nr", {})
        slots = [self._maps.get(f"a{i}", {}) for i in range(4)]
        for tid, t0 in sorted(t0s.items()):
            if t0 == 0 or tid not in nrs:
                continue
            row = Row(ts_ns=self.to_wall(t0), tid=tid, kind=KIND_SYSCALL, name=_NAMES[nrs[tid]])
            # The arguments kept at entry; no result, no duration, no returned data.
            decode(row, [_signed(s.get(tid, 0)) for s in slots] + [0] * 4, {})
            row.new_fd = None
            self.stats.never_resumed += 1
            self._count(row)
            yield row
        qs = self._maps.get("qs", {})
        for req, t in sorted(qs.items(), key=lambda kv: kv[1]):
            self.requests.append(UringRequest(
                tid=self._maps.get("qt", {}).get(req, 0), submit_ns=self.to_wall(t),
                complete_ns=None, ring=self._maps.get("qc", {}).get(req, 0),
                user_data=self._maps.get("qu", {}).get(req, 0),
                opcode=nm.uring_opcode(self._maps.get("qo", {}).get(req, -1)),
                result=None, cflags=None))
            self.stats.uring_requests += 1
            self.stats.uring_in_flight += 1


def _result(row: Row, ret: int) -> None:
    if -4095 <= ret < 0:
        code = -ret
        row.errno = nm.errno_name(code)
        row.result = None if code in nm.RESTART_ERRNOS else -1
    else:
        row.result = ret


def _timeout(v: int) -> int:
    return -1 if v < 0 else v


def decode(row: Row, a: list[int], extra: dict[str, object]) -> None:
    """Fill ``row``'s columns from the probe's slots (``a``) and the lines before it."""
    name, ok = row.name, row.result is not None and row.result >= 0
    if name in ("epoll_wait", "epoll_pwait", "epoll_pwait2"):
        row.epfd = row.fd = a[0]
        row.maxevents = a[1]
        row.timeout_ns = _timeout(a[2]) if name == "epoll_pwait2" else (
            -1 if a[2] < 0 else a[2] * 1_000_000)
        ready = extra.get("ready")
        if isinstance(ready, list):
            row.extra["ready"] = " ".join(str(d) for d in ready)
        row.args = f"epfd={a[0]}, maxevents={a[1]}"
    elif name == "epoll_ctl":
        row.epfd, row.op, row.fd = a[0], nm.EPOLL_CTL_OPS.get(a[1], str(a[1])), a[2]
        row.events = None if a[3] < 0 or row.op == "EPOLL_CTL_DEL" else nm.epoll_events(a[3])
        row.extra["data"] = str(a[4] & (2**64 - 1))
        row.args = f"data={a[4] & (2**64 - 1)}"
    elif name == "epoll_create1":
        row.flags = "EPOLL_CLOEXEC" if a[0] & 0o2000000 else "0"
    elif name == "poll":
        row.maxevents, row.timeout_ns = a[0], (-1 if a[1] < 0 else a[1] * 1_000_000)
    elif name in ("ppoll", "select", "pselect6"):
        row.maxevents, row.timeout_ns = a[0], _timeout(a[1])
    elif name == "io_uring_setup":
        row.count, row.flags = a[0], nm.uring_setup_flags(a[1])
    elif name == "io_uring_enter":
        row.fd, row.to_submit, row.min_complete = a[0], a[1], a[2]
        row.flags = nm.uring_enter_flags(a[3])
    elif name == "io_uring_register":
        row.fd, row.op, row.count = a[0], nm.URING_REGISTER_OPS.get(a[1], str(a[1])), a[2]
    elif name in ("accept", "accept4"):
        row.fd = a[0]
        if name == "accept4":
            row.flags = nm.sock_flags(a[1])
        peer = extra.get("peer")
        if isinstance(peer, list):
            row.addr = nm.sockaddr_text(*peer)
            row.extra["peer"] = nm.endpoint(*peer) or ""
    elif name == "connect":
        row.fd, row.addr = a[0], nm.sockaddr_text(*a[1:6])
    elif name in ("read", "write"):
        row.fd, row.count = a[0], a[1]
    elif name in ("recvfrom", "sendto"):
        row.fd, row.count, row.flags = a[0], a[1], nm.msg_flags(a[2])
        if name == "sendto" and a[3]:
            row.addr = nm.sockaddr_text(*a[3:8])
    elif name == "openat":
        row.flags = nm.open_flags(a[1])
        path = extra.get("path")
        row.path = path if isinstance(path, str) else None
    elif name == "close":
        row.fd = a[0]
    elif name == "socket":
        row.extra["socket"] = nm.socket_kind(a[0], a[1])
        row.flags = nm.sock_flags(a[1] & ~0xF)
    elif name == "getsockname":
        row.fd = a[0]
        peer = extra.get("peer")
        if isinstance(peer, list):
            row.addr = nm.sockaddr_text(*peer)
            row.extra["local"] = nm.endpoint(*peer) or ""
    elif name == "bind":
        row.fd, row.addr = a[0], nm.sockaddr_text(*a[1:6])
        row.extra["local"] = nm.endpoint(*a[1:6]) or ""
    elif name == "nanosleep":
        row.timeout_ns = _timeout(a[0])
    elif name == "futex":
        row.addr, row.op = hex(a[0] & (2**64 - 1)), nm.futex_op(a[1])
        if (a[1] & 127) == 0:
            row.timeout_ns = _timeout(a[2])
    if ok and name in ("openat", "accept", "accept4", "epoll_create1", "io_uring_setup",
                       "socket"):
        assert row.result is not None
        row.new_fd = row.result


def iter_rows(parser: EbpfParser, lines: Iterable[str]) -> Iterator[Row]:
    """Rows as their exits were printed (per CPU: not in entry-time order), then
    the calls left open at the end."""
    for line in lines:
        row = parser.feed(line)
        if row is not None:
            yield row
    yield from parser.finish()
