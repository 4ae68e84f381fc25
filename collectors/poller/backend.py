"""Which recording backend can run here: eBPF or strace.

eBPF needs four things; :func:`ebpf_missing` names the first one missing, in
one line that also says strace is the fallback:

- bpftrace on ``$PATH`` (Debian: ``apt-get install bpftrace``);
- the privilege to load BPF programs: root's CAP_SYS_ADMIN, or CAP_BPF with
  CAP_PERFMON (the effective set, read from ``/proc/self/status``);
- tracefs, where the syscall tracepoints live: ``/sys/kernel/tracing``
  (``$GMPSCOPE_TRACEFS`` overrides the path), mounted by the recorder when it
  may (root) and it is not;
- the kernel's syscall tracepoints there (``events/syscalls``,
  CONFIG_FTRACE_SYSCALLS), and the BPF system call (CONFIG_BPF_SYSCALL).

bpftrace is needed whichever transport carries the records (the live OS side
runs it, and it is both recorders' fallback). The
default transport's own needs (clang, bpftool, libbpf-dev, the kernel's BTF)
are checked when it is built (:mod:`collectors.poller.ebpf_build`); without
them the recorder uses bpftrace's printf, saying why in one line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

EBPF = "ebpf"
STRACE = "strace"
BACKENDS = (EBPF, STRACE)
DEFAULT_TRACEFS = Path("/sys/kernel/tracing")
_CAP_SYS_ADMIN, _CAP_PERFMON, _CAP_BPF = 21, 38, 39


def tracefs_path() -> Path:
    """Where tracefs is looked for (``$GMPSCOPE_TRACEFS`` or /sys/kernel/tracing)."""
    return Path(os.environ.get("GMPSCOPE_TRACEFS") or DEFAULT_TRACEFS)


def _effective_caps() -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


def may_load_bpf() -> bool:
    """CAP_SYS_ADMIN, or CAP_BPF with CAP_PERFMON, in the effective set (root has
    them unless a container or a bounding set took them away)."""
    caps = _effective_caps()

    def has(bit: int) -> bool:
        return bool(caps >> bit & 1)

    return has(_CAP_SYS_ADMIN) or (has(_CAP_BPF) and has(_CAP_PERFMON))


def _mount_tracefs(path: Path) -> None:
    # Only the standard place, and only as root: never mount where a test or a
    # user pointed $GMPSCOPE_TRACEFS.
    if path != DEFAULT_TRACEFS or os.geteuid() != 0 or not path.is_dir():
        return
    subprocess.run(["mount", "-t", "tracefs", "nodev", str(path)], capture_output=True,
                   timeout=10, check=False)


def ebpf_missing(bpftrace: str | None = None) -> str | None:
    """What the eBPF backend lacks here, as one line; None when it can run."""
    exe = shutil.which(bpftrace or "bpftrace")
    fallback = "strace is the fallback (--backend strace)"
    if exe is None:
        return (f"eBPF recording needs bpftrace, which is not on PATH (Debian: apt-get "
                f"install bpftrace); {fallback}")
    if not may_load_bpf():
        return (f"eBPF recording needs root or CAP_BPF and CAP_PERFMON to load BPF programs; "
                f"{fallback}")
    if not Path("/proc/sys/kernel/unprivileged_bpf_disabled").exists():
        return f"this kernel has no BPF system call (CONFIG_BPF_SYSCALL); {fallback}"
    tfs = tracefs_path()
    if not (tfs / "events").is_dir():
        _mount_tracefs(tfs)
    if not (tfs / "events").is_dir():
        return (f"eBPF recording needs tracefs, not mounted at {tfs} (mount -t tracefs "
                f"nodev {tfs}); {fallback}")
    if not (tfs / "events" / "syscalls" / "sys_enter_epoll_pwait").is_dir():
        return (f"this kernel has no syscall tracepoints in {tfs}/events/syscalls "
                f"(CONFIG_FTRACE_SYSCALLS); {fallback}")
    return None


def uring_submit_tracepoint() -> str | None:
    """io_uring's submission tracepoint: ``io_uring_submit_req`` (kernel 6.0+) or
    ``io_uring_submit_sqe`` (before; the same fields); None without io_uring's
    tracepoints (or without its completion one)."""
    ev = tracefs_path() / "events" / "io_uring"
    if not (ev / "io_uring_complete").is_dir():
        return None
    return next((n for n in ("io_uring_submit_req", "io_uring_submit_sqe")
                 if (ev / n).is_dir()), None)


def choose(requested: str | None, bpftrace: str | None = None) -> tuple[str, str | None]:
    """(backend, why not eBPF): the requested one, or eBPF when it can run, else strace."""
    if requested == STRACE:
        return STRACE, None
    missing = ebpf_missing(bpftrace)
    if requested == EBPF or missing is None:
        return EBPF, missing
    return STRACE, missing
