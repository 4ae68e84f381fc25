"""Go's reference parser as a test oracle.

``go tool trace -d=parsed FILE`` (Go 1.27) prints every event with
``fmt.Println(ev.String())``; this module parses that text back into
:class:`GoEvent`, runs the tool with an on-disk cache, and converts our own
decoded events into the same form so that the two can be compared field by
field.

Strings: Go prints most strings with ``%q`` (``strconv.Quote``); we undo that
exactly, including ``\\xHH`` escapes of bytes that are not valid UTF-8. Such
bytes become lone surrogates (Python's ``surrogateescape``), so a decoder that
turns trace bytes into ``str`` with ``errors="surrogateescape"`` compares
equal. Stack frame names, metric/attribute string values and experimental
names are printed raw (not quoted) by Go; raw text is read with the same
error handler. A raw string that contains a newline cannot be recovered from
Go's output (Go's format is ambiguous there).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from collectors.gotrace.model import NONE, ClockSnapshot, Event, Frame

from .gostrings import QUOTED, take_quoted

Stack = tuple[Frame, ...]
AttrValue = int | str | None



@dataclass(frozen=True, slots=True)
class GoEvent:
    """One event as Go prints it; :class:`model.Event` with stacks resolved
    to frame tuples and lists turned into tuples (hashable, comparable)."""

    kind: str
    ts: int
    m: int = NONE
    p: int = NONE
    g: int = NONE
    stack: Stack = ()
    resource: str = ""
    rid: int = NONE
    from_state: str = ""
    to_state: str = ""
    reason: str = ""
    tstack: Stack = ()
    name: str = ""
    value: AttrValue = None
    scope: str = ""
    scope_id: int = NONE
    attrs: tuple[tuple[str, AttrValue], ...] = ()
    task: int = 0
    parent: int = 0
    category: str = ""
    message: str = ""
    n: int = 0
    clock: ClockSnapshot | None = None


# --------------------------------------------------------------------------
# Values, resources, clock

_UINT_VALUE = re.compile(r"Value\{Uint64\((\d+)\)\}")


def _parse_value(text: str) -> AttrValue:
    """A ``trace.Value`` printed with ``%s`` (strings are printed raw)."""
    m = _UINT_VALUE.fullmatch(text)
    if m is not None:
        return int(m.group(1))
    if text == "Value{Bad}":
        return None
    return text


_RESOURCE = re.compile(r"(Goroutine|Proc|Thread)\((-?\d+)\)")
_SCOPES = {"Goroutine": "goroutine", "Proc": "proc", "Thread": "thread"}


def _parse_resource(text: str) -> tuple[str, int]:
    """``ResourceID.String()`` -> (scope, id); ``None`` is the global scope."""
    if text == "None":
        return "global", NONE
    m = _RESOURCE.fullmatch(text)
    if m is None:
        raise ValueError(f"bad resource {text!r}")
    return _SCOPES[m.group(1)], int(m.group(2))


_RFC3339 = re.compile(
    r"(-?\d{4,})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)"
)


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 in the proleptic Gregorian calendar, any year."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def parse_rfc3339nano(text: str) -> int:
    """Go's ``time.RFC3339Nano`` text -> ns since the Unix epoch, exactly."""
    m = _RFC3339.fullmatch(text)
    if m is None:
        raise ValueError(f"bad RFC3339Nano time {text!r}")
    year, month, day, hh, mm, ss = (int(m.group(i)) for i in range(1, 7))
    frac = m.group(7) or ""
    ns = int(frac.ljust(9, "0")) if frac else 0
    secs = _days_from_civil(year, month, day) * 86400 + hh * 3600 + mm * 60 + ss
    zone = m.group(8)
    if zone != "Z":
        off = int(zone[1:3]) * 3600 + int(zone[4:6]) * 60
        secs -= off if zone[0] == "+" else -off
    return secs * 1_000_000_000 + ns


# --------------------------------------------------------------------------
# Event lines

_HEAD = re.compile(r"M=(-?\d+) P=(-?\d+) G=(-?\d+) (\w+) Time=(-?\d+)")
_SYNC = re.compile(r" N=(\d+)(?: Trace=(-?\d+) Mono=(\d+) Wall=(\S+))?")
_TRANSITION = re.compile(r" (GoID|ProcID)=(-?\d+) (\w+)->(\w+) Reason=")
_TASK = re.compile(r" ID=(\d+) Parent=(\d+) Type=")
_TASKID = re.compile(r" Task=(\d+) ")


def _expect(s: str, pos: int, lit: str) -> int:
    if not s.startswith(lit, pos):
        raise ValueError(f"expected {lit!r} at {pos} in {s!r}")
    return pos + len(lit)


def _parse_attrs(s: str, pos: int) -> tuple[tuple[tuple[str, AttrValue], ...], int]:
    """RangeEnd's ``Attributes=["name"=Value ...]``, from just after the ``[``
    to the ``]`` that ends the line."""
    if not s.endswith("]"):
        raise ValueError(f"unterminated attributes in {s!r}")
    close = len(s) - 1
    attrs: list[tuple[str, AttrValue]] = []
    while pos < close:
        if attrs:
            pos = _expect(s, pos, " ")
        name, pos = take_quoted(s, pos)
        pos = _expect(s, pos, "=")
        # A raw string value ends where the next ` "name"=` starts, or at the `]`.
        end = close
        for nxt in re.finditer(' "', s[pos:close]):
            q = QUOTED.match(s, pos + nxt.start() + 1)
            if q is not None and s.startswith("=", q.end()):
                end = pos + nxt.start()
                break
        attrs.append((name, _parse_value(s[pos:end])))
        pos = end
    return tuple(attrs), _expect(s, pos, "]")


def _parse_head(line: str) -> dict[str, Any]:
    """The first line of one event -> GoEvent keyword arguments (no stacks)."""
    h = _HEAD.match(line)
    if h is None:
        raise ValueError(f"not an event line: {line!r}")
    kind = h.group(4)
    f: dict[str, Any] = {
        "kind": kind,
        "ts": int(h.group(5)),
        "m": int(h.group(1)),
        "p": int(h.group(2)),
        "g": int(h.group(3)),
    }
    pos = h.end()
    if kind == "StateTransition":
        t = _TRANSITION.match(line, pos)
        if t is None:
            # Go prints only the reason for resources other than goroutines/procs.
            pos = _expect(line, pos, " Reason=")
        else:
            f["resource"] = "goroutine" if t.group(1) == "GoID" else "proc"
            f["rid"] = int(t.group(2))
            f["from_state"] = t.group(3)
            f["to_state"] = t.group(4)
            pos = t.end()
        f["reason"], pos = take_quoted(line, pos)
    elif kind == "Metric":
        pos = _expect(line, pos, " Name=")
        f["name"], pos = take_quoted(line, pos)
        pos = _expect(line, pos, " Value=")
        f["value"], pos = _parse_value(line[pos:]), len(line)
    elif kind == "Label":
        pos = _expect(line, pos, " Label=")
        f["name"], pos = take_quoted(line, pos)
        pos = _expect(line, pos, " Resource=")
        f["scope"], f["scope_id"] = _parse_resource(line[pos:])
        pos = len(line)
    elif kind in ("RangeBegin", "RangeActive", "RangeEnd"):
        pos = _expect(line, pos, " Name=")
        f["name"], pos = take_quoted(line, pos)
        pos = _expect(line, pos, " Scope=")
        end = line.find(" ", pos)
        end = len(line) if end < 0 else end
        f["scope"], f["scope_id"] = _parse_resource(line[pos:end])
        pos = end
        if kind == "RangeEnd":
            pos = _expect(line, pos, " Attributes=[")
            f["attrs"], pos = _parse_attrs(line, pos)
    elif kind in ("TaskBegin", "TaskEnd"):
        t = _TASK.match(line, pos)
        if t is None:
            raise ValueError(f"bad task event {line!r}")
        f["task"], f["parent"] = int(t.group(1)), int(t.group(2))
        f["name"], pos = take_quoted(line, t.end())
    elif kind in ("RegionBegin", "RegionEnd"):
        t = _TASKID.match(line, pos)
        if t is None:
            raise ValueError(f"bad region event {line!r}")
        f["task"] = int(t.group(1))
        pos = _expect(line, t.end(), "Type=")
        f["name"], pos = take_quoted(line, pos)
    elif kind == "Log":
        t = _TASKID.match(line, pos)
        if t is None:
            raise ValueError(f"bad log event {line!r}")
        f["task"] = int(t.group(1))
        pos = _expect(line, t.end(), "Category=")
        f["category"], pos = take_quoted(line, pos)
        pos = _expect(line, pos, " Message=")
        f["message"], pos = take_quoted(line, pos)
    elif kind == "Sync":
        t = _SYNC.match(line, pos)
        if t is None:
            raise ValueError(f"bad sync event {line!r}")
        f["n"] = int(t.group(1))
        if t.group(2) is not None:
            f["clock"] = ClockSnapshot(
                int(t.group(2)), int(t.group(3)), parse_rfc3339nano(t.group(4))
            )
        pos = t.end()
    elif kind == "Experimental":
        pos = _expect(line, pos, " Name=")
        end = line.find(" Args=[", pos)
        if end < 0 or not line.endswith("]"):
            raise ValueError(f"bad experimental event {line!r}")
        f["name"] = line[pos:end]
        body = line[end + len(" Args=[") : -1]
        args: list[tuple[str, AttrValue]] = []
        if body:
            for part in body.split(", "):
                an, _, av = part.partition("=")
                args.append((an, _parse_value(av)))
        f["attrs"] = tuple(args)
        pos = len(line)
    if pos != len(line):
        raise ValueError(f"unexpected trailing text {line[pos:]!r} in {line!r}")
    return f


_EVENT_START = re.compile(r"^M=", re.M)
_FRAME_FUNC = re.compile(r"\t(.*) @ 0x([0-9a-f]+)", re.S)
_FRAME_FILE = re.compile(r"\t\t(.*):(\d+)", re.S)


def _parse_stacks(lines: list[str]) -> dict[str, tuple[Frame, ...]]:
    """An event's lines after its first, in the plain form only: ``Stack=`` or
    ``TransitionStack=`` lines, each followed by pairs of ``\tfunc @ 0xpc`` and
    ``\t\tfile:line``."""
    out: dict[str, tuple[Frame, ...]] = {}
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if line == "Stack=" or line == "TransitionStack=":
            frames: list[Frame] = []
            key = "stack" if line == "Stack=" else "tstack"
            i += 1
            while i + 1 < n and lines[i].startswith("\t"):
                m, f = _FRAME_FUNC.fullmatch(lines[i]), _FRAME_FILE.fullmatch(lines[i + 1])
                if m is None or f is None:
                    raise ValueError("not the plain form")
                frames.append(Frame(int(m.group(2), 16), m.group(1), f.group(1), int(f.group(2))))
                i += 2
            out[key] = tuple(frames)
        elif line == "":
            i += 1
        else:
            raise ValueError("not the plain form")
    return out


def _parse_by_event(text: str) -> list[GoEvent]:
    """Events as blocks (an ``M=`` line and its stacks), each distinct block of
    stacks parsed once; ValueError on anything but the plain form."""
    starts = [m.start() for m in _EVENT_START.finditer(text)]
    if text[:starts[0] if starts else len(text)].strip("\n"):
        raise ValueError("text before the first event")
    events: list[GoEvent] = []
    # A trace's events share few stacks: each stack's text is parsed once.
    stacks: dict[str, dict[str, tuple[Frame, ...]]] = {}
    for k, s in enumerate(starts):
        e = starts[k + 1] if k + 1 < len(starts) else len(text)
        nl = text.find("\n", s, e)
        f = _parse_head(text[s:e] if nl < 0 else text[s:nl])
        rest = "" if nl < 0 else text[nl + 1:e]
        if rest:
            got = stacks.get(rest)
            if got is None:
                got = stacks[rest] = _parse_stacks(rest.split("\n"))
            f.update(got)
        events.append(GoEvent(**f))
    return events


def cache_dir() -> str:
    """``$GMPSCOPE_CACHE`` or ``~/.cache/gmpscope``."""
    return os.environ.get("GMPSCOPE_CACHE", os.path.expanduser("~/.cache/gmpscope"))


def oracle_go() -> str:
    """Path of the go1.27.3 binary (``$GMPSCOPE_ORACLE_GO`` overrides)."""
    override = os.environ.get("GMPSCOPE_ORACLE_GO")
    if override:
        return override
    from tools.gotoolchains import ORACLE_VERSION, go_binary

    return str(go_binary(ORACLE_VERSION))


def go_env() -> dict[str, str]:
    """Environment for running the Go toolchain offline and reproducibly."""
    base = cache_dir()
    env = dict(os.environ)
    env.update(
        GOTOOLCHAIN="local",
        GOTELEMETRY="off",
        GOFLAGS="-mod=mod",
        GOPROXY="off",
        GOCACHE=os.path.join(base, "gocache"),
        GOPATH=os.path.join(base, "gopath"),
        TZ="UTC",  # Wall= is printed in local time; UTC keeps it "...Z"
    )
    return env


_CACHE_MAGIC = b"gmpscope-parsed 1"


_tool_paths: dict[tuple[str, str], str] = {}


def trace_tool() -> list[str]:
    """Command prefix for Go's trace tool.

    ``go tool trace`` costs about a second per call (the go command checks and
    links the tool each time); ``go tool -n trace`` names the cached binary,
    which runs in milliseconds. Fall back to ``go tool trace`` if that fails.
    """
    go = oracle_go()
    key = (go, os.path.join(cache_dir(), "gocache"))
    path = _tool_paths.get(key)
    if path is None or not os.path.exists(path):
        proc = subprocess.run(
            [go, "tool", "-n", "trace"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=go_env(),
            check=False,
        )
        path = proc.stdout.decode(errors="replace").strip()
        if proc.returncode != 0 or not path or not os.path.exists(path):
            return [go, "tool", "trace"]
        _tool_paths[key] = path
    return [path]


def _run_go_parsed(trace_path: str) -> tuple[int, bytes, bytes]:
    proc = subprocess.run(
        [*trace_tool(), "-d=parsed", trace_path],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=go_env(),
        check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr


def go_parsed_raw(trace_path: str) -> tuple[int, bytes, bytes]:
    """(exit status, stdout, stderr) of ``go tool trace -d=parsed``, cached
    by the trace's sha256 in ``$GMPSCOPE_CACHE/parsed/<sha256>.txt.gz``."""
    with open(trace_path, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    d = os.path.join(cache_dir(), "parsed")
    path = os.path.join(d, digest + ".txt.gz")
    try:
        with gzip.open(path, "rb") as fh:
            blob = fh.read()
        head, _, rest = blob.partition(b"\n")
        magic, rc_s, out_len_s = head.rsplit(b" ", 2)
        if magic == _CACHE_MAGIC:
            out_len = int(out_len_s)
            return int(rc_s), rest[:out_len], rest[out_len:]
    except (OSError, ValueError, EOFError):
        pass
    rc, out, err = _run_go_parsed(trace_path)
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as raw, gzip.open(raw, "wb", compresslevel=6) as gz:
            gz.write(_CACHE_MAGIC + b" %d %d\n" % (rc, len(out)))
            gz.write(out)
            gz.write(err)
        os.replace(tmp, path)  # atomic: parallel test runs may race here
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return rc, out, err


def go_parsed(trace_path: str | os.PathLike[str]) -> tuple[list[GoEvent], str | None]:
    """Events Go 1.27 reads from a trace file and the error it printed
    (``None`` when it read the whole trace). On error the events are the
    ones Go printed before failing."""
    rc, out, err = go_parsed_raw(os.fspath(trace_path))
    events = parse_go_parsed(out.decode("utf-8", "surrogateescape"))
    if is_v1_trace(trace_path):
        events = ordered_v1_start(events)
    if rc == 0:
        return events, None
    msg = err.decode("utf-8", "surrogateescape").rstrip("\n")
    return events, msg or f"go tool trace exited with status {rc}"


def is_v1_trace(trace_path: str | os.PathLike[str]) -> bool:
    """Whether the file is a trace of Go 1.21 or older (``go 1.NN trace``, NN <= 21)."""
    with open(trace_path, "rb") as f:
        head = f.read(16)
    m = re.match(rb"go 1\.(\d+) trace\x00", head)
    return m is not None and int(m.group(1)) <= 21


def _existed_at_start(e: GoEvent) -> bool:
    # What Go's v1 reader makes for a goroutine that existed when tracing began
    # and had no GoWaiting, GoInSyscall or GoStart: Undetermined->Runnable, no context.
    return (e.kind == "StateTransition" and e.resource == "goroutine"
            and e.from_state == "Undetermined" and e.to_state == "Runnable"
            and e.m == NONE and e.p == NONE and e.g == NONE)


def ordered_v1_start(events: list[GoEvent]) -> list[GoEvent]:
    """Go's events of a v1 trace with each run of goroutines-existing-at-start
    in goroutine id order, each event taking the time of the slot it moves to.

    Go's v1 reader (``internal/trace/tracev1.go``) emits them by ranging over a
    Go map, so their order (and the times, made increasing one ns apart) is
    random from one run of ``go tool trace`` to the next; ours is by id."""
    out = list(events)
    i = 0
    while i < len(out):
        if not _existed_at_start(out[i]):
            i += 1
            continue
        j = i
        while j < len(out) and _existed_at_start(out[j]):
            j += 1
        slots = [e.ts for e in out[i:j]]
        run = sorted(out[i:j], key=lambda e: e.rid)
        out[i:j] = [replace(e, ts=t) for e, t in zip(run, slots, strict=True)]
        i = j
    return out


# --------------------------------------------------------------------------
# Ours -> Go's form


def ours_as_go(trace: Any, events: Iterable[Event]) -> list[GoEvent]:
    """Convert our events to :class:`GoEvent` (stack ids resolved through
    ``trace.stacks``; iterate the decoder fully before calling if the stack
    table fills lazily)."""
    frames = trace.stacks.frames
    out: list[GoEvent] = []
    for e in events:
        out.append(
            GoEvent(
                kind=e.kind,
                ts=e.ts,
                m=e.m,
                p=e.p,
                g=e.g,
                stack=tuple(frames(e.stack)) if e.stack else (),
                resource=e.resource,
                rid=e.rid,
                from_state=e.from_state,
                to_state=e.to_state,
                reason=e.reason,
                tstack=tuple(frames(e.tstack)) if e.tstack else (),
                name=e.name,
                value=e.value,
                scope=e.scope,
                scope_id=e.scope_id,
                attrs=tuple((a, v) for a, v in e.attrs),
                task=e.task,
                parent=e.parent,
                category=e.category,
                message=e.message,
                n=e.n,
                clock=e.clock,
            )
        )
    return out


def decode_ours(data: bytes) -> tuple[list[GoEvent], Any]:
    """Decode ``data`` with our decoder; return (events as GoEvent, DecodedTrace).

    Exceptions from the decoder propagate.
    """
    from collectors.gotrace.reader import open_trace

    tr = open_trace(data)
    evs = list(tr.events())
    return ours_as_go(tr, evs), tr


def _parse_line_by_line(text: str) -> list[GoEvent]:
    """parse_go_parsed's reference form, one line at a time: what an output the
    fast form does not take is read by, down to its errors."""
    events: list[GoEvent] = []
    cur: dict[str, Any] | None = None
    frames: list[Frame] | None = None
    target = ""
    pending: tuple[str, int] | None = None  # (func, pc) waiting for its file line

    def flush() -> None:
        if cur is not None:
            events.append(GoEvent(**cur))

    # Only "\n" separates lines: Go's raw strings may hold \r, \v, \u2028 ...
    for lineno, line in enumerate(text.split("\n"), 1):
        try:
            if pending is not None:
                m = _FRAME_FILE.fullmatch(line)
                if m is None:
                    raise ValueError(f"expected a frame's file:line, got {line!r}")
                assert frames is not None
                frames.append(Frame(pending[1], pending[0], m.group(1), int(m.group(2))))
                pending = None
                continue
            if line.startswith("M="):
                if cur is not None and target:
                    assert frames is not None
                    cur[target] = tuple(frames)
                flush()
                cur, frames, target = _parse_head(line), None, ""
            elif line == "Stack=" or line == "TransitionStack=":
                if cur is None:
                    raise ValueError("stack before any event")
                if target:
                    assert frames is not None
                    cur[target] = tuple(frames)
                target = "stack" if line == "Stack=" else "tstack"
                frames = []
            elif line.startswith("\t"):
                m = _FRAME_FUNC.fullmatch(line)
                if m is None or frames is None:
                    raise ValueError(f"bad frame line {line!r}")
                pending = (m.group(1), int(m.group(2), 16))
            elif line == "":
                continue
            else:
                raise ValueError(f"unexpected line {line!r}")
        except ValueError as e:
            raise ValueError(f"-d=parsed line {lineno}: {e}") from None
    if pending is not None:
        raise ValueError("output ends inside a stack frame")
    if cur is not None and target:
        assert frames is not None
        cur[target] = tuple(frames)
    flush()
    return events


def parse_go_parsed(text: str) -> list[GoEvent]:
    """Parse the stdout of ``go tool trace -d=parsed`` into events."""
    try:
        return _parse_by_event(text)
    except ValueError:
        return _parse_line_by_line(text)
