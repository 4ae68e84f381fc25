"""OS-side collector: record a program's system calls with strace into poller.parquet.

- :mod:`.strace_parse` (with :mod:`.syntax` and :mod:`.decode`): pure parser of
  strace output into :class:`.records.Row` objects;
- :mod:`.parquet_out`: ``poller.parquet`` and ``meta.json``;
- :mod:`.recorder`: runs strace (spawn a command, or attach to a pid).
"""
