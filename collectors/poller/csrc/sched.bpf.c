// SPDX-License-Identifier: GPL-2.0
// The scheduling recorder's probes for the ring-buffer transport (libbpf CO-RE):
// what collectors/poller/sched_probes.py's bpftrace program records, as binary
// records in a BPF ring buffer drained by sched_loader.c, which prints that
// program's lines (O, F, W, N). Submitted without waking the reader: the
// switches of a busy program are tens of thousands a second. A switch out
// carries the thread's timeslices so far (sched_info.pcount, schedstat's third
// field), so a reader sees a switch the kernel skipped the probe of.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define CLONE_THREAD 0x00010000

const volatile __u32 target_tgid = 0;
/* Set by the loader when it stops (detaching takes seconds). */
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

/* The target's threads: seeded by the loader from /proc/PID/task, joined by
 * every thread that leaves a CPU and every thread the target creates. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} threads SEC(".maps");

struct sched_rec {
	__u8 kind; /* 'O' on, 'F' off, 'W' woken, 'N' new thread */
	__u8 pad[3];
	__u32 cpu;
	__u64 t;
	__u32 tid;
	__s32 target_cpu;
	__s64 state;
	__u64 slices; /* 'F': the thread's timeslices so far */
};

static __always_inline void emit(__u8 kind, __u32 tid, __s64 state, __s32 target_cpu,
				 __u64 slices)
{
	struct sched_rec *e = bpf_ringbuf_reserve(&rb, sizeof(*e), 0);
	if (!e) {
		__u32 zero = 0;
		__u64 *n = bpf_map_lookup_elem(&lost, &zero);
		if (n)
			*n += 1;
		return;
	}
	e->kind = kind;
	e->cpu = bpf_get_smp_processor_id();
	e->t = bpf_ktime_get_ns();
	e->tid = tid;
	e->target_cpu = target_cpu;
	e->state = state;
	e->slices = slices;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

static __always_inline int followed(__u32 tid)
{
	return bpf_map_lookup_elem(&threads, &tid) != NULL;
}

SEC("tracepoint/sched/sched_switch")
int on_switch(struct trace_event_raw_sched_switch *ctx)
{
	if (stopped)
		return 0;
	__u32 prev = ctx->prev_pid, next = ctx->next_pid;
	if ((bpf_get_current_pid_tgid() >> 32) == target_tgid) {
		/* Written once per thread: replacing an element on every switch
		 * races with the lookups on other CPUs. */
		if (!followed(prev)) {
			__u8 one = 1;
			bpf_map_update_elem(&threads, &prev, &one, BPF_NOEXIST);
		}
		/* The current task is prev: the tracepoint comes before the switch,
		 * after prev's arrival was counted. */
		struct task_struct *cur = bpf_get_current_task_btf();
		emit('F', prev, ctx->prev_state, 0, cur->sched_info.pcount);
	}
	if (followed(next))
		emit('O', next, 0, 0, 0);
	return 0;
}

static __always_inline int woken(struct trace_event_raw_sched_wakeup_template *ctx)
{
	if (stopped)
		return 0;
	__u32 tid = ctx->pid;
	if (followed(tid))
		emit('W', tid, 0, ctx->target_cpu, 0);
	return 0;
}

SEC("tracepoint/sched/sched_wakeup")
int on_wakeup(struct trace_event_raw_sched_wakeup_template *ctx)
{
	return woken(ctx);
}

SEC("tracepoint/sched/sched_wakeup_new")
int on_wakeup_new(struct trace_event_raw_sched_wakeup_template *ctx)
{
	return woken(ctx);
}

SEC("tracepoint/task/task_newtask")
int on_newtask(struct trace_event_raw_task_newtask *ctx)
{
	if (stopped || (bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;
	if (!(ctx->clone_flags & CLONE_THREAD))
		return 0;
	__u32 tid = ctx->pid;
	__u8 one = 1;
	bpf_map_update_elem(&threads, &tid, &one, BPF_ANY);
	emit('N', tid, 0, 0, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
