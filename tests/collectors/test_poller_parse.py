"""The strace output parser, on real captures (tests/data/strace, see capture.sh there).

Expected values come from the captured lines themselves (quoted where used)
or from what the captured programs did (collectors/workloads/c/*.c).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from collectors.poller.parquet_out import (
    POLLER_SCHEMA,
    collect_table,
    read_rows,
    rows_to_table,
    write_recording,
)
from collectors.poller.records import COVERED_SYSCALLS, KIND_EXIT, KIND_SIGNAL, Row
from collectors.poller.strace_parse import (
    ParseStats,
    StraceParser,
    iter_file_lines,
    iter_rows,
    parse_file,
    parse_lines,
)
from collectors.poller.syntax import split_args, unquote

DATA = Path(__file__).resolve().parents[1] / "data" / "strace"
#: Captures written with the flags gmpscope record uses.
OURS = ("httpnet", "connleak", "connleak-attach", "pollmix", "uring_rw")


def parsed(name: str, **kw: bool) -> tuple[list[Row], ParseStats]:
    return parse_file(DATA / f"{name}.strace", **kw)


def calls(rows: list[Row], name: str) -> list[Row]:
    return [r for r in rows if r.kind == "syscall" and r.name == name]


def test_every_covered_syscall_is_in_a_real_capture() -> None:
    seen: set[str] = set()
    for name in OURS:
        seen |= set(parsed(name)[1].by_name)
    assert set(COVERED_SYSCALLS) <= seen, sorted(set(COVERED_SYSCALLS) - seen)


@pytest.mark.parametrize("name", OURS)
def test_captures_with_our_flags_parse_completely(name: str) -> None:
    rows, stats = parsed(name)
    assert stats.unknown == 0, stats.unknown_samples
    # Every line is a row, a first half, or (attach) a call cut by the detach.
    assert stats.lines == stats.rows + stats.unfinished - stats.never_resumed
    assert stats.resumed + stats.never_resumed == stats.unfinished
    assert [r.ts_ns for r in rows] == sorted(r.ts_ns for r in rows)


@pytest.mark.parametrize("name", [*OURS, "httpnet-ttt"])
def test_a_thread_makes_one_call_at_a_time(name: str) -> None:
    """Joined halves land at their entry time: a thread's calls never overlap."""
    rows, _ = parsed(name)
    by_tid: dict[int, list[Row]] = defaultdict(list)
    for r in rows:
        if r.kind == "syscall":
            by_tid[r.tid].append(r)
    for tid, rs in by_tid.items():
        for a, b in zip(rs, rs[1:], strict=False):
            assert a.end_ns is not None and a.end_ns <= b.ts_ns, (tid, a, b)


def test_unfinished_and_resumed_halves_join() -> None:
    lines = (DATA / "httpnet.strace").read_text().splitlines()
    rows, stats = parse_lines(lines)
    assert stats.unfinished == stats.resumed > 100
    # Pick each split epoll_pwait: its entry half carries only the epoll fd,
    # the resumed half the events, maxevents and timeout.
    starts = [i for i, ln in enumerate(lines)
              if " epoll_pwait(" in ln and ln.endswith("<unfinished ...>")]
    assert starts
    by_key = {(r.tid, r.ts_ns): r for r in rows}
    for i in starts:
        tid, ts = lines[i].split()[:2]
        end = next(ln for ln in lines[i + 1:]
                   if ln.startswith(tid + " ") and "<... epoll_pwait resumed>" in ln)
        sec, frac = ts.split(".")
        row = by_key[(int(tid), int(sec) * 10**9 + int(frac))]
        tail = end.split("resumed>", 1)[1]
        if tail.startswith(" <unfinished ...>) = ?"):  # the thread died waiting
            assert row.result is None and row.duration_ns is None
            continue
        # e.g. "[], 128, 0, NULL, 0) = 0 <0.000024997>"
        args = split_args(tail[: tail.rindex(") = ")])
        assert row.maxevents == int(args[1])
        assert row.timeout_ns == (-1 if int(args[2]) < 0 else int(args[2]) * 1_000_000)
        dur = end.rsplit("<", 1)[1].rstrip(">")
        assert row.duration_ns == int(dur.replace(".", ""))
        assert row.epfd == int(lines[i].split("epoll_pwait(")[1].split("<")[0])
        assert row.fd_path == "anon_inode:[eventpoll]"


def test_go_netpoller_waits_are_decoded() -> None:
    rows, _ = parsed("httpnet")
    waits = calls(rows, "epoll_pwait")
    # A wait cut short by the exit has only its first half: no result.
    done = [w for w in waits if w.result is not None]
    assert done and len(done) >= len(waits) - 4
    assert all(w.maxevents == 128 for w in done)  # Go's netpoll asks for 128
    assert {w.timeout_ns for w in done} & {0, -1}  # non-blocking polls and blocking waits
    assert all(0 <= (w.result or 0) <= 128 for w in done)
    ctl = calls(rows, "epoll_ctl")
    assert {c.op for c in ctl} >= {"EPOLL_CTL_ADD"}
    tcp = [c for c in ctl if (c.fd_path or "").startswith("TCP:")]
    adds = [c for c in tcp if c.op == "EPOLL_CTL_ADD"]
    assert adds and all(c.events == "EPOLLIN|EPOLLOUT|EPOLLRDHUP|EPOLLET" for c in adds)
    # Go deletes each connection from the poller as it closes; DEL has no event.
    dels = [c for c in tcp if c.op == "EPOLL_CTL_DEL"]
    assert len(dels) == len(adds) and all(c.events is None for c in dels)
    # Go registers its trace file too, and the kernel refuses a regular file.
    refused = [c for c in ctl if c.errno == "EPERM"]
    assert refused and all(c.fd_path and c.fd_path.endswith(".trace") for c in refused)


def test_timed_out_waits_last_at_least_their_timeout() -> None:
    """pollmix waits 3 ms on an empty socket with every call, then with data queued."""
    rows, _ = parsed("pollmix")
    names = ("poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait", "epoll_pwait2")
    waits = [r for r in rows if r.name in names]
    assert {r.name for r in waits} == set(names)
    assert all(r.timeout_ns == 3_000_000 for r in waits)
    assert {r.maxevents for r in waits if r.name.startswith("epoll")} == {4}
    assert {r.maxevents for r in waits if "poll" in r.name and "epoll" not in r.name} == {1}
    timed_out = [r for r in waits if r.result == 0]
    assert {r.name for r in timed_out} == set(names)
    for r in timed_out:
        assert r.duration_ns is not None and r.duration_ns >= 3_000_000, r
    ready = [r for r in waits if r.result == 1]
    assert {r.name for r in ready} == set(names) - {"epoll_pwait", "epoll_pwait2"}  # EPOLLET
    assert all(r.duration_ns is not None and r.duration_ns < 3_000_000 for r in ready)


def test_socket_calls_decode() -> None:
    rows, _ = parsed("pollmix")
    (send,) = calls(rows, "sendto")
    assert (send.result, send.count, send.flags) == (4, 4, "0")
    assert send.addr is not None and "inet_addr(\"127.0.0.1\")" in send.addr
    got, empty = calls(rows, "recvfrom")
    assert (got.result, got.count, got.flags) == (4, 64, "MSG_DONTWAIT")
    assert (empty.result, empty.errno) == (-1, "EAGAIN")
    (acc,) = calls(rows, "accept")
    (acc4,) = calls(rows, "accept4")
    for a in (acc, acc4):
        assert a.new_fd == a.result and a.new_fd_path is not None
        assert a.new_fd_path.startswith("TCP:[127.0.0.1:")
        assert a.fd == 6 and a.fd_path is not None and "->" not in a.fd_path  # the listener
    assert acc4.flags == "SOCK_CLOEXEC|SOCK_NONBLOCK"
    assert [c.result for c in calls(rows, "connect")] == [0, 0]
    (op,) = calls(rows, "openat")[-1:]
    assert (op.path, op.flags, op.new_fd_path) == ("/dev/null", "O_RDWR|O_CLOEXEC",
                                                   "/dev/null<char 1:3>")
    wait, wake = calls(rows, "futex")
    assert (wait.op, wait.timeout_ns, wait.errno) == ("FUTEX_WAIT_PRIVATE", 1_000_000, "EAGAIN")
    assert (wake.op, wake.timeout_ns) == ("FUTEX_WAKE_PRIVATE", None)
    (nap,) = calls(rows, "nanosleep")
    assert nap.timeout_ns == 1_000_000 and nap.duration_ns is not None
    assert nap.duration_ns >= nap.timeout_ns
    ctl = calls(rows, "epoll_ctl")
    assert [(c.op, c.events) for c in ctl] == [
        ("EPOLL_CTL_ADD", "EPOLLIN"), ("EPOLL_CTL_MOD", "EPOLLIN|EPOLLET"),
        ("EPOLL_CTL_DEL", None)]


def test_io_uring_calls_decode() -> None:
    """uring_rw: 2 rounds of 4 writes then 4 reads, each batch in one io_uring_enter."""
    rows, _ = parsed("uring_rw")
    (setup,) = calls(rows, "io_uring_setup")
    assert (setup.count, setup.flags, setup.new_fd) == (8, "0", setup.result)
    assert setup.new_fd_path == "anon_inode:[io_uring]"
    enters = calls(rows, "io_uring_enter")
    assert len(enters) == 2 * 2
    for e in enters:
        assert (e.fd, e.to_submit, e.min_complete, e.flags, e.result) == (
            setup.new_fd, 4, 4, "IORING_ENTER_GETEVENTS", 4)
    reg, unreg = calls(rows, "io_uring_register")
    assert (reg.op, reg.count, reg.result) == ("IORING_REGISTER_FILES", 1, 0)
    assert (unreg.op, unreg.count) == ("IORING_UNREGISTER_FILES", 0)


def test_connleak_descriptors_climb_until_exit() -> None:
    """Each accepted connection stays open: live TCP sockets only climb while it runs."""
    rows, _ = parsed("connleak")
    live: set[int] = set()
    at_accept: list[int] = []
    last_accept = 0
    tcp_closes: list[int] = []
    for r in rows:
        if r.kind != "syscall":
            continue
        if r.name == "accept4" and r.new_fd is not None:
            live.add(r.new_fd)
            at_accept.append(len(live))
            last_accept = r.ts_ns
        elif r.name == "connect" and (r.fd_path or "").startswith("TCP:") and r.fd is not None:
            live.add(r.fd)
        elif r.name == "close" and (r.fd_path or "").startswith("TCP:"):
            tcp_closes.append(r.ts_ns)
            live.discard(r.fd or -1)
    assert len(at_accept) >= 5
    assert at_accept == sorted(set(at_accept))  # strictly climbing
    assert at_accept[-1] >= 2 * len(at_accept)  # both ends of every connection
    assert tcp_closes and min(tcp_closes) > last_accept  # closed only on the way out


@pytest.mark.parametrize("name", ["httpnet", "connleak"])
def test_signals_and_exits(name: str) -> None:
    rows, stats = parsed(name)
    sigs = [r for r in rows if r.kind == KIND_SIGNAL]
    # Go preempts goroutines with SIGURG; a run may have none.
    assert {s.name for s in sigs} <= {"SIGURG"}
    assert all("si_signo=SIGURG" in s.args for s in sigs)
    exits = [r for r in rows if r.kind == KIND_EXIT]
    tids = {r.tid for r in rows}
    assert {e.tid for e in exits} == tids and all(e.result == 0 for e in exits)
    assert stats.signals == len(sigs) and stats.exits == len(exits)


def test_signal_rows() -> None:
    rows, _ = parsed("connleak-attach")
    sigs = [r for r in rows if r.kind == KIND_SIGNAL]
    assert sigs and all(s.name == "SIGURG" and s.result is None for s in sigs)


def test_attach_capture_marks_partial_and_cut_calls() -> None:
    rows, stats = parsed("connleak-attach", attached=True)
    first: dict[int, Row] = {}
    for r in rows:
        first.setdefault(r.tid, r)
    assert len(first) >= 2
    assert all(r.partial for r in first.values())
    assert sum(r.partial for r in rows) == len(first)
    # strace detached while threads were blocked: their calls have no end.
    assert stats.never_resumed > 0
    cut = [r for r in rows if r.kind == "syscall" and r.result is None]
    assert len(cut) == stats.never_resumed + stats.detached
    assert all(r.duration_ns is None for r in cut)


def test_classic_flags_and_interleaved_messages() -> None:
    """-ttt -T to stderr: microseconds, "[pid N]" prefixes, and strace's own
    "Process N attached" notes, one of them cutting a call's line in two."""
    lines = (DATA / "httpnet-ttt.strace").read_text().splitlines()
    rows, stats = parse_lines(lines)
    notes = [ln for ln in lines if "strace: Process" in ln]
    stray = [ln for ln in lines if not ln[:1].isdigit() and not ln.startswith("[pid")]
    assert notes and stats.unknown == len(set(notes) | set(stray)) <= 20
    assert set(stats.unknown_samples) == set(notes) | set(stray)
    assert all(r.ts_ns % 1000 == 0 for r in rows)
    assert all(r.duration_ns % 1000 == 0 for r in rows if r.duration_ns is not None)
    assert 0 in {r.tid for r in rows}  # lines before the first clone carry no pid
    assert len({r.tid for r in rows}) >= 3
    assert calls(rows, "epoll_pwait")


def test_unknown_lines_are_counted_not_fatal() -> None:
    lines = (DATA / "pollmix.strace").read_text().splitlines()
    junk = ["strace: Process 1 attached", "garbage", lines[5][:40]]
    parser = StraceParser()
    out = [parser.feed(ln) for ln in [*lines[:5], *junk, *lines[5:]]]
    assert parser.stats.unknown == 3 and parser.stats.unknown_samples == junk
    assert sum(r is not None for r in out) == len(lines)


def test_strings_with_escapes() -> None:
    rows, _ = parsed("pollmix")
    elf = calls(rows, "read")[0]
    text = unquote(split_args(elf.args)[1])
    assert text is not None and text.startswith("\x7fELF\x02\x01\x01\x03\x00")
    assert unquote('"a\\"b\\\\c\\n"...') == 'a"b\\c\n'


def test_parquet_round_trip(tmp_path: Path) -> None:
    rows, stats = parsed("uring_rw")
    write_recording(tmp_path, rows, {"parse": stats.as_dict()})
    back = read_rows(tmp_path / "poller.parquet")
    assert len(back) == len(rows)
    assert back[0].keys() == set(POLLER_SCHEMA.names)
    enter = next(b for b in back if b["name"] == "io_uring_enter")
    assert (enter["to_submit"], enter["min_complete"], enter["timeout_ns"]) == (4, 4, None)


@pytest.mark.parametrize("name", ["httpnet", "connleak-attach"])
def test_streamed_table_matches_the_parsed_rows(name: str) -> None:
    """The recorder's columnar path (chunks, then one sort) gives the parser's rows."""
    attached = name.endswith("attach")
    rows, _ = parsed(name, attached=attached)
    parser = StraceParser(attached=attached)
    table, summary = collect_table(iter_rows(parser, iter_file_lines(DATA / f"{name}.strace")))
    # Only the streamed path resolves ready_fds (it needs the whole recording).
    ready = table.column("ready_fds").to_pylist()
    waits = [r for r in rows if r.name == "epoll_pwait" and (r.result or 0) > 0]
    assert sum(v is not None for v in ready) == len(waits)
    i = table.column_names.index("ready_fds")
    assert table.remove_column(i).to_pylist() == rows_to_table(rows).remove_column(i).to_pylist()
    assert summary.rows == len(rows) and summary.tids == {r.tid for r in rows}
    assert summary.first_ts_ns == rows[0].ts_ns
    assert summary.last_ts_ns == max(r.end_ns or r.ts_ns for r in rows)
