"""Build the ring-buffer transport's loaders, lazily, once per source and kernel.

The eBPF backend's fast transport is C in ``collectors/poller/csrc/``: for the
system calls ``syscalls.bpf.c`` (the probes, libbpf CO-RE, writing binary records
into a BPF ring buffer) and ``ringbuf_loader.c`` (loads them with the skeleton
bpftool generates, drains the buffer every 50 ms and prints the bpftrace
program's text lines); for the scheduling recorder ``sched.bpf.c`` and
``sched_loader.c``; ``textout.h`` is the loaders' shared output code. They are
built at first use, not at install time: the BPF objects are compiled against
the running kernel's BTF (``/sys/kernel/btf/vmlinux``), which
only the recording machine has. The steps are those of any libbpf tool::

    bpftool btf dump file /sys/kernel/btf/vmlinux format c > vmlinux.h
    clang -O2 -g -target bpf -D__TARGET_ARCH_x86 -c syscalls.bpf.c   (and sched.bpf.c)
    bpftool gen skeleton syscalls.bpf.o > syscalls.skel.h
    cc -O2 ringbuf_loader.c -lbpf -lelf -lz   (and sched_loader.c; cc or, without one, clang)

into ``$GMPSCOPE_CACHE/ebpf/<key>/`` (default ``~/.cache/gmpscope``), ``key``
a hash of the sources, the kernel's BTF and the machine; under an exclusive
lock, so parallel recorders (tests) build it once. The tools come from Debian's
clang, llvm, bpftool and libbpf-dev (``make test-setup`` installs them as root);
:func:`loader` raises :class:`BuildError` naming what is missing, and the
recorder then falls back to bpftrace's printf transport.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

CSRC = Path(__file__).resolve().parent / "csrc"
VMLINUX_BTF = Path("/sys/kernel/btf/vmlinux")
LOADER_NAME = "ringbuf_loader"
SCHED_LOADER_NAME = "sched_loader"
#: Names the transport of both recorders (``ringbuf``, the default, or ``bpftrace``).
TRANSPORT_ENV = "GMPSCOPE_EBPF_TRANSPORT"
#: Each loader and the BPF program it embeds (``<name>.bpf.c`` -> ``<name>.skel.h``).
LOADERS = {LOADER_NAME: "syscalls", SCHED_LOADER_NAME: "sched"}
BUILD_TIMEOUT_S = 300
_ARCH = {"x86_64": "x86"}
_PACKAGES = "Debian: apt-get install clang llvm bpftool libbpf-dev"


class BuildError(RuntimeError):
    """The loader cannot be built here; the message says why, in one line."""


def cache_root() -> Path:
    """``$GMPSCOPE_CACHE/ebpf`` (default ``~/.cache/gmpscope/ebpf``)."""
    env = os.environ.get("GMPSCOPE_CACHE")
    return (Path(env) if env else Path.home() / ".cache" / "gmpscope") / "ebpf"


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise BuildError(f"{name} is not on PATH ({_PACKAGES})")
    return found


def build_key() -> str:
    """Hash of the sources, the kernel's BTF and the machine."""
    if not VMLINUX_BTF.is_file():
        raise BuildError(f"the kernel has no BTF ({VMLINUX_BTF}, CONFIG_DEBUG_INFO_BTF), "
                         "which CO-RE needs")
    h = hashlib.sha256()
    for src in sorted(CSRC.glob("*.[ch]")):
        h.update(src.name.encode() + b"\0" + src.read_bytes())
    h.update(VMLINUX_BTF.read_bytes())
    h.update(platform.machine().encode())
    return h.hexdigest()[:20]


def _run(argv: list[str], *, stdout: Path | None = None, cwd: Path) -> None:
    out = open(stdout, "wb") if stdout is not None else None  # noqa: SIM115 - closed below
    try:
        proc = subprocess.run(argv, cwd=cwd, stdout=out or subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=BUILD_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BuildError(f"{Path(argv[0]).name} failed: {e}") from None
    finally:
        if out is not None:
            out.close()
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        # The first error line says it (a missing header: libbpf-dev; ...).
        first = next((ln for ln in err if "error" in ln.lower()), err[0] if err else "")
        raise BuildError(f"{Path(argv[0]).name} failed ({proc.returncode}): {first.strip()}")


def _build(dest: Path) -> None:
    arch = _ARCH.get(platform.machine())
    if arch is None:
        # The probes read epoll_event arrays as x86-64 lays them out (packed, 12 bytes).
        raise BuildError(f"the ring-buffer probes are written for x86-64, not "
                         f"{platform.machine()}")
    clang, bpftool = _tool("clang"), _tool("bpftool")
    cc = shutil.which("cc") or clang  # clang compiles the loader as well as gcc
    if not Path("/usr/include/bpf/libbpf.h").is_file():
        raise BuildError(f"libbpf's headers are missing (/usr/include/bpf/libbpf.h; {_PACKAGES})")
    with tempfile.TemporaryDirectory(prefix=".build-", dir=dest.parent) as tmp:
        work = Path(tmp)
        _run([bpftool, "btf", "dump", "file", str(VMLINUX_BTF), "format", "c"],
             stdout=work / "vmlinux.h", cwd=work)
        out = work / "out"
        out.mkdir()
        for name, bpf in LOADERS.items():
            obj = work / f"{bpf}.bpf.o"
            _run([clang, "-O2", "-g", "-target", "bpf", f"-D__TARGET_ARCH_{arch}", "-I",
                  str(work), "-c", str(CSRC / f"{bpf}.bpf.c"), "-o", str(obj)], cwd=work)
            _run([bpftool, "gen", "skeleton", str(obj)], stdout=work / f"{bpf}.skel.h", cwd=work)
            _run([cc, "-O2", "-Wall", "-I", str(work), "-I", str(CSRC), "-o", str(out / name),
                  str(CSRC / f"{name}.c"), "-lbpf", "-lelf", "-lz"], cwd=work)
        for src in CSRC.glob("*.[ch]"):  # what they were built from
            shutil.copy2(src, out / src.name)
        out.replace(dest)


def loader(name: str = LOADER_NAME) -> Path:
    """The built loader's path (``ringbuf_loader`` or ``sched_loader``), building
    both first when these sources and this kernel have none.

    BuildError (one line: what is missing or what failed) when they cannot be built.
    """
    key = build_key()
    root = cache_root()
    dest = root / key
    exe = dest / name
    if exe.is_file():
        return exe
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock = open(root / f"{key}.lock", "w")  # noqa: SIM115 - closed below
    except OSError as e:
        raise BuildError(f"cannot write the build cache {root}: {e}") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not exe.is_file():  # another process may have built it meanwhile
            _build(dest)
    finally:
        lock.close()
    return exe
