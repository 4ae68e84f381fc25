"""How many times the kernel skipped a tracer's BPF programs.

The kernel runs at most one tracing BPF program per CPU at a time: an event
that fires while another BPF program runs on that CPU (a timer interrupt
landing in our own ``sched_switch`` probe, or any other tracer's probe) does
not run ours, and is counted in the program's ``recursion_misses``
(``kernel/trace/bpf_trace.c``, ``trace_call_bpf``). Such an event is neither
in the ring buffer nor among the records it refused, so the recorders report
the count beside their lost events: it is an upper bound on what is missing,
since a skipped run may have been for another process's thread.

The count is read from ``/proc/PID/fdinfo`` of the tracer (the ring-buffer
loader or bpftrace), whose program descriptors show it (Linux 5.12 and later).
"""

from __future__ import annotations

import os


def _fields(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def skipped_runs(pid: int) -> int | None:
    """The sum of ``recursion_misses`` over the BPF programs process ``pid`` holds
    (each program once, however many descriptors name it); None when the tracer's
    descriptors cannot be read or its kernel does not count them."""
    base = f"/proc/{pid}/fdinfo"
    try:
        fds = os.listdir(base)
    except OSError:
        return None
    seen: dict[str, int] = {}
    counted = False
    for fd in fds:
        try:
            with open(f"{base}/{fd}", encoding="ascii", errors="replace") as fh:
                info = _fields(fh.read())
        except OSError:
            continue  # closed since the listing
        if "prog_id" not in info or "prog_type" not in info:
            continue  # not a program (a map, a link, a file)
        misses = info.get("recursion_misses")
        if misses is None or not misses.isdigit():
            continue
        counted = True
        seen[info["prog_id"]] = int(misses)
    return sum(seen.values()) if counted else None
