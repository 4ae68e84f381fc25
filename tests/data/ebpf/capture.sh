#!/bin/sh
# Re-make the real eBPF recordings in this directory (Debian bpftrace 0.17, as root,
# tracefs mounted). Usage: sh tests/data/ebpf/capture.sh   (from the repository root)
# Needs the Go workloads built (tests/support/workload_traces.build_workloads) and gcc.
# Every recording is a real run of gmpscope record --backend ebpf; nothing is edited.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
bin=${WORKLOADS_BIN:?set WORKLOADS_BIN to the directory of the built Go workloads}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -Wall -o "$work/uring_rw" "$root/collectors/workloads/c/uring_rw.c"
cd "$root"
for d in uring_rw httpnet; do rm -rf "${here:?}/$d"; done
# 2 rounds of 4 writes then 4 reads: 16 io_uring requests.
.venv/bin/gmpscope record --backend ebpf --no-sched -o "$here/uring_rw" -- \
    "$work/uring_rw" "$work/uring.dat" 2 > /dev/null
.venv/bin/gmpscope record --backend ebpf --no-sched -o "$here/httpnet" -- \
    "$bin/httpnet" -max-requests 40 -clients 6 > /dev/null
rm -f "$here"/*/fds.jsonl
