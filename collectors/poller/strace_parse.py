"""Parse strace output into Rows: a pure, streaming parser.

Expected flags (what :mod:`collectors.poller.recorder` runs)::

    strace -f -q --absolute-timestamps=format:unix,precision:ns \\
           --syscall-times=ns -yy -o FILE ...

so every line is ``TID SEC.NSEC BODY`` (``-ttt`` microsecond timestamps and
``-T`` microsecond durations parse too; so does ``[pid TID]`` and no pid
column at all). Bodies:

- ``name(args) = RET [ERRNO (text)] [(info)] <DUR>``: a whole call;
- ``name(args <unfinished ...>`` then, later and usually after other
  threads' lines, ``<... name resumed>rest) = RET ... <DUR>``: one call
  split because another thread printed in between. The halves are joined
  per thread (a thread is in at most one call); the row's time is the
  entry time and the argument text is the two halves concatenated;
- ``--- SIGURG {si_signo=...} ---``: a signal delivered to the thread;
- ``+++ exited with 0 +++`` / ``+++ killed by SIGKILL +++``: a thread exit.

Any other line (strace's own messages, a line cut short when strace was
killed) is counted as unknown and kept as a sample; it never stops parsing.
"""

from __future__ import annotations

import gzip
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from collectors.poller.decode import decode_args
from collectors.poller.records import KIND_EXIT, KIND_SIGNAL, KIND_SYSCALL, Row
from collectors.poller.syntax import parse_decimal_ns, scan_to_close, split_args

_LINE = re.compile(
    r"^(?:\[pid\s+(?P<pid1>\d+)\]\s+|(?P<pid2>\d+)\s+)?"
    r"(?P<sec>\d+)\.(?P<frac>\d+)\s(?P<body>.*)$",
    re.S,
)
_SIGNAL = re.compile(r"^--- (?P<sig>SIG\w+|stopped by SIG\w+)(?: (?P<info>.*))? ---$", re.S)
_EXITED = re.compile(r"^\+\+\+ exited with (?P<code>-?\d+) \+\+\+$")
_KILLED = re.compile(r"^\+\+\+ killed by (?P<sig>SIG\w+)(?P<core> \(core dumped\))? \+\+\+$")
_RESUMED = re.compile(r"^<\.\.\. (?P<name>\w+) resumed>(?P<rest>.*)$", re.S)
_CALL = re.compile(r"^(?P<name>\w+)\((?P<rest>.*)$", re.S)
_UNFINISHED = " <unfinished ...>"
_DETACHED = " <detached ...>"
_DURATION = re.compile(r"\s<(?P<sec>\d+)\.(?P<frac>\d+)>$")
_RET = re.compile(r"^(?P<ret>\?|-?\d+|0x[0-9a-fA-F]+)")
_ERRNO = re.compile(r"^\s+(?P<errno>E[A-Z0-9]+)(?:\s+\((?P<msg>[^)]*)\))?")
#: Returned by _body for the first half of a split call: known syntax, no row yet.
_HALF = Row(ts_ns=0, tid=0, kind=KIND_SYSCALL, name="<unfinished>")
#: How many unknown lines to keep verbatim for the report.
UNKNOWN_SAMPLES = 20


@dataclass
class ParseStats:
    """What the parser saw: enough to judge how complete a recording is."""

    lines: int = 0
    rows: int = 0
    syscalls: int = 0
    signals: int = 0
    exits: int = 0
    unknown: int = 0
    unfinished: int = 0  # "<unfinished ...>" halves seen
    resumed: int = 0  # "<... resumed>" halves joined to their start
    orphan_resumed: int = 0  # a resumption whose start was never seen (attach mode)
    never_resumed: int = 0  # a start still pending at the end (recording stopped)
    detached: int = 0  # "<detached ...>": strace let go of the thread inside the call
    unknown_samples: list[str] = field(default_factory=list)
    by_name: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form for meta.json."""
        return {
            "lines": self.lines,
            "rows": self.rows,
            "syscalls": self.syscalls,
            "signals": self.signals,
            "exits": self.exits,
            "unknown": self.unknown,
            "unfinished": self.unfinished,
            "resumed": self.resumed,
            "orphan_resumed": self.orphan_resumed,
            "never_resumed": self.never_resumed,
            "detached": self.detached,
            "unknown_samples": list(self.unknown_samples),
            "by_name": dict(sorted(self.by_name.items())),
        }


@dataclass(slots=True)
class _Pending:
    ts_ns: int
    name: str
    args_head: str
    partial: bool


class StraceParser:
    """Feed lines in file order; collect finished rows from :meth:`feed` and :meth:`finish`."""

    def __init__(self, default_tid: int = 0, attached: bool = False) -> None:
        self.default_tid = default_tid
        # Attached to a running process: each thread's first call may have
        # begun before strace arrived, so its start time is not known.
        self.attached = attached
        self._seen_tids: set[int] = set()
        self.stats = ParseStats()
        self._pending: dict[int, _Pending] = {}

    def feed(self, line: str) -> Row | None:
        """Parse one line; returns a finished row, or None (half call, unknown line)."""
        line = line.rstrip("\n")
        if not line.strip():
            return None
        self.stats.lines += 1
        m = _LINE.match(line)
        row: Row | None = None
        if m:
            tid_s = m.group("pid1") or m.group("pid2")
            tid = int(tid_s) if tid_s else self.default_tid
            ts = parse_decimal_ns(m.group("sec"), m.group("frac"))
            row = self._body(tid, ts, m.group("body"))
            if row is _HALF:
                return None
        if row is None:
            self._unknown(line)
            return None
        self._count(row)
        return row

    def _first_of_thread(self, tid: int) -> bool:
        if tid in self._seen_tids:
            return False
        self._seen_tids.add(tid)
        return self.attached

    def finish(self) -> list[Row]:
        """Rows for calls still unfinished at the end of the output (result unknown)."""
        rows = []
        for tid, p in sorted(self._pending.items()):
            self.stats.never_resumed += 1
            row = self._cut_short(tid, p)
            self._count(row)
            rows.append(row)
        self._pending.clear()
        return rows

    def _cut_short(self, tid: int, p: _Pending) -> Row:
        """A call whose end strace never printed: no result, no duration."""
        row = Row(ts_ns=p.ts_ns, tid=tid, kind=KIND_SYSCALL, name=p.name,
                  args=p.args_head.rstrip().rstrip(","), partial=p.partial)
        decode_args(row, split_args(row.args), None)
        return row

    def _unknown(self, line: str) -> None:
        self.stats.unknown += 1
        if len(self.stats.unknown_samples) < UNKNOWN_SAMPLES:
            self.stats.unknown_samples.append(line[:300])

    def _count(self, row: Row) -> None:
        self.stats.rows += 1
        if row.kind == KIND_SYSCALL:
            self.stats.syscalls += 1
            self.stats.by_name[row.name] += 1
        elif row.kind == KIND_SIGNAL:
            self.stats.signals += 1
        else:
            self.stats.exits += 1

    def _body(self, tid: int, ts: int, body: str) -> Row | None:
        if body.startswith("---"):
            sm = _SIGNAL.match(body)
            if not sm:
                return None
            return Row(ts_ns=ts, tid=tid, kind=KIND_SIGNAL,
                       name=sm.group("sig").removeprefix("stopped by "),
                       args=sm.group("info") or "")
        if body.startswith("+++"):
            em = _EXITED.match(body)
            if em:
                return Row(ts_ns=ts, tid=tid, kind=KIND_EXIT, name="exited",
                           result=int(em.group("code")))
            km = _KILLED.match(body)
            if km:
                return Row(ts_ns=ts, tid=tid, kind=KIND_EXIT, name="killed",
                           args=km.group("sig") + (" core dumped" if km.group("core") else ""))
            return None
        rm = _RESUMED.match(body)
        if rm:
            return self._resumed(tid, ts, rm.group("name"), rm.group("rest"))
        cm = _CALL.match(body)
        if not cm:
            return None
        name, rest = cm.group("name"), cm.group("rest")
        partial = self._first_of_thread(tid)
        if rest.endswith(_UNFINISHED):
            self._pending[tid] = _Pending(ts, name, rest[: -len(_UNFINISHED)], partial)
            self.stats.unfinished += 1
            return _HALF
        if rest.endswith(_DETACHED):
            # strace stopped (detached) while the call was in progress.
            self.stats.detached += 1
            return self._cut_short(tid, _Pending(ts, name, rest[: -len(_DETACHED)], partial))
        return self._complete(tid, ts, name, rest, partial=partial)

    def _resumed(self, tid: int, ts: int, name: str, rest: str) -> Row | None:
        # "<... futex resumed> <unfinished ...>) = ?": the thread died in the call.
        if rest.startswith(_UNFINISHED):
            rest = rest[len(_UNFINISHED):]
        pending = self._pending.pop(tid, None)
        if pending is not None and pending.name == name:
            self.stats.resumed += 1
            head = pending.args_head.rstrip()
            joined = head + (" " if head and not head.endswith("(") else "") + rest.lstrip()
            return self._complete(tid, pending.ts_ns, name, joined, partial=pending.partial)
        if pending is not None:  # a different call: keep both halves apart
            self._pending[tid] = pending
        self.stats.orphan_resumed += 1
        self._seen_tids.add(tid)
        row = self._complete(tid, ts, name, rest, partial=True)
        if row is not None and row.duration_ns is not None:
            row.ts_ns = ts - row.duration_ns
        return row

    def _complete(self, tid: int, ts: int, name: str, rest: str, partial: bool) -> Row | None:
        close = scan_to_close(rest)
        if close < 0:
            return None
        args_text = rest[:close].strip()
        tail = rest[close + 1 :]
        if not tail.lstrip().startswith("="):
            return None
        row = Row(ts_ns=ts, tid=tid, kind=KIND_SYSCALL, name=name, args=args_text,
                  partial=partial)
        ret_decor = _result(row, tail.lstrip()[1:].strip())
        decode_args(row, split_args(args_text), ret_decor)
        return row


def _result(row: Row, text: str) -> str | None:
    """Fill result/errno/duration from ``RET ... <DUR>``; returns the result's fd decoration."""
    dm = _DURATION.search(text)
    if dm:
        row.duration_ns = parse_decimal_ns(dm.group("sec"), dm.group("frac"))
        text = text[: dm.start()]
    m = _RET.match(text)
    if not m:
        return None
    ret = m.group("ret")
    if ret != "?":
        row.result = int(ret, 16) if ret.startswith("0x") else int(ret)
    rest = text[m.end():]
    decor = None
    if rest.startswith("<"):
        stop = _decoration_end(rest)
        decor = rest[1:stop]
        rest = rest[stop + 1 :]
    em = _ERRNO.match(rest)
    if em:
        row.errno = em.group("errno")
        rest = rest[em.end():]
    info = rest.strip()
    if info:
        row.extra["info"] = info
    return decor


def _decoration_end(text: str) -> int:
    """Index of the ``>`` closing the decoration that starts at ``text[0] == '<'``."""
    brackets = angles = 0
    for i, c in enumerate(text[1:], start=1):
        if c == "[":
            brackets += 1
        elif c == "]" and brackets:
            brackets -= 1
        elif c == "<" and not brackets:
            angles += 1
        elif c == ">" and not brackets:
            if not angles:
                return i
            angles -= 1
    return len(text)


def iter_rows(parser: StraceParser, lines: Iterable[str]) -> Iterator[Row]:
    """Rows as they complete (joined calls come out at their resumption, so
    not in entry-time order), then the calls left open at the end."""
    for line in lines:
        row = parser.feed(line)
        if row is not None:
            yield row
    yield from parser.finish()


def parse_lines(
    lines: Iterable[str], default_tid: int = 0, attached: bool = False
) -> tuple[list[Row], ParseStats]:
    """Parse a whole recording; rows sorted by entry time (then thread id)."""
    parser = StraceParser(default_tid, attached)
    rows = list(iter_rows(parser, lines))
    rows.sort(key=lambda r: (r.ts_ns, r.tid))
    return rows, parser.stats


def iter_file_lines(path: Path) -> Iterator[str]:
    """Lines of a strace output file, undecodable bytes escaped (strace escapes most)."""
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8", errors="backslashreplace") as gz:
            yield from gz
        return
    with open(path, encoding="utf-8", errors="backslashreplace") as fh:
        yield from fh


def parse_file(
    path: Path, default_tid: int = 0, attached: bool = False
) -> tuple[list[Row], ParseStats]:
    """Parse a strace output file (plain or .gz) written with the flags above."""
    return parse_lines(iter_file_lines(path), default_tid, attached)
