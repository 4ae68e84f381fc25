// SPDX-License-Identifier: GPL-2.0
// The ring-buffer transport's loader: loads syscalls.bpf.c (embedded as a
// libbpf skeleton), attaches it to one process, and every 50 ms drains the
// ring buffer into the output file as the text lines of the bpftrace program
// (collectors/poller/ebpf_program.py documents them), so the same parser reads
// either transport. Output is written once per drain (and at once for the
// canary, which the recorder waits for).
//
//   ringbuf_loader -p PID -c CANARY_PID -o FILE [-u SUBMIT_TRACEPOINT|-u none]
//                  [-s SLOTS] [-t TRACEFS]
//   ringbuf_loader --version
//
// SLOTS: the slots each call's line prints, comma separated, by code. It ends on
// SIGINT or SIGTERM, or by itself when the target's thread group has exited:
// then it detaches, drains what is left, and prints the END block (E line, the
// calls still in progress, the io_uring requests not completed, "Lost N
// events" when the buffer overflowed).
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "syscalls.skel.h"
#include "textout.h"

#define MAX_CODES 64
#define MAX_READY 128
#define EVENT_SIZE 12
#define PAYLOAD 2048
#define POLL_MS 50

struct inflight { __u64 t0, p; __s64 a[8]; __u32 nr, pad; };
struct uring_req { __u64 t, ctx, user_data; __u32 tid; __s32 opcode; };
struct sys_rec {
	__u8 kind, code, extra, pad;
	__u32 tid;
	__u64 t0, t1;
	__s64 ret;
	__s64 a[8];
	__u32 plen, pad2;
	unsigned char payload[PAYLOAD];
};
struct small_rec { __u8 kind, pad[3]; __u32 tid; __u64 t; __s64 v1, v2; };
struct uring_rec {
	__u8 kind, pad[3];
	__u32 tid;
	__u64 t_submit, t_complete, ctx, user_data;
	__s32 opcode, res;
	__u32 cflags, pad2;
};

static volatile sig_atomic_t stop;
static int group_dead;
static int slots[MAX_CODES];
static void on_signal(int s) { (void)s; stop = 1; }

static __u64 rd64(const unsigned char *p) { __u64 v; memcpy(&v, p, 8); return v; }
static __u32 rd32(const unsigned char *p) { __u32 v; memcpy(&v, p, 4); return v; }
static __u16 rd16(const unsigned char *p) { __u16 v; memcpy(&v, p, 2); return v; }

static void syscall_lines(const struct sys_rec *r, size_t len)
{
	size_t plen = r->plen;
	if (plen > len - offsetof(struct sys_rec, payload))
		plen = len - offsetof(struct sys_rec, payload);
	if (r->extra == 1) { /* R: the epoll events a wait returned */
		for (size_t i = 0; i + EVENT_SIZE <= plen; i += EVENT_SIZE) {
			LIT("R "); put_u64(r->tid); SP();
			put_u64(rd32(r->payload + i)); SP();
			put_u64(rd64(r->payload + i + 4)); NL();
		}
	} else if (r->extra == 2 && plen >= 24) { /* A: the peer's address */
		LIT("A "); put_u64(r->tid); SP();
		put_u64(rd16(r->payload)); SP();
		put_u64(rd16(r->payload + 2)); SP();
		put_u64(rd32(r->payload + 4)); SP();
		put_u64(rd64(r->payload + 8)); SP();
		put_u64(rd64(r->payload + 16)); NL();
	} else if (r->extra == 3) { /* O: openat's path */
		LIT("O "); put_u64(r->tid); SP();
		put_str((const char *)r->payload, strnlen((const char *)r->payload, plen)); NL();
	}
	LIT("S "); put_u64(r->code); SP(); put_u64(r->tid); SP();
	put_u64(r->t0); SP(); put_u64(r->t1); SP(); put_s64(r->ret);
	int n = r->code < MAX_CODES ? slots[r->code] : 0;
	for (int i = 0; i < n && i < 8; i++) {
		SP();
		put_s64(r->a[i]);
	}
	NL();
}

static int handle(void *ctx, void *data, size_t len)
{
	(void)ctx;
	const unsigned char kind = *(const unsigned char *)data;
	if (kind == 'S' && len >= offsetof(struct sys_rec, payload)) {
		syscall_lines(data, len);
	} else if ((kind == 'G' || kind == 'X' || kind == 'C') && len >= sizeof(struct small_rec)) {
		const struct small_rec *e = data;
		if (kind == 'C') {
			LIT("C cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\n");
			flush_out(); /* the recorder waits for it */
			return 0;
		}
		put_str(kind == 'G' ? "G " : "X ", 2);
		put_u64(e->tid); SP(); put_u64(e->t); SP(); put_s64(e->v1); SP(); put_s64(e->v2);
		NL();
		if (kind == 'X' && e->v2)
			group_dead = 1;
	} else if (kind == 'Q' && len >= sizeof(struct uring_rec)) {
		const struct uring_rec *q = data;
		LIT("Q "); put_u64(q->tid); SP(); put_u64(q->t_submit); SP();
		put_u64(q->t_complete); SP(); put_u64(q->ctx); SP(); put_u64(q->user_data); SP();
		put_s64(q->opcode); SP(); put_s64(q->res); SP(); put_u64(q->cflags); NL();
	}
	return 0;
}

static void map_line(const char *name, unsigned long long key, long long v, int is_signed)
{
	put_str("@", 1); put_str(name, strlen(name)); put_str("[", 1); put_u64(key);
	LIT("]: ");
	if (is_signed)
		put_s64(v);
	else
		put_u64((unsigned long long)v);
	NL();
}

/* bpftrace's END block: the calls still in progress and the requests in flight,
 * printed as bpftrace prints its maps. */
static void end_block(struct syscalls_bpf *skel)
{
	LIT("E "); put_u64(mono_ns()); NL();
	int fd = bpf_map__fd(skel->maps.calls);
	__u32 key, next;
	__u32 *prev = NULL;
	struct inflight v;
	static const char *names[] = {"a0", "a1", "a2", "a3"};
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &v) || !v.t0)
			continue;
		map_line("t0", key, (long long)v.t0, 0);
		map_line("nr", key, v.nr, 0);
		for (int i = 0; i < 4; i++)
			map_line(names[i], key, v.a[i], 1);
	}
	fd = bpf_map__fd(skel->maps.reqs);
	__u64 rkey, rnext, *rprev = NULL;
	struct uring_req q;
	while (bpf_map_get_next_key(fd, rprev, &rnext) == 0) {
		rkey = rnext;
		rprev = &rkey;
		if (bpf_map_lookup_elem(fd, &rkey, &q))
			continue;
		map_line("qs", rkey, (long long)q.t, 0);
		map_line("qo", rkey, q.opcode, 1);
		map_line("qu", rkey, (long long)q.user_data, 0);
		map_line("qt", rkey, q.tid, 0);
		map_line("qc", rkey, (long long)q.ctx, 0);
	}
	unsigned long long lost = sum_lost(bpf_map__fd(skel->maps.lost));
	if (lost) {
		LIT("Lost "); put_u64(lost); LIT(" events\n");
	}
}

/* Programs whose tracepoint this kernel lacks (epoll_pwait2 before 5.11, ...)
 * are not loaded; io_uring's submission probe only as told. */
static void choose_programs(struct syscalls_bpf *skel, const char *tracefs, const char *uring)
{
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, skel->obj) {
		const char *sec = bpf_program__section_name(prog);
		const char *tp = strncmp(sec, "tracepoint/", 11) == 0 ? sec + 11 : NULL;
		if (!tp)
			continue;
		char path[512];
		struct stat st;
		snprintf(path, sizeof path, "%s/events/%s", tracefs, tp);
		int keep = stat(path, &st) == 0;
		if (strncmp(tp, "io_uring/", 9) == 0) {
			const char *name = tp + 9;
			if (strcmp(name, "io_uring_complete") == 0)
				keep = keep && strcmp(uring, "none") != 0;
			else
				keep = keep && strcmp(name, uring) == 0;
		}
		bpf_program__set_autoload(prog, keep);
	}
}

static int print_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

int main(int argc, char **argv)
{
	long pid = 0, canary = 0;
	const char *out = NULL, *uring = "none", *tracefs = "/sys/kernel/tracing";
	const char *slot_list = NULL;
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("gmpscope-ringbuf-loader libbpf-v%d.%d\n", LIBBPF_MAJOR_VERSION,
		       LIBBPF_MINOR_VERSION);
		return 0;
	}
	int opt;
	while ((opt = getopt(argc, argv, "p:c:o:u:s:t:")) != -1) {
		switch (opt) {
		case 'p': pid = strtol(optarg, NULL, 10); break;
		case 'c': canary = strtol(optarg, NULL, 10); break;
		case 'o': out = optarg; break;
		case 'u': uring = optarg; break;
		case 's': slot_list = optarg; break;
		case 't': tracefs = optarg; break;
		default: return 2;
		}
	}
	if (pid <= 0 || !out || !slot_list) {
		fprintf(stderr, "usage: %s -p PID -c CANARY_PID -o FILE -s SLOTS [-u TP] [-t TRACEFS]\n",
			argv[0]);
		return 2;
	}
	int code = 0;
	for (const char *s = slot_list; *s && code < MAX_CODES; code++) {
		char *end;
		slots[code] = (int)strtol(s, &end, 10);
		s = *end == ',' ? end + 1 : end;
	}
	libbpf_set_print(print_libbpf);
	if (open_out(out)) {
		fprintf(stderr, "cannot write %s: %s\n", out, strerror(errno));
		return 1;
	}
	struct syscalls_bpf *skel = syscalls_bpf__open();
	if (!skel) {
		fprintf(stderr, "cannot open the BPF object: %s\n", strerror(errno));
		return 1;
	}
	skel->rodata->target_tgid = (__u32)pid;
	skel->rodata->canary_tgid = (__u32)canary;
	choose_programs(skel, tracefs, uring);
	int err = syscalls_bpf__load(skel);
	if (err) {
		fprintf(stderr, "cannot load the BPF programs: %s\n", strerror(-err));
		return 1;
	}
	struct ring_buffer *rb = ring_buffer__new(bpf_map__fd(skel->maps.rb), handle, NULL, NULL);
	if (!rb) {
		fprintf(stderr, "cannot open the ring buffer: %s\n", strerror(errno));
		return 1;
	}
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	LIT("B "); put_u64(mono_ns()); NL();
	err = syscalls_bpf__attach(skel);
	if (err) {
		fprintf(stderr, "cannot attach the BPF programs: %s\n", strerror(-err));
		return 1;
	}
	while (!stop && !group_dead) {
		/* Records are submitted without a wake-up: this sleeps POLL_MS unless
		 * the canary or the group's exit woke it (poll drains only a ring
		 * that signalled; consume drains it whether or not). */
		int n = ring_buffer__poll(rb, POLL_MS);
		if (n < 0 && n != -EINTR) {
			fprintf(stderr, "reading the ring buffer failed: %s\n", strerror(-n));
			break;
		}
		ring_buffer__consume(rb);
		/* One write per drain: a loader killed outright (SIGKILL) loses at
		 * most the last 50 ms, and the file stays readable as it grows. */
		flush_out();
	}
	/* The probes go quiet at once; detaching them (in destroy) takes seconds,
	 * so the output is complete before that. */
	skel->bss->stopped = 1;
	ring_buffer__consume(rb);
	end_block(skel);
	flush_out();
	ring_buffer__free(rb);
	syscalls_bpf__destroy(skel);
	if (write_failed) {
		fprintf(stderr, "writing %s failed: %s\n", out, strerror(write_failed));
		return 1;
	}
	return 0;
}
