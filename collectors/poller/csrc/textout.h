// SPDX-License-Identifier: GPL-2.0
// The loaders' text output: lines built in a large buffer and written in one
// write(2) per drain of the ring buffer (numbers formatted by hand: printf's
// cost per record would be the loader's largest).
#ifndef GMPSCOPE_TEXTOUT_H
#define GMPSCOPE_TEXTOUT_H
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#define OUT_BUF (4 << 20)

static int out_fd = -1;
static char *buf;
static size_t used;
static int write_failed;

static void flush_out(void)
{
	size_t off = 0;
	while (off < used) {
		ssize_t n = write(out_fd, buf + off, used - off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			write_failed = errno;
			break;
		}
		off += (size_t)n;
	}
	used = 0;
}

static void room(size_t n)
{
	if (used + n > OUT_BUF)
		flush_out();
}

static void put_str(const char *s, size_t n)
{
	room(n);
	memcpy(buf + used, s, n);
	used += n;
}

static void put_u64(unsigned long long v)
{
	char tmp[24];
	int i = sizeof tmp;
	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put_str(tmp + i, sizeof tmp - i);
}

static void put_s64(long long v)
{
	if (v < 0) {
		put_str("-", 1);
		put_u64(0ULL - (unsigned long long)v);
	} else {
		put_u64((unsigned long long)v);
	}
}

#define LIT(s) put_str(s, sizeof(s) - 1)
#define SP() put_str(" ", 1)
#define NL() put_str("\n", 1)

/* The output file and its buffer; 0 on success. */
static int open_out(const char *path)
{
	buf = malloc(OUT_BUF);
	out_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	return buf && out_fd >= 0 ? 0 : -1;
}

/* The lost-record counter's sum over the CPUs (a per-CPU array's one element). */
static unsigned long long sum_lost(int map_fd)
{
	int ncpu = libbpf_num_possible_cpus();
	unsigned long long lost = 0;
	if (ncpu <= 0)
		return 0;
	__u64 *per = calloc((size_t)ncpu, sizeof(*per));
	__u32 zero = 0;
	if (per && bpf_map_lookup_elem(map_fd, &zero, per) == 0)
		for (int i = 0; i < ncpu; i++)
			lost += per[i];
	free(per);
	return lost;
}

static unsigned long long mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}
#endif
