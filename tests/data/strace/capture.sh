#!/bin/sh
# Re-capture the real strace outputs in this directory (Debian strace 6.1).
# Usage: sh tests/data/strace/capture.sh   (from the repository root)
# Needs the Go workloads built (tests/support/workload_traces.build_workloads)
# and gcc. Every capture is a real run; nothing here is edited by hand.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
bin=${WORKLOADS_BIN:?set WORKLOADS_BIN to the directory of the built Go workloads}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -Wall -o "$work/pollmix" "$root/collectors/workloads/c/pollmix.c"
gcc -O2 -Wall -o "$work/uring_rw" "$root/collectors/workloads/c/uring_rw.c"
gcc -O2 -Wall -o "$work/uring_sqfull" "$root/collectors/workloads/c/uring_sqfull.c"
trace=epoll_create1,epoll_ctl,epoll_wait,epoll_pwait,epoll_pwait2,poll,ppoll,select,pselect6,io_uring_setup,io_uring_enter,io_uring_register,accept,accept4,connect,read,write,recvfrom,sendto,openat,close,nanosleep,futex
flags="-f -q --absolute-timestamps=format:unix,precision:ns --syscall-times=ns -yy -s 64 -e trace=$trace"
cd "$work"
# What gmpscope record runs (ns timestamps and durations, -yy decorations).
strace $flags --seccomp-bpf -o "$here/httpnet.strace" -- \
    "$bin/httpnet" -trace "$here/httpnet-go1.27.trace" -max-requests 40 -clients 6
strace $flags --seccomp-bpf -o "$here/connleak.strace" -- \
    "$bin/connleak" -max-conns 25 -duration 200ms
strace $flags --seccomp-bpf -o "$here/pollmix.strace" -- ./pollmix 1 > /dev/null
strace $flags --seccomp-bpf -o "$here/uring_rw.strace" -- ./uring_rw "$work/uring.dat" 2 > /dev/null
# io_uring batches of 6 on a 4-entry ring: the kernel submits 4 of 6 (short submits).
strace $flags --seccomp-bpf -o "$here/uring_sqfull.strace" -- ./uring_sqfull 3 > /dev/null
# connleak under a 40-descriptor limit: the leak ends in EMFILE (accept4, openat);
# with the Go trace of the same run (the diagnostics' fd rules attach it).
strace $flags --seccomp-bpf -o "$here/connleak-emfile.strace" -- \
    prlimit --nofile=40 "$bin/connleak" -trace "$here/connleak-emfile-go1.27.trace" \
    -max-conns 60 -duration 150ms
# Attach mode: calls already in progress, the detach in the middle of calls.
"$bin/connleak" -max-conns 100000 -duration 3s &
pid=$!
sleep 0.5
timeout -s INT 0.3 strace $flags -o "$here/connleak-attach.strace" -p "$pid" || true
wait "$pid"
# The classic flags (-ttt -T: microseconds) written to stderr: "[pid N]" prefixes.
strace -f -ttt -T -e trace=$trace "$bin/httpnet" -max-requests 12 -clients 3 \
    2> "$here/httpnet-ttt.strace" > /dev/null
