// SPDX-License-Identifier: GPL-2.0
// The eBPF backend's probes for the ring-buffer transport (libbpf CO-RE).
//
// What it records is what collectors/poller/ebpf_program.py's bpftrace program
// records, as fixed binary records in one BPF ring buffer, read in batches by
// ringbuf_loader.c (which prints them as that program's text lines). Every probe
// is filtered in the kernel on the target's thread group (target_tgid).
//
// Records are submitted with BPF_RB_NO_WAKEUP: the traced threads never pay a
// wake-up of the reader; it drains the buffer on its own clock. Only the rare
// records the reader must see at once (the canary, the group's exit) wake it
// (forced: the reader is behind by design, so an adaptive wake-up would not).
// A record that finds the buffer full is counted in `lost` (per CPU).
//
// The CALL(code, name) list below must match ebpf_program.ALL_CALLS (its index
// is the code); tests/collectors/poller/test_ebpf_ringbuf.py checks that.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#define MAX_READY 128
#define EVENT_SIZE 12 /* struct epoll_event is packed on x86-64 */
#define PAYLOAD 2048  /* MAX_READY * EVENT_SIZE rounded up to a power of two */
#define PATH_MAX_READ 256

/* Record kinds (the first byte of every record). */
#define K_SYSCALL 'S'
#define K_SIGNAL 'G'
#define K_EXIT 'X'
#define K_URING 'Q'
#define K_CANARY 'C'

/* What a syscall record carries after its slots. */
#define X_NONE 0
#define X_READY 1
#define X_PEER 2
#define X_PATH 3

const volatile __u32 target_tgid = 0;
const volatile __u32 canary_tgid = 0;
/* Set by the loader when it stops: no record after its final drain (detaching
 * ~60 tracepoints takes seconds, each waiting for an RCU grace period). */
__u32 stopped = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} rb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

/* A call in progress, per thread (bpftrace's @t0, @nr, @a0.., @p). t0 is set
 * back to 0 at exit, so the loader's final dump shows the calls still open. */
struct inflight {
	__u64 t0;
	__u64 p;
	__s64 a[8];
	__u32 nr;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct inflight);
} calls SEC(".maps");

/* An io_uring request submitted and not yet completed, by request address. */
struct uring_req {
	__u64 t;
	__u64 ctx;
	__u64 user_data;
	__u32 tid;
	__s32 opcode;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct uring_req);
} reqs SEC(".maps");

struct sys_rec {
	__u8 kind;
	__u8 code;
	__u8 extra;
	__u8 pad;
	__u32 tid;
	__u64 t0;
	__u64 t1;
	__s64 ret;
	__s64 a[8];
	__u32 plen;
	__u32 pad2;
	char payload[PAYLOAD];
};

/* G, X and C records. */
struct small_rec {
	__u8 kind;
	__u8 pad[3];
	__u32 tid;
	__u64 t;
	__s64 v1;
	__s64 v2;
};

struct uring_rec {
	__u8 kind;
	__u8 pad[3];
	__u32 tid;
	__u64 t_submit;
	__u64 t_complete;
	__u64 ctx;
	__u64 user_data;
	__s32 opcode;
	__s32 res;
	__u32 cflags;
	__u32 pad2;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sys_rec);
} scratch SEC(".maps");

static __always_inline void count_lost(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&lost, &zero);
	if (n)
		*n += 1;
}

static __always_inline __s64 user_u64(__u64 addr)
{
	__s64 v = 0;
	bpf_probe_read_user(&v, sizeof(v), (void *)addr);
	return v;
}

static __always_inline __u32 user_u32(__u64 addr)
{
	__u32 v = 0;
	bpf_probe_read_user(&v, sizeof(v), (void *)addr);
	return v;
}

static __always_inline __u16 user_u16(__u64 addr)
{
	__u16 v = 0;
	bpf_probe_read_user(&v, sizeof(v), (void *)addr);
	return v;
}

/* A user timespec (timeval with usec) as ns; -1 for a NULL pointer. */
static __always_inline __s64 timespec_ns(__u64 ptr, int usec)
{
	if (!ptr)
		return -1;
	__s64 frac = user_u64(ptr + 8);
	return user_u64(ptr) * 1000000000 + (usec ? frac * 1000 : frac);
}

/* family, port (network order), IPv4 address, the IPv6 address's two halves. */
static __always_inline void sockaddr_slots(__u64 ptr, __s64 *a)
{
	if (!ptr) {
		a[0] = 0;
		return;
	}
	a[0] = user_u16(ptr);
	a[1] = user_u16(ptr + 2);
	a[2] = user_u32(ptr + 4);
	a[3] = user_u64(ptr + 8);
	a[4] = user_u64(ptr + 16);
}

/* The arguments read straight from the context (a pointer into it may not be
 * kept: the verifier refuses a modified context pointer). */
#define x0 (ctx->args[0])
#define x1 (ctx->args[1])
#define x2 (ctx->args[2])
#define x3 (ctx->args[3])
#define x4 (ctx->args[4])

static __always_inline int on_enter(struct trace_event_raw_sys_enter *ctx, const int code)
{
	__u64 id = bpf_get_current_pid_tgid();
	if ((id >> 32) != target_tgid || stopped)
		return 0;
	__u32 tid = (__u32)id;
	struct inflight v = {};
	v.nr = code;
	switch (code) {
	case 0: /* epoll_create1 */
		v.a[0] = (int)x0;
		break;
	case 1: /* epoll_ctl */
		v.a[0] = (int)x0;
		v.a[1] = (int)x1;
		v.a[2] = (int)x2;
		if (x3) {
			v.a[3] = user_u32(x3);
			v.a[4] = user_u64(x3 + 4);
		} else {
			v.a[3] = -1;
		}
		break;
	case 2: /* epoll_wait */
	case 3: /* epoll_pwait */
		v.a[0] = (int)x0;
		v.a[1] = (int)x2;
		v.a[2] = (int)x3;
		v.p = x1;
		break;
	case 4: /* epoll_pwait2 */
		v.a[0] = (int)x0;
		v.a[1] = (int)x2;
		v.p = x1;
		v.a[2] = timespec_ns(x3, 0);
		break;
	case 5: /* poll */
		v.a[0] = (__u32)x1;
		v.a[1] = (int)x2;
		break;
	case 6: /* ppoll */
		v.a[0] = (__u32)x1;
		v.a[1] = timespec_ns(x2, 0);
		break;
	case 7: /* select */
		v.a[0] = (int)x0;
		v.a[1] = timespec_ns(x4, 1);
		break;
	case 8: /* pselect6 */
		v.a[0] = (int)x0;
		v.a[1] = timespec_ns(x4, 0);
		break;
	case 9: /* io_uring_setup */
		v.a[0] = (__u32)x0;
		v.a[1] = x1 ? user_u32(x1 + 8) : 0;
		break;
	case 10: /* io_uring_enter */
		v.a[0] = (__u32)x0;
		v.a[1] = (__u32)x1;
		v.a[2] = (__u32)x2;
		v.a[3] = (__u32)x3;
		break;
	case 11: /* io_uring_register */
		v.a[0] = (__u32)x0;
		v.a[1] = (__u32)x1;
		v.a[2] = (__u32)x3;
		break;
	case 12: /* accept */
		v.a[0] = (int)x0;
		v.p = x1;
		break;
	case 13: /* accept4 */
		v.a[0] = (int)x0;
		v.a[1] = (int)x3;
		v.p = x1;
		break;
	case 14: /* connect */
		v.a[0] = (int)x0;
		sockaddr_slots(x1, &v.a[1]);
		break;
	case 15: /* read */
	case 16: /* write */
		v.a[0] = (__u32)x0;
		v.a[1] = (__s64)x2;
		break;
	case 17: /* recvfrom */
		v.a[0] = (int)x0;
		v.a[1] = (__s64)x2;
		v.a[2] = (__u32)x3;
		v.a[3] = (__s64)x4;
		break;
	case 18: /* sendto */
		v.a[0] = (int)x0;
		v.a[1] = (__s64)x2;
		v.a[2] = (__u32)x3;
		sockaddr_slots(x4, &v.a[3]);
		break;
	case 19: /* openat */
		v.a[0] = (int)x0;
		v.a[1] = (int)x2;
		v.p = x1;
		break;
	case 20: /* close */
		v.a[0] = (__u32)x0;
		break;
	case 21: /* nanosleep */
		v.a[0] = timespec_ns(x0, 0);
		break;
	case 22: /* futex */
		v.a[0] = (__s64)x0;
		v.a[1] = (int)x1;
		/* Only plain FUTEX_WAIT (cmd 0) takes a relative timeout pointer. */
		if (((int)x1 & 127) == 0)
			v.a[2] = timespec_ns(x3, 0);
		break;
	case 23: /* socket */
		v.a[0] = (int)x0;
		v.a[1] = (int)x1;
		break;
	case 24: /* bind */
		v.a[0] = (int)x0;
		sockaddr_slots(x1, &v.a[1]);
		break;
	case 25: /* getsockname */
		v.a[0] = (int)x0;
		v.p = x1;
		break;
	}
	v.t0 = bpf_ktime_get_ns();
	bpf_map_update_elem(&calls, &tid, &v, BPF_ANY);
	return 0;
}

#undef x0
#undef x1
#undef x2
#undef x3
#undef x4

static __always_inline int at_exit_kind(const int code)
{
	switch (code) {
	case 2: case 3: case 4:
		return X_READY;
	case 12: case 13: case 25:
		return X_PEER;
	case 19:
		return X_PATH;
	}
	return X_NONE;
}

static __always_inline int on_exit(struct trace_event_raw_sys_exit *ctx, const int code)
{
	__u64 id = bpf_get_current_pid_tgid();
	if ((id >> 32) != target_tgid || stopped)
		return 0;
	__u64 t1 = bpf_ktime_get_ns();
	__u32 tid = (__u32)id, zero = 0;
	struct sys_rec *r = bpf_map_lookup_elem(&scratch, &zero);
	if (!r)
		return 0;
	__u64 p = 0;
	struct inflight *v = bpf_map_lookup_elem(&calls, &tid);
	r->kind = K_SYSCALL;
	r->code = code;
	r->tid = tid;
	r->t1 = t1;
	r->ret = ctx->ret;
	if (v && v->t0 && v->nr == code) {
		r->t0 = v->t0;
		p = v->p;
		__builtin_memcpy(r->a, v->a, sizeof(r->a));
		v->t0 = 0;
	} else {
		/* Its entry was before the probes were attached. */
		r->t0 = 0;
		__builtin_memset(r->a, 0, sizeof(r->a));
	}
	int kind = at_exit_kind(code);
	__u32 plen = 0;
	r->extra = kind;
	if (kind == X_READY) {
		__s64 n = r->ret > 0 ? r->ret : 0;
		if (n > MAX_READY)
			n = MAX_READY;
		plen = (__u32)n * EVENT_SIZE;
		if (plen)
			bpf_probe_read_user(r->payload, plen & (PAYLOAD - 1), (void *)p);
	} else if (kind == X_PEER) {
		if (r->ret >= 0 && p) {
			/* Two reads: a sockaddr_in may end where the page does. */
			bpf_probe_read_user(r->payload, 16, (void *)p);
			bpf_probe_read_user(r->payload + 16, 8, (void *)(p + 16));
			plen = 24;
		} else {
			r->extra = X_NONE;
		}
	} else if (kind == X_PATH) {
		long n = bpf_probe_read_user_str(r->payload, PATH_MAX_READ, (void *)p);
		plen = n > 1 ? (__u32)(n - 1) : 0;
	}
	r->plen = plen;
	__u64 size = offsetof(struct sys_rec, payload) + (plen & (PAYLOAD - 1));
	if (bpf_ringbuf_output(&rb, r, size, BPF_RB_NO_WAKEUP))
		count_lost();
	return 0;
}

#define CALL(code, name)                                                        \
	SEC("tracepoint/syscalls/sys_enter_" #name)                             \
	int enter_##name(struct trace_event_raw_sys_enter *ctx)                 \
	{                                                                       \
		return on_enter(ctx, code);                                     \
	}                                                                       \
	SEC("tracepoint/syscalls/sys_exit_" #name)                              \
	int exit_##name(struct trace_event_raw_sys_exit *ctx)                   \
	{                                                                       \
		return on_exit(ctx, code);                                      \
	}

CALL(0, epoll_create1)
CALL(1, epoll_ctl)
CALL(2, epoll_wait)
CALL(3, epoll_pwait)
CALL(4, epoll_pwait2)
CALL(5, poll)
CALL(6, ppoll)
CALL(7, select)
CALL(8, pselect6)
CALL(9, io_uring_setup)
CALL(10, io_uring_enter)
CALL(11, io_uring_register)
CALL(12, accept)
CALL(13, accept4)
CALL(14, connect)
CALL(15, read)
CALL(16, write)
CALL(17, recvfrom)
CALL(18, sendto)
CALL(19, openat)
CALL(20, close)
CALL(21, nanosleep)
CALL(22, futex)
CALL(23, socket)
CALL(24, bind)
CALL(25, getsockname)

static __always_inline void small(__u8 kind, __u32 tid, __s64 v1, __s64 v2, __u64 flags)
{
	struct small_rec *e = bpf_ringbuf_reserve(&rb, sizeof(*e), 0);
	if (!e) {
		count_lost();
		return;
	}
	e->kind = kind;
	e->tid = tid;
	e->t = bpf_ktime_get_ns();
	e->v1 = v1;
	e->v2 = v2;
	bpf_ringbuf_submit(e, flags);
}

SEC("tracepoint/signal/signal_deliver")
int on_signal(struct trace_event_raw_signal_deliver *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	if ((id >> 32) != target_tgid || stopped)
		return 0;
	small(K_SIGNAL, (__u32)id, ctx->sig, ctx->code, BPF_RB_NO_WAKEUP);
	return 0;
}

struct trace_event_raw_sched_process_exit___gm {
	bool group_dead;
} __attribute__((preserve_access_index));

SEC("tracepoint/sched/sched_process_exit")
int on_thread_exit(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	if ((id >> 32) != target_tgid || stopped)
		return 0;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	int code = BPF_CORE_READ(task, exit_code);
	int dead;
	struct trace_event_raw_sched_process_exit___gm *e = ctx;
	if (bpf_core_field_exists(e->group_dead))
		dead = BPF_CORE_READ(e, group_dead);
	else  /* before the field (6.16): the group's live count reached zero */
		dead = BPF_CORE_READ(task, signal, live.counter) == 0;
	__u32 tid = (__u32)id;
	struct inflight *v = bpf_map_lookup_elem(&calls, &tid);
	if (v && !v->t0)
		bpf_map_delete_elem(&calls, &tid);
	/* The whole group gone: wake the reader, which ends the recording. */
	small(K_EXIT, tid, code, dead, dead ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
	return 0;
}

/* io_uring's submission tracepoint is io_uring_submit_req from kernel 6.0,
 * io_uring_submit_sqe before (the same fields): the loader loads only the one
 * it is told to, and CO-RE finds the fields in whichever kernel runs it. */
struct trace_event_raw_io_uring_submit_req___gm {
	void *ctx;
	void *req;
	__u64 user_data;
	__u8 opcode;
} __attribute__((preserve_access_index));

struct trace_event_raw_io_uring_submit_sqe___gm {
	void *ctx;
	void *req;
	__u64 user_data;
	__u8 opcode;
} __attribute__((preserve_access_index));

struct trace_event_raw_io_uring_complete___gm {
	void *ctx;
	void *req;
	__u64 user_data;
	int res;
	unsigned int cflags;
} __attribute__((preserve_access_index));

static __always_inline void submitted(__u64 req, __u64 ring, __u64 user_data, __u8 opcode)
{
	__u64 id = bpf_get_current_pid_tgid();
	if ((id >> 32) != target_tgid || stopped)
		return;
	struct uring_req q = {
		.t = bpf_ktime_get_ns(), .ctx = ring, .user_data = user_data,
		.tid = (__u32)id, .opcode = opcode,
	};
	bpf_map_update_elem(&reqs, &req, &q, BPF_ANY);
}

SEC("tracepoint/io_uring/io_uring_submit_req")
int on_submit_req(void *ctx)
{
	struct trace_event_raw_io_uring_submit_req___gm *e = ctx;
	submitted((__u64)BPF_CORE_READ(e, req), (__u64)BPF_CORE_READ(e, ctx),
		  BPF_CORE_READ(e, user_data), BPF_CORE_READ(e, opcode));
	return 0;
}

SEC("tracepoint/io_uring/io_uring_submit_sqe")
int on_submit_sqe(void *ctx)
{
	struct trace_event_raw_io_uring_submit_sqe___gm *e = ctx;
	submitted((__u64)BPF_CORE_READ(e, req), (__u64)BPF_CORE_READ(e, ctx),
		  BPF_CORE_READ(e, user_data), BPF_CORE_READ(e, opcode));
	return 0;
}

/* Completions may run on an io-wq worker or in softirq context: matched by the
 * request, not by pid. */
SEC("tracepoint/io_uring/io_uring_complete")
int on_complete(void *ctx)
{
	struct trace_event_raw_io_uring_complete___gm *e = ctx;
	__u64 req = (__u64)BPF_CORE_READ(e, req);
	struct uring_req *q = bpf_map_lookup_elem(&reqs, &req);
	if (!q || stopped)
		return 0;
	struct uring_rec *r = bpf_ringbuf_reserve(&rb, sizeof(*r), 0);
	if (!r) {
		count_lost();
	} else {
		r->kind = K_URING;
		r->tid = q->tid;
		r->t_submit = q->t;
		r->t_complete = bpf_ktime_get_ns();
		r->ctx = q->ctx;
		r->user_data = BPF_CORE_READ(e, user_data);
		r->opcode = q->opcode;
		r->res = BPF_CORE_READ(e, res);
		r->cflags = BPF_CORE_READ(e, cflags);
		bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	}
	bpf_map_delete_elem(&reqs, &req);
	return 0;
}

/* The canary: the recorder's own getppid calls, once every probe is attached. */
SEC("tracepoint/syscalls/sys_enter_getppid")
int on_canary(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	if ((id >> 32) != canary_tgid)
		return 0;
	small(K_CANARY, (__u32)id, 0, 0, BPF_RB_FORCE_WAKEUP);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
