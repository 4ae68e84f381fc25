"""Which descriptors an epoll wait returned ready, for either backend.

A wait returns ``epoll_event``s whose ``data`` is whatever the program stored
with ``epoll_ctl``: C programs usually store the fd, Go stores a tagged pointer
to its ``pollDesc``. So a returned event is mapped back to its descriptor
through the ``epoll_ctl(ADD|MOD)`` that registered that ``data`` on the same
epoll instance, the latest one before the wait returned (a ``DEL`` forgets it).
An event whose registration was not recorded (made before attaching) is ``?``.

The raw values come from each backend: strace prints the returned array and
the ctl's event (``data={u32=.., u64=N}``), read from ``args``; the eBPF probes
read both from the program's memory (``Row.extra["ready"]``, ``["data"]``).
The result is ``Row.ready_fds``: the descriptors in the order returned, comma
separated (``"7,9,?"``). strace prints at most ``-s`` (64) elements of an array,
so a wait that returned more has only its first 64 there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from collectors.poller.records import KIND_SYSCALL, Row

WAITS = frozenset({"epoll_wait", "epoll_pwait", "epoll_pwait2"})
_U64 = re.compile(r"u64=(\d+)")


def _wait_data(row: Row) -> list[int] | None:
    raw = row.extra.get("ready")
    if raw is not None:
        return [int(x) for x in raw.split()] if raw else []
    if row.result is None or row.result <= 0:
        return None
    return [int(x) for x in _U64.findall(row.args)]


def _ctl_data(row: Row) -> int | None:
    raw = row.extra.get("data")
    if raw is not None:
        return int(raw)
    m = _U64.search(row.args)
    return int(m.group(1)) if m else None


@dataclass
class ReadyResolver:
    """Collects the waits and ctls of a recording (in any order), then resolves."""

    _ctls: list[tuple[int, int, int, int, str]] = field(default_factory=list)
    _waits: list[tuple[int, int, int, list[int]]] = field(default_factory=list)

    def note(self, index: int, row: Row) -> None:
        """Remember row number ``index`` if it is an epoll wait with events or a ctl."""
        if row.kind != KIND_SYSCALL or row.epfd is None:
            return
        if row.name in WAITS:
            data = _wait_data(row)
            if data:
                self._waits.append((row.ts_ns + (row.duration_ns or 0), index, row.epfd, data))
        elif row.name == "epoll_ctl" and row.result == 0 and row.fd is not None:
            d = _ctl_data(row)
            if d is not None or row.op == "EPOLL_CTL_DEL":
                self._ctls.append((row.ts_ns, row.epfd, row.fd, -1 if d is None else d,
                                   row.op or ""))

    def resolve(self) -> dict[int, str]:
        """Row number -> ``ready_fds`` for every wait noted."""
        # Ctls at their entry, waits at their return: an fd added while a wait
        # blocked can be among the events that wait returns.
        events = sorted([(c[0], 0, c) for c in self._ctls] + [(w[0], 1, w) for w in self._waits],
                        key=lambda e: (e[0], e[1]))
        by_ep: dict[int, dict[int, int]] = {}
        fd_data: dict[tuple[int, int], int] = {}
        out: dict[int, str] = {}
        for _, kind, ev in events:
            if kind == 0:
                _, epfd, fd, data, op = ev  # type: ignore[misc]
                reg = by_ep.setdefault(epfd, {})
                old = fd_data.pop((epfd, fd), None)
                if old is not None and reg.get(old) == fd:
                    del reg[old]
                if op != "EPOLL_CTL_DEL":
                    reg[data] = fd
                    fd_data[(epfd, fd)] = data
            else:
                _, index, epfd, datas = ev  # type: ignore[misc]
                reg = by_ep.get(epfd, {})
                out[index] = ",".join(str(reg[d]) if d in reg else "?" for d in datas)
        return out
