"""What a page of memory the machine has not used lately costs: the same
500 MB written to a new file three times, with the system time of each.

1. into fresh memory;
2. right after the first file is deleted, its page cache freed (the kernel
   hands the same pages out again);
3. after ``--idle`` seconds with the second file deleted too.

On this project's virtual machines the first and third cost ~10x the second:
memory the guest has freed is handed back to the host after a moment (free
page reporting, ``virtio_balloon``), and each page of it costs again when
touched. It is why every byte a load writes or allocates anew counts
(docs/ingest.md, "Speed and memory": "Memory the host has not backed yet").
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path


def write_file(path: Path, mb: int, block: bytes) -> tuple[float, float]:
    """Wall and system seconds to write ``mb`` MB of ``block`` to a new file."""
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for _ in range(mb):
            os.write(fd, block)
    finally:
        os.close(fd)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return time.perf_counter() - t, r1.ru_stime - r0.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--idle", type=float, default=20.0, help="seconds before the third write")
    ap.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir)")
    args = ap.parse_args()
    block = os.urandom(1 << 20)
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        a, b, c = (Path(d) / n for n in ("a", "b", "c"))
        first = write_file(a, args.mb, block)
        a.unlink()
        second = write_file(b, args.mb, block)
        b.unlink()
        time.sleep(args.idle)
        third = write_file(c, args.mb, block)
        c.unlink()
    for what, (wall, sys_s) in (("fresh memory", first), ("pages just freed", second),
                                (f"after {args.idle:g} s idle", third)):
        print(f"{args.mb} MB into {what:<22} wall {wall:6.3f} s  system {sys_s:6.3f} s")


if __name__ == "__main__":
    main()
