"""OS-side collector: record a program's system calls with strace into poller.parquet.

- :mod:`.strace_parse` (with :mod:`.syntax` and :mod:`.decode`): pure parser of
  strace output into :class:`.records.Row` objects;
- :mod:`.parquet_out`: ``poller.parquet`` and ``meta.json``;
- :mod:`.recorder`: runs strace (spawn a command, or attach to a pid);
- :mod:`.collect`: one recording end to end (what ``gmpscope record`` calls);
- :mod:`.align` and :mod:`.gojoin`: line a recording up with the Go trace of the run.
"""
