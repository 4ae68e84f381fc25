"""The eBPF backend's parser, descriptor and ready-fd passes, and its backend choice,
on real recordings (tests/data/ebpf, made by capture.sh) and real strace captures.

No root needed: the recordings are committed; the backend checks run in subprocesses
with what they need taken away (bpftrace off PATH, tracefs elsewhere, a non-root uid).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from collectors.poller import ebpf_names as nm
from collectors.poller.backend import ebpf_missing
from collectors.poller.collect_ebpf import build, uring_table
from collectors.poller.parquet_out import collect_table
from collectors.poller.strace_parse import StraceParser, iter_file_lines, iter_rows

REPO = Path(__file__).resolve().parents[3]
EBPF = REPO / "tests" / "data" / "ebpf"
STRACE = REPO / "tests" / "data" / "strace"


def _rebuilt(name: str, tmp: Path) -> tuple[Any, Any, dict[str, Any]]:
    src = EBPF / name
    meta = json.loads((src / "meta.json").read_text())
    with gzip.open(src / "ebpf.txt.gz", "rb") as fin, open(tmp / "ebpf.txt", "wb") as fout:
        shutil.copyfileobj(fin, fout)
    notes = {"mode": meta["mode"], "command": meta["command"], "pid": meta["pid"],
             "clock": meta["clock"], "started_ns": meta["start_wall_ns"]}
    rows, uring, parser = build(tmp, notes, meta["ebpf"]["clock_end"])
    table, _ = collect_table(rows)
    return table, uring, meta


@pytest.mark.parametrize("name", ["httpnet", "uring_rw"])
def test_raw_output_parses_to_the_recorded_parquet(name: str, tmp_path: Path) -> None:
    """The kept raw output, parsed again, gives the recording's rows field by field."""
    table, uring, meta = _rebuilt(name, tmp_path)
    assert table.to_pylist() == pq.read_table(EBPF / name / "poller.parquet").to_pylist()
    assert uring.to_pylist() == pq.read_table(EBPF / name / "uring.parquet").to_pylist()
    assert meta["backend"] == "ebpf" and meta["partial"] is False
    assert meta["parse"]["unknown"] == 0 and meta["parse"]["lost"] == 0


def test_uring_rw_requests_match_the_program() -> None:
    """uring_rw 2: 2 rounds of a batch of 4 writes then 4 reads of 4096 bytes, each
    batch one io_uring_enter(to_submit=4, min_complete=4): 16 requests."""
    reqs = pq.read_table(EBPF / "uring_rw" / "uring.parquet").to_pylist()
    assert len(reqs) == 2 * (4 + 4)
    assert [r["opcode"] for r in reqs].count("WRITE") == 8
    assert [r["opcode"] for r in reqs].count("READ") == 8
    assert all(r["result"] == 4096 for r in reqs)
    assert all(r["latency_ns"] == r["complete_ns"] - r["submit_ns"] > 0 for r in reqs)
    assert len({r["ring"] for r in reqs}) == 1
    # Writes of a round were submitted before its reads.
    first_read = min(r["submit_ns"] for r in reqs if r["opcode"] == "READ")
    assert min(r["submit_ns"] for r in reqs if r["opcode"] == "WRITE") < first_read
    rows = pq.read_table(EBPF / "uring_rw" / "poller.parquet").to_pylist()
    enters = [r for r in rows if r["name"] == "io_uring_enter"]
    assert len(enters) == 4
    assert all((e["to_submit"], e["min_complete"], e["result"]) == (4, 4, 4) for e in enters)
    assert all(e["fd_path"] == "anon_inode:[io_uring]" for e in enters)
    # Every request was submitted inside one of the enters of its thread.
    for r in reqs:
        assert any(e["ts_ns"] <= r["submit_ns"] <= e["ts_ns"] + e["duration_ns"]
                   for e in enters if e["tid"] == r["tid"])


def _ready_checks(rows: list[dict[str, object]], cap: int) -> int:
    """Each wait that returned events lists that many descriptors (up to ``cap``),
    each one registered on that epoll instance and open at the wait's return."""
    checked = 0
    for w in rows:
        if w["name"] != "epoll_pwait" or not isinstance(w["result"], int) or w["result"] <= 0:
            continue
        fds = str(w["ready_fds"]).split(",")
        assert len(fds) == min(int(w["result"]), cap), w
        end = int(w["ts_ns"]) + int(w["duration_ns"] or 0)  # type: ignore[call-overload]
        for fd in fds:
            assert fd != "?", w  # spawned: every registration was recorded
            added = [c for c in rows if c["name"] == "epoll_ctl" and c["epfd"] == w["epfd"]
                     and c["fd"] == int(fd) and c["op"] == "EPOLL_CTL_ADD"
                     and int(c["ts_ns"]) <= end]  # type: ignore[call-overload]
            assert added, (w, fd)
            closed = [c for c in rows if c["name"] == "close" and c["fd"] == int(fd)
                      and c["result"] == 0 and int(added[-1]["ts_ns"])  # type: ignore[call-overload]
                      < int(c["ts_ns"]) + int(c["duration_ns"] or 0) < int(w["ts_ns"])]  # type: ignore[call-overload]
            assert not closed, (w, fd)
        checked += 1
    return checked


def test_ebpf_ready_fds_are_registered_and_open() -> None:
    rows = pq.read_table(EBPF / "httpnet" / "poller.parquet").to_pylist()
    assert _ready_checks(rows, 128) >= 5


def test_strace_ready_fds_are_registered_and_open() -> None:
    """The same resolution from strace's printed arrays (at most -s 64 elements)."""
    table, _ = collect_table(iter_rows(StraceParser(),
                                       iter_file_lines(STRACE / "httpnet.strace")))
    assert _ready_checks(table.to_pylist(), 64) >= 5


def test_sockaddr_spelled_as_strace_spells_it() -> None:
    """127.0.0.1 is 0x0100007f read little-endian; port 41721 in network order is
    0xf9a2 read little-endian: the text is pollmix.strace's sendto address."""
    text = nm.sockaddr_text(2, (41721 >> 8) | ((41721 & 0xFF) << 8), 0x0100007F, 0, 0)
    line = next(ln for ln in (STRACE / "pollmix.strace").read_text().splitlines()
                if " sendto(" in ln and "41721" in ln)
    assert text is not None and text in line
    assert nm.endpoint(2, 0x5000, 0x0100007F, 0, 0) == "127.0.0.1:80"
    assert nm.epoll_events(0x80002005) == "EPOLLIN|EPOLLOUT|EPOLLRDHUP|EPOLLET"
    assert nm.futex_op(128) == "FUTEX_WAIT_PRIVATE"
    assert nm.open_flags(0o2000000 | 0o100000) == "O_RDONLY|O_CLOEXEC"


def test_uring_table_keeps_in_flight_requests() -> None:
    from collectors.poller.ebpf_parse import UringRequest

    t = uring_table([UringRequest(1, 20, None, 2**63 + 5, 7, "READ", None, None),
                     UringRequest(1, 10, 15, 3, 2**64 - 1, "NOP", 0, 0)])
    assert t.column("submit_ns").to_pylist() == [10, 20]
    assert t.column("latency_ns").to_pylist() == [5, None]
    assert t.column("user_data").to_pylist() == [-1, 7]  # 64-bit values wrap to int64


# --------------------------------------------------------------------------
# what is missing: one line naming it, and strace as the fallback


def _missing_in(env: dict[str, str], prefix: tuple[str, ...] = ()) -> str:
    code = "from collectors.poller.backend import ebpf_missing; print(ebpf_missing())"
    proc = subprocess.run([*prefix, sys.executable, "-c", code], cwd=REPO, env=env, text=True,
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_no_bpftrace_is_named(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}
    line = _missing_in(env)
    assert "bpftrace" in line and "not on PATH" in line and "strace is the fallback" in line


def test_no_tracefs_is_named(tmp_path: Path) -> None:
    if shutil.which("bpftrace") is None or os.geteuid() != 0:
        pytest.skip("checks past bpftrace and privileges need both (root, bpftrace installed)")
    env = {**os.environ, "GMPSCOPE_TRACEFS": str(tmp_path / "no-tracefs")}
    line = _missing_in(env)
    assert "tracefs" in line and str(tmp_path / "no-tracefs") in line
    assert "strace is the fallback" in line
    (tmp_path / "fake" / "events").mkdir(parents=True)  # tracefs without syscall tracepoints
    line = _missing_in({**os.environ, "GMPSCOPE_TRACEFS": str(tmp_path / "fake")})
    assert "syscall tracepoints" in line and "strace is the fallback" in line


def test_no_privileges_is_named() -> None:
    if shutil.which("bpftrace") is None:
        pytest.skip("bpftrace is not installed: the check stops at that first")
    if os.geteuid() != 0:
        line = str(ebpf_missing())
    else:  # root with every capability taken away, as in a locked-down container
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("setpriv (util-linux) is not installed")
        line = _missing_in(dict(os.environ), (setpriv, "--bounding-set=-all",
                                              "--inh-caps=-all", "--"))
    assert "root or CAP_BPF" in line and "strace is the fallback" in line


def test_cli_falls_back_to_strace_with_one_line(tmp_path: Path) -> None:
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "strace").symlink_to(shutil.which("strace") or "")
    (bindir / "true").symlink_to(shutil.which("true") or "")
    env = {**os.environ, "PATH": str(bindir)}
    run = [sys.executable, "-m", "gmpscope", "record", "-o", str(tmp_path / "rec")]
    forced = subprocess.run([*run, "--backend", "ebpf", "--", "true"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=120)
    assert forced.returncode == 1
    assert len(forced.stderr.strip().splitlines()) == 1
    assert "bpftrace" in forced.stderr and "--backend strace" in forced.stderr
    assert not (tmp_path / "rec" / "poller.parquet").exists()
    default = subprocess.run([*run, "--", "true"], cwd=REPO, env=env, capture_output=True,
                             text=True, timeout=120)
    assert default.returncode == 0, default.stderr
    assert "strace is the fallback" in default.stderr
    meta = json.loads((tmp_path / "rec" / "meta.json").read_text())
    assert meta["backend"] == "strace" and meta["exit_status"] == 0


def test_descriptor_reused_while_its_creator_ran() -> None:
    """Calls entered in one order can make and end descriptor lives in another.

    The rows are one stretch of a real strace recording of httpnet (2 cores under
    load): the server's accept4 entered, the client closed its connection on fd 9
    87 us later, and the accept4 returned the new connection as fd 9 10.95 ms after
    it entered. strace's decorations (kept below) are what each call acted on; the
    describer, fed the rows in entry order without them, must say the same. Its
    snapshots hold those decorations as /proc would have before and after."""
    from collectors.poller.ebpf_fds import Describer, Snapshot
    from collectors.poller.records import KIND_SYSCALL, Row

    old, new = "TCP:[127.0.0.1:53744->127.0.0.1:40711]", "TCP:[127.0.0.1:40711->127.0.0.1:53752]"
    listener = "TCP:[127.0.0.1:40711]"
    # (name, entry ns from the accept4's, duration ns, fd, new fd, strace's fd, new fd)
    lines = [("write", -1030287, 49773, 9, None, old, None),
             ("read", -215249, 79898, 9, None, old, None),
             ("accept4", 0, 10952167, 6, 9, listener, new),
             ("epoll_ctl", 48491, 12549, 9, None, old, None),
             ("close", 87179, 48602, 9, None, old, None),
             ("read", 11500000, 21712, 9, None, new, None)]
    at = 1796479488722426964  # the accept4's entry, wall ns
    rows = [Row(ts_ns=at + ts, tid=1, kind=KIND_SYSCALL, name=name, duration_ns=d, result=0,
                fd=fd, new_fd=nfd) for name, ts, d, fd, nfd, _, _ in lines]
    snaps = [Snapshot(at - 2_000_000, {6: listener, 9: old}),
             Snapshot(at + 12_000_000, {6: listener, 9: new})]
    describer = Describer(rows, snaps)
    for row in rows:
        describer.feed(row)
    assert [(r.fd_path, r.new_fd_path) for r in rows] == [(p, q) for *_, p, q in lines]


def test_socket_seen_before_its_connect_is_named_by_its_kind() -> None:
    """A snapshot taken between a socket() and its connect sees a socket in no
    socket table: /proc and sock_diag give only ``socket:[inode]`` (as they did
    for an unconnected TCP socket of this test's author's Python, which strace
    -yy printed as ``TCP:[739688]``). The rows are strace -yy's of that program:
    the connect must be described by the socket's kind, as strace did, not as a
    bare socket (a recording under load, whose snapshots came between its
    calls, once left a connect undescribed)."""
    from collectors.poller.ebpf_fds import Describer, Snapshot
    from collectors.poller.records import KIND_SYSCALL, Row

    addr = '{sa_family=AF_INET, sin_port=htons(33923), sin_addr=inet_addr("127.0.0.1")}'
    at = 1796479488722426964
    sock = Row(ts_ns=at, tid=1, kind=KIND_SYSCALL, name="socket", duration_ns=20_000,
               result=4, new_fd=4, extra={"socket": "TCP"})
    conn = Row(ts_ns=at + 500_000, tid=1, kind=KIND_SYSCALL, name="connect",
               duration_ns=60_000, result=0, fd=4, addr=addr)
    # (strace: socket(...) = 4<TCP:[739688]>; connect(4<TCP:[739688]>, ...) = 0)
    snaps = [Snapshot(at + 250_000, {4: "socket:[739688]"})]
    describer = Describer([sock, conn], snaps)
    for row in (sock, conn):
        describer.feed(row)
    assert sock.new_fd_path == "TCP:[739688]"
    assert conn.fd_path == "TCP:[739688]"
