"""collectors/live/os_side.py on small real things: the merged bpftrace program,
the target's pid from its listening port, and the epoll registrations read from
/proc (a real epoll instance of this process)."""

from __future__ import annotations

import os
import re
import select
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from collectors.live.os_attach import archive
from collectors.live.os_side import SCHED_TAG, combined_program
from collectors.live.os_target import OsSideError, pid_of_target, registered
from collectors.poller import sched_probes
from collectors.poller.ebpf_program import program


def test_combined_program_has_both_programs_once() -> None:
    text = combined_program(4242, [4242, 4243], 99)
    assert text.count("BEGIN") == 1 and len(re.findall(r"^END ", text, re.M)) == 1
    # Every probe of both programs is there, the scheduling lines tagged.
    calls, sched = program(4242, 99), sched_probes.script(4242, [4242, 4243])
    for probe in re.findall(r"^(tracepoint:\S+)", calls + sched, re.M):
        assert probe in text
    for tag in "RFOWN":
        assert f'printf("{SCHED_TAG}{tag} ' in text
    assert "@t[4243] = 1;" in text and "clear(@t);" in text and 'printf("E ' in text


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("bpftrace") is None,
                    reason="compiling a bpftrace program needs root and bpftrace")
def test_combined_program_compiles() -> None:
    # -d: bpftrace parses, checks and compiles the program without attaching it.
    out = subprocess.run(["bpftrace", "-d", "-e", combined_program(os.getpid(), [], 1)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]


def test_pid_of_target_finds_the_listener() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert pid_of_target(f"http://127.0.0.1:{port}") == os.getpid()
        assert pid_of_target(f"http://localhost:{port}/debug") == os.getpid()


def test_pid_of_target_says_what_to_do() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: nobody serves it
        with pytest.raises(OsSideError, match=r"no process listens on port .*--os-pid"):
            pid_of_target(f"http://127.0.0.1:{port}")
    with pytest.raises(OsSideError, match=r"not this machine.*--os-pid"):
        pid_of_target("http://192.0.2.1:6060")  # TEST-NET-1: never a local address


def test_registered_reads_the_epoll_registrations() -> None:
    ep = select.epoll()
    a, b = socket.socketpair()
    try:
        # Python stores the fd as the event's data (epoll_data.fd: the low 32 bits
        # of the u64 the kernel keeps; the high ones are whatever was on the stack).
        ep.register(a.fileno(), select.EPOLLIN)
        ep.register(b.fileno(), select.EPOLLOUT)
        got = registered(os.getpid())
        mine = {k: v for k, v in got.items() if k[0] == ep.fileno()}
        assert set(mine) == {(ep.fileno(), a.fileno()), (ep.fileno(), b.fileno())}
        for (_, fd), row in mine.items():
            assert row.name == "epoll_ctl" and row.op == "EPOLL_CTL_ADD"
            assert int(row.extra["data"]) & 0xFFFFFFFF == fd
    finally:
        ep.close()
        a.close()
        b.close()


def test_archive_holds_the_files(tmp_path: Path) -> None:
    import io
    import tarfile

    (tmp_path / "poller.parquet").write_bytes(b"x" * 10)
    (tmp_path / "meta.json").write_text("{}")
    with tarfile.open(fileobj=io.BytesIO(archive(tmp_path)), mode="r:gz") as tar:
        assert sorted(tar.getnames()) == ["meta.json", "poller.parquet"]
