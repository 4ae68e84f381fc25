"""The bpftrace program of the eBPF backend, generated for one target process,
and the text lines both transports print (the ring buffer's loader,
``csrc/ringbuf_loader.c``, prints the same lines from ``csrc/syscalls.bpf.c``'s
records; :data:`ALL_CALLS` gives both their call codes and slot counts).

Every probe is filtered on the target's thread group id (bpftrace's ``pid``),
so nothing of any other process is recorded. Each covered system call has an
entry probe that keeps, per thread, the entry time and the arguments that
matter (``@t0``, ``@nr``, ``@a0``..``@a5``, a user pointer ``@p``) and an exit
probe that prints one line with all of them. Lines (space separated; the
parser is :mod:`collectors.poller.ebpf_parse`):

- ``B <mono>``: the program started (first line);
- ``S <code> <tid> <t0> <t1> <ret> <a0> ...``: a completed call (t0 0: its
  entry was before the probes were attached);
- ``R <tid> <events> <data>``: one ``epoll_event`` a wait returned, printed just
  before its ``S`` line by the same probe (so on the same CPU, in order);
- ``A <tid> <family> <port> <in4> <in6hi> <in6lo>``: the peer address an
  ``accept``/``accept4`` wrote, before its ``S`` line;
- ``O <tid> <path>``: ``openat``'s path, read at exit (the kernel has faulted
  the page in by then; at entry it may still be unmapped), before its ``S`` line;
- ``G <tid> <mono> <sig> <code>``: a signal delivered to a thread;
- ``X <tid> <mono> <exit_code> <group_dead>``: a thread exited;
- ``Q <tid> <t_submit> <t_complete> <ctx> <user_data> <opcode> <res> <flags>``:
  an io_uring request, from ``io_uring:io_uring_submit_req`` to
  ``io_uring:io_uring_complete``;
- ``C ...``: the canary (the recorder's own ``getppid``), the last probe: once
  it prints, every probe before it is attached.

Times are bpftrace's ``nsecs`` (``bpf_ktime_get_ns``, CLOCK_MONOTONIC); the
recorder maps them to the wall clock. At the end, the calls still in progress
(``@t0``, ``@nr``, ``@a0``..``@a3``) and the io_uring requests not yet completed
(``@qs``, ``@qo``, ``@qu``, ``@qt``, ``@qc``) are printed as bpftrace prints maps.
"""

from __future__ import annotations

from dataclasses import dataclass

from collectors.poller.records import COVERED_SYSCALLS

#: Pad of the canary line: bpftrace buffers its output file (``-B full``), so
#: the recorder calls getppid until enough canary lines have filled a buffer.
CANARY_PAD = "c" * 60


@dataclass(frozen=True)
class Call:
    """How one system call is probed."""

    name: str
    enter: tuple[str, ...] = ()  # bpftrace statements run at entry (may set @aN / @p)
    slots: int = 0  # how many of @a0.. the exit line prints
    at_exit: str = ""  # "ready" (epoll events), "peer" (accept's sockaddr), "path" (openat)


def _timespec(ptr: str, slot: int, *, usec: bool = False, cond: str = "") -> str:
    """Read a user timespec (or timeval) into @a<slot> as ns; -1 for a NULL pointer."""
    frac = "* 1000" if usec else ""
    guard = f"$t && {cond}" if cond else "$t"
    return (
        f"$t = (uint64){ptr}; if ({guard}) {{ @a{slot}[tid] = *(int64*)uptr($t) * 1000000000 "
        f"+ *(int64*)uptr($t + 8) {frac}; }} else {{ @a{slot}[tid] = -1; }}"
    )


def _sockaddr(ptr: str, first: int) -> str:
    """Read family, port (network order), IPv4 address and the IPv6 address's
    two halves of a user sockaddr into @a<first>..@a<first+4>."""
    a = [f"@a{first + i}[tid]" for i in range(5)]
    return (
        f"$s = (uint64){ptr}; if ($s) {{ {a[0]} = *(uint16*)uptr($s); "
        f"{a[1]} = *(uint16*)uptr($s + 2); {a[2]} = *(uint32*)uptr($s + 4); "
        f"{a[3]} = *(uint64*)uptr($s + 8); {a[4]} = *(uint64*)uptr($s + 16); }} "
        f"else {{ {a[0]} = 0; }}"
    )


#: The covered calls, in COVERED_SYSCALLS order (its index is the line's code).
CALLS: tuple[Call, ...] = (
    Call("epoll_create1", ("@a0[tid] = args->flags;",), 1),
    Call("epoll_ctl", (
        "@a0[tid] = args->epfd; @a1[tid] = args->op; @a2[tid] = args->fd;",
        "$e = (uint64)args->event; if ($e) { @a3[tid] = *(uint32*)uptr($e); "
        "@a4[tid] = *(uint64*)uptr($e + 4); } else { @a3[tid] = -1; @a4[tid] = 0; }",
    ), 5),
    Call("epoll_wait", ("@a0[tid] = args->epfd; @a1[tid] = args->maxevents; "
                        "@a2[tid] = args->timeout; @p[tid] = (uint64)args->events;",), 3, "ready"),
    Call("epoll_pwait", ("@a0[tid] = args->epfd; @a1[tid] = args->maxevents; "
                         "@a2[tid] = args->timeout; @p[tid] = (uint64)args->events;",), 3, "ready"),
    Call("epoll_pwait2", ("@a0[tid] = args->epfd; @a1[tid] = args->maxevents; "
                          "@p[tid] = (uint64)args->events;", _timespec("args->timeout", 2)),
         3, "ready"),
    Call("poll", ("@a0[tid] = args->nfds; @a1[tid] = args->timeout_msecs;",), 2),
    Call("ppoll", ("@a0[tid] = args->nfds;", _timespec("args->tsp", 1)), 2),
    Call("select", ("@a0[tid] = args->n;", _timespec("args->tvp", 1, usec=True)), 2),
    Call("pselect6", ("@a0[tid] = args->n;", _timespec("args->tsp", 1)), 2),
    Call("io_uring_setup", (
        "@a0[tid] = args->entries; $q = (uint64)args->params; "
        "@a1[tid] = $q ? *(uint32*)uptr($q + 8) : 0;",
    ), 2),
    Call("io_uring_enter", ("@a0[tid] = args->fd; @a1[tid] = args->to_submit; "
                            "@a2[tid] = args->min_complete; @a3[tid] = args->flags;",), 4),
    Call("io_uring_register", ("@a0[tid] = args->fd; @a1[tid] = args->opcode; "
                               "@a2[tid] = args->nr_args;",), 3),
    Call("accept", ("@a0[tid] = args->fd; @a1[tid] = 0; @p[tid] = (uint64)args->upeer_sockaddr;",),
         2, "peer"),
    Call("accept4", ("@a0[tid] = args->fd; @a1[tid] = args->flags; "
                     "@p[tid] = (uint64)args->upeer_sockaddr;",), 2, "peer"),
    Call("connect", ("@a0[tid] = args->fd;", _sockaddr("args->uservaddr", 1)), 6),
    Call("read", ("@a0[tid] = args->fd; @a1[tid] = args->count;",), 2),
    Call("write", ("@a0[tid] = args->fd; @a1[tid] = args->count;",), 2),
    Call("recvfrom", ("@a0[tid] = args->fd; @a1[tid] = args->size; @a2[tid] = args->flags; "
                      "@a3[tid] = (uint64)args->addr;",), 4),
    Call("sendto", ("@a0[tid] = args->fd; @a1[tid] = args->len; @a2[tid] = args->flags;",
                    _sockaddr("args->addr", 3)), 8),
    Call("openat", ("@a0[tid] = args->dfd; @a1[tid] = args->flags; "
                    "@p[tid] = (uint64)args->filename;",), 2, "path"),
    Call("close", ("@a0[tid] = args->fd;",), 1),
    Call("nanosleep", (_timespec("args->rqtp", 0),), 1),
    Call("futex", ("@a0[tid] = (uint64)args->uaddr; @a1[tid] = args->op;",
                   # Only plain FUTEX_WAIT (cmd 0) takes a relative timeout pointer.
                   _timespec("args->utime", 2, cond="(args->op & 127) == 0")), 3),
)
assert tuple(c.name for c in CALLS) == COVERED_SYSCALLS, "eBPF calls and COVERED_SYSCALLS differ"

#: Calls only the eBPF backend records: they say what a socket is (its protocol,
#: the address a listener is bound to), which strace's -yy prints on every call
#: and the probes cannot see otherwise (docs/poller.md).
EXTRA_CALLS: tuple[Call, ...] = (
    Call("socket", ("@a0[tid] = args->family; @a1[tid] = args->type;",), 2),
    Call("bind", ("@a0[tid] = args->fd;", _sockaddr("args->umyaddr", 1)), 6),
    Call("getsockname", ("@a0[tid] = args->fd; @p[tid] = (uint64)args->usockaddr;",), 1,
         "peer"),
)
ALL_CALLS = CALLS + EXTRA_CALLS

#: Slots a line may carry (sendto: fd, len, flags and a sockaddr's five fields).
MAX_SLOTS = 8
#: Ready events read per wait (Go asks for 128).
MAX_READY = 128


def _enter(code: int, call: Call, target: int) -> str:
    body = " ".join(call.enter)
    return (f"tracepoint:syscalls:sys_enter_{call.name} /pid == {target}/ {{ "
            f"@t0[tid] = nsecs; @nr[tid] = {code}; {body} }}")


def _exit(code: int, call: Call, target: int) -> str:
    slots = " ".join("%lld" for _ in range(call.slots))
    vals = "".join(f", @a{i}[tid]" for i in range(call.slots))
    pre = ""
    if call.at_exit == "ready":
        pre = (
            "$n = $r > 0 ? (uint64)$r : (uint64)0; $i = (uint64)0; $b = @p[tid]; "
            f"while ($i < $n && $i < {MAX_READY}) {{ "
            'printf("R %d %u %llu\\n", tid, *(uint32*)uptr($b + $i * 12), '
            "*(uint64*)uptr($b + $i * 12 + 4)); $i++; } "
        )
    elif call.at_exit == "peer":
        pre = (
            "$s = @p[tid]; if ($r >= 0 && $s) { "
            'printf("A %d %u %u %u %llu %llu\\n", tid, *(uint16*)uptr($s), '
            "*(uint16*)uptr($s + 2), *(uint32*)uptr($s + 4), *(uint64*)uptr($s + 8), "
            "*(uint64*)uptr($s + 16)); } "
        )
    elif call.at_exit == "path":
        pre = 'printf("O %d %s\\n", tid, str(@p[tid])); '
    return (
        f"tracepoint:syscalls:sys_exit_{call.name} /pid == {target}/ {{ $r = args->ret; {pre}"
        f'printf("S {code} %d %llu %llu %lld {slots}\\n", tid, @t0[tid], nsecs, $r{vals}); '
        "@t0[tid] = 0; }"
    )


def program(target: int, canary_pid: int, *, io_uring: str | None = "io_uring_submit_req") -> str:
    """The bpftrace program recording process ``target`` (its every thread).

    ``canary_pid`` is the recorder's own pid: its ``getppid`` calls print the
    canary. ``io_uring`` names the submission tracepoint of the per-request
    probes (``io_uring_submit_sqe`` before kernel 6.0; None: the kernel has none).
    """
    parts = ['BEGIN { printf("B %llu\\n", nsecs); }']
    for code, call in enumerate(ALL_CALLS):
        parts.append(_enter(code, call, target))
        parts.append(_exit(code, call, target))
    parts.append(f"tracepoint:signal:signal_deliver /pid == {target}/ {{ "
                 'printf("G %d %llu %d %d\\n", tid, nsecs, args->sig, args->code); }')
    # The whole group gone: the target has exited, so the recording ends by itself.
    parts.append(f"tracepoint:sched:sched_process_exit /pid == {target}/ {{ "
                 'printf("X %d %llu %d %d\\n", tid, nsecs, curtask->exit_code, args->group_dead); '
                 "if (args->group_dead) { exit(); } }")
    maps = ["@t0", "@nr", "@p", *(f"@a{i}" for i in range(MAX_SLOTS))]
    if io_uring:
        parts.append(
            f"tracepoint:io_uring:{io_uring} /pid == {target}/ {{ "
            "$r = (uint64)args->req; @qs[$r] = nsecs; @qo[$r] = args->opcode; "
            "@qu[$r] = args->user_data; @qt[$r] = tid; @qc[$r] = (uint64)args->ctx; }"
        )
        # Completions may run on an io-wq worker or in softirq context: matched
        # by the request, not by pid.
        parts.append(
            "tracepoint:io_uring:io_uring_complete /@qs[(uint64)args->req]/ { "
            "$r = (uint64)args->req; "
            'printf("Q %d %llu %llu %llu %llu %d %d %u\\n", @qt[$r], @qs[$r], nsecs, @qc[$r], '
            "args->user_data, @qo[$r], args->res, args->cflags); "
            "delete(@qs[$r]); delete(@qo[$r]); delete(@qu[$r]); delete(@qt[$r]); "
            "delete(@qc[$r]); }"
        )
        maps += ["@qs", "@qo", "@qu", "@qt", "@qc"]
    parts.append(f"tracepoint:syscalls:sys_enter_getppid /pid == {canary_pid}/ {{ "
                 f'printf("C {CANARY_PAD}\\n"); }}')
    shown = ["@t0", "@nr", "@a0", "@a1", "@a2", "@a3"] + (
        ["@qs", "@qo", "@qu", "@qt", "@qc"] if io_uring else [])
    end = " ".join(f"print({m});" for m in shown) + " " + " ".join(f"clear({m});" for m in maps)
    parts.append(f'END {{ printf("E %llu\\n", nsecs); {end} }}')
    return "\n".join(parts) + "\n"
