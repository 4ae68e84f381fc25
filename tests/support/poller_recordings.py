"""Recording directories (poller.parquet + meta.json) made from the committed
real strace captures in tests/data/strace/, as ``gmpscope record`` writes them.

The rows come from the parser; meta.json holds what the capture tells
(command, tids, parse counts) and, for the httpnet run, the alignment
measured against its Go trace (collectors.poller.gojoin), exactly as the
recorder stores it. Nothing is invented: no overhead figures (capture.sh ran
strace directly), no clock pair.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from collectors.poller.parquet_out import collect_table, write_recording
from collectors.poller.strace_parse import StraceParser, iter_file_lines, iter_rows

DATA = Path(__file__).resolve().parent.parent / "data" / "strace"
GO_TRACE = DATA / "httpnet-go1.27.trace"
COMMANDS = {
    "httpnet": ["httpnet", "-trace", "httpnet-go1.27.trace", "-max-requests", "40",
                "-clients", "6"],
    "connleak": ["connleak", "-max-conns", "25", "-duration", "200ms"],
    "connleak-attach": ["connleak", "-max-conns", "100000", "-duration", "3s"],
    "connleak-emfile": ["prlimit", "--nofile=40", "connleak", "-trace",
                        "connleak-emfile-go1.27.trace", "-max-conns", "60", "-duration", "150ms"],
    "pollmix": ["./pollmix", "1"],
    "uring_rw": ["./uring_rw", "uring.dat", "2"],
    "uring_sqfull": ["./uring_sqfull", "3"],
}


def make_recording(capture: str, out: Path, *, with_go_trace: bool = False) -> Path:
    """``out`` made a recording directory of tests/data/strace/<capture>.strace.

    ``with_go_trace``: meta.json names the Go trace of the same run, copied next
    to the recording (as ``gmpscope record --go-trace`` leaves it), with its alignment.
    """
    attach = capture.endswith("-attach")
    parser = StraceParser(attached=attach)
    table, summary = collect_table(iter_rows(parser, iter_file_lines(DATA / f"{capture}.strace")))
    meta: dict[str, Any] = {
        "mode": "attach" if attach else "spawn",
        "command": COMMANDS.get(capture, [capture]),
        "pid": int(table.column("tid")[0].as_py()),
        "tids": sorted(summary.tids),
        "first_ts_ns": summary.first_ts_ns,
        "last_ts_ns": summary.last_ts_ns,
        "stopped_by": "exit",
        "clock": None,
        "go_trace": None,
        "alignment": None,
        "parse": parser.stats.as_dict(),
        "overhead": None,
    }
    out.mkdir(parents=True, exist_ok=True)
    if with_go_trace:
        from collectors.poller.gojoin import align_with_trace

        trace = out / GO_TRACE.name
        shutil.copyfile(GO_TRACE, trace)
        meta["go_trace"] = {"path": str(trace), "name": trace.name, "exists": True,
                            "size": trace.stat().st_size}
        meta["alignment"] = align_with_trace(trace, table, None)[0].as_dict()
    write_recording(out, table, meta)
    return out
