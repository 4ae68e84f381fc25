// SPDX-License-Identifier: GPL-2.0
// The scheduling recorder's ring-buffer loader: loads sched.bpf.c (embedded as
// a libbpf skeleton) for one process, seeds its thread map, and every 50 ms
// drains the ring buffer into the output file as the lines of the bpftrace
// program of collectors/poller/sched_probes.py:
//
//   R <nsecs>                        the probes are attached (first line)
//   O <nsecs> <cpu> <tid>            switched in
//   F <nsecs> <cpu> <tid> <state> <slices>
//                                    switched out (the kernel's prev_state; the
//                                    thread's timeslices so far)
//   W <nsecs> <cpu> <tid> <cpu>      woken, onto that CPU's run queue
//   N <nsecs> <cpu> <tid>            a new thread of the target
//   Lost <n> events                  (at the end) records the full buffer refused
//
//   sched_loader -p PID -o FILE [-T TID,TID,...]
//
// It ends on SIGINT or SIGTERM: the probes go quiet, the buffer is drained, and
// the file is complete before the (slow) detaching.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "sched.skel.h"
#include "textout.h"

#define POLL_MS 50

struct sched_rec {
	__u8 kind, pad[3];
	__u32 cpu;
	__u64 t;
	__u32 tid;
	__s32 target_cpu;
	__s64 state;
	__u64 slices;
};

static volatile sig_atomic_t stop;

static void on_signal(int s) { (void)s; stop = 1; }

static int handle(void *ctx, void *data, size_t len)
{
	(void)ctx;
	const struct sched_rec *e = data;
	if (len < sizeof(*e))
		return 0;
	char tag[2] = {(char)e->kind, ' '};
	put_str(tag, 2);
	put_u64(e->t); SP(); put_u64(e->cpu); SP(); put_u64(e->tid);
	if (e->kind == 'F') {
		SP(); put_s64(e->state); SP(); put_u64(e->slices);
	} else if (e->kind == 'W') {
		SP(); put_s64(e->target_cpu);
	}
	NL();
	return 0;
}

static int print_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return level == LIBBPF_DEBUG ? 0 : vfprintf(stderr, fmt, ap);
}

int main(int argc, char **argv)
{
	long pid = 0;
	const char *out = NULL, *tids = "";
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("gmpscope-sched-loader libbpf-v%d.%d\n", LIBBPF_MAJOR_VERSION,
		       LIBBPF_MINOR_VERSION);
		return 0;
	}
	int opt;
	while ((opt = getopt(argc, argv, "p:o:T:")) != -1) {
		switch (opt) {
		case 'p': pid = strtol(optarg, NULL, 10); break;
		case 'o': out = optarg; break;
		case 'T': tids = optarg; break;
		default: return 2;
		}
	}
	if (pid <= 0 || !out) {
		fprintf(stderr, "usage: %s -p PID -o FILE [-T TID,...]\n", argv[0]);
		return 2;
	}
	libbpf_set_print(print_libbpf);
	if (open_out(out)) {
		fprintf(stderr, "cannot write %s: %s\n", out, strerror(errno));
		return 1;
	}
	struct sched_bpf *skel = sched_bpf__open();
	if (!skel) {
		fprintf(stderr, "cannot open the BPF object: %s\n", strerror(errno));
		return 1;
	}
	skel->rodata->target_tgid = (__u32)pid;
	int err = sched_bpf__load(skel);
	if (err) {
		fprintf(stderr, "cannot load the BPF programs: %s\n", strerror(-err));
		return 1;
	}
	int tfd = bpf_map__fd(skel->maps.threads);
	for (const char *s = tids; *s;) {
		char *end;
		__u32 tid = (__u32)strtoul(s, &end, 10);
		__u8 one = 1;
		if (end == s)
			break;
		if (tid)
			bpf_map_update_elem(tfd, &tid, &one, BPF_ANY);
		s = *end == ',' ? end + 1 : end;
	}
	struct ring_buffer *rb = ring_buffer__new(bpf_map__fd(skel->maps.rb), handle, NULL, NULL);
	if (!rb) {
		fprintf(stderr, "cannot open the ring buffer: %s\n", strerror(errno));
		return 1;
	}
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	err = sched_bpf__attach(skel);
	if (err) {
		fprintf(stderr, "cannot attach the BPF programs: %s\n", strerror(-err));
		return 1;
	}
	LIT("R "); put_u64(mono_ns()); NL();
	flush_out(); /* the recorder waits for it */
	while (!stop) {
		int n = ring_buffer__poll(rb, POLL_MS);
		if (n < 0 && n != -EINTR) {
			fprintf(stderr, "reading the ring buffer failed: %s\n", strerror(-n));
			break;
		}
		ring_buffer__consume(rb);
		flush_out();
	}
	skel->bss->stopped = 1;
	ring_buffer__consume(rb);
	unsigned long long lost = sum_lost(bpf_map__fd(skel->maps.lost));
	if (lost) {
		LIT("Lost "); put_u64(lost); LIT(" events\n");
	}
	flush_out();
	ring_buffer__free(rb);
	sched_bpf__destroy(skel);
	if (write_failed) {
		fprintf(stderr, "writing %s failed: %s\n", out, strerror(write_failed));
		return 1;
	}
	return 0;
}
