"""The bpftrace program that records the kernel's scheduling of one process's threads.

Three tracepoints, filtered in the kernel to the target's threads:

- ``sched:sched_switch``: the thread leaving the CPU (``prev``) is the current
  task, so ``pid`` (bpftrace's tgid of the current task) says whether it is
  the target's; the thread entering it (``next_pid``, a thread id) is looked up
  in a map of the target's thread ids.
- ``sched:sched_wakeup`` / ``sched:sched_wakeup_new``: the woken thread id is
  looked up in the same map (the current task is the waker, often another
  process).
- ``task:task_newtask``: a thread the target creates (``CLONE_THREAD`` from a
  task of the target) joins the map.

The map starts with the threads listed in ``/proc/PID/task`` when the script
is made, and every thread of the target that leaves a CPU joins it too, so a
thread created in the moment between reading ``/proc`` and attaching is still
followed from its first switch out.

Each event is one text line (``printf`` into bpftrace's output file):

    O <nsecs> <cpu> <tid>                  switched in (sched_switch next)
    F <nsecs> <cpu> <tid> <prev_state> <slices>
                                           switched out (sched_switch prev)
    W <nsecs> <cpu> <tid> <target_cpu>     woken (sched_wakeup, sched_wakeup_new)
    N <nsecs> <cpu> <tid>                  a new thread of the target (task_newtask)

``slices`` is the thread's timeslices so far (``sched_info.pcount``, the third
field of ``/proc/PID/task/TID/schedstat``; the tracepoint comes after the
thread's arrival on the CPU was counted): consecutive switches out of a thread
count up by one, so a jump says the kernel skipped probes in between
(:func:`.sched_parse.thread_intervals` marks that time unknown).

``nsecs`` is ``ktime_get_ns()``: CLOCK_MONOTONIC; :mod:`.sched_parse` maps it
to the wall clock. A ``R <nsecs>`` line from ``BEGIN`` says the probes are
attached.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

#: CLONE_THREAD (linux/sched.h): the new task is a thread of its creator's process.
CLONE_THREAD = 0x00010000
#: How many thread ids the map may hold (a Go program rarely has more than a few
#: hundred); bpftrace 0.17 takes it from the environment (BPFTRACE_MAP_KEYS_MAX).
MAX_THREADS = 65536


def thread_ids(pid: int) -> list[int]:
    """The thread ids of process ``pid`` now (empty when it is gone)."""
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if t.isdigit())
    except OSError:
        return []


def script(pid: int, tids: Iterable[int]) -> str:
    """The bpftrace program recording process ``pid``'s threads (``tids`` known now)."""
    if pid <= 0:
        raise ValueError(f"not a process id: {pid}")
    seed = "".join(f"    @t[{int(t)}] = 1;\n" for t in sorted(set(tids)) if int(t) > 0)
    return f"""BEGIN
{{
{seed}    printf("R %llu\\n", nsecs);
}}

tracepoint:sched:sched_switch
{{
    if (pid == {pid}) {{
        // Written once per thread: replacing a hash map element on every
        // switch races with the lookups on other CPUs, which then miss it.
        if (@t[args->prev_pid] != 1) {{
            @t[args->prev_pid] = 1;
        }}
        printf("F %llu %d %d %lld %llu\\n", nsecs, cpu, args->prev_pid, args->prev_state,
               curtask->sched_info.pcount);
    }}
    if (@t[args->next_pid] == 1) {{
        printf("O %llu %d %d\\n", nsecs, cpu, args->next_pid);
    }}
}}

tracepoint:sched:sched_wakeup,
tracepoint:sched:sched_wakeup_new
{{
    if (@t[args->pid] == 1) {{
        printf("W %llu %d %d %d\\n", nsecs, cpu, args->pid, args->target_cpu);
    }}
}}

tracepoint:task:task_newtask
{{
    if (pid == {pid} && (args->clone_flags & {CLONE_THREAD:#x}) != 0) {{
        @t[args->pid] = 1;
        printf("N %llu %d %d\\n", nsecs, cpu, args->pid);
    }}
}}

END
{{
    clear(@t);
}}
"""
