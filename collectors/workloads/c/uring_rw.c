/*
 * uring_rw: a small io_uring workload for the poller collector's tests.
 *
 * Uses raw system calls (syscall(2) and <linux/io_uring.h>, no liburing):
 * io_uring_setup, io_uring_register (IORING_REGISTER_FILES), then
 * ROUNDS rounds of: queue BATCH writes of a block to a temporary file and
 * submit them with one io_uring_enter(to_submit=BATCH, min_complete=BATCH,
 * IORING_ENTER_GETEVENTS); then the same for reads, checking the data.
 *
 * Usage: uring_rw FILE [ROUNDS]. Exit status 0 on success, 2 when the
 * kernel refuses io_uring (io_uring_setup fails: ENOSYS, EPERM), 1 on any
 * other failure. Prints one summary line.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BATCH 4
#define BLOCK 4096

static int ring_fd;
static unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
static struct io_uring_sqe *sqes;
static struct io_uring_cqe *cqes;

static int fail(const char *what) {
    fprintf(stderr, "uring_rw: %s: %s\n", what, strerror(errno));
    return 1;
}

static void queue(int op, unsigned idx, void *buf, unsigned long long off) {
    unsigned tail = *sq_tail;
    struct io_uring_sqe *sqe = &sqes[tail & *sq_mask];
    memset(sqe, 0, sizeof(*sqe));
    sqe->opcode = (unsigned char)op;
    sqe->flags = IOSQE_FIXED_FILE;
    sqe->fd = 0; /* index 0 of the registered files */
    sqe->addr = (unsigned long long)(uintptr_t)buf;
    sqe->len = BLOCK;
    sqe->off = off;
    sqe->user_data = idx;
    sq_array[tail & *sq_mask] = tail & *sq_mask;
    __atomic_store_n(sq_tail, tail + 1, __ATOMIC_RELEASE);
}

static int reap(int want) {
    int got = 0;
    while (got < want) {
        unsigned head = *cq_head;
        if (head == __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE))
            break;
        struct io_uring_cqe *cqe = &cqes[head & *cq_mask];
        if (cqe->res != BLOCK) {
            fprintf(stderr, "uring_rw: op %llu returned %d\n",
                    (unsigned long long)cqe->user_data, cqe->res);
            return -1;
        }
        __atomic_store_n(cq_head, head + 1, __ATOMIC_RELEASE);
        got++;
    }
    return got;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: uring_rw FILE [ROUNDS]\n");
        return 1;
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 8;
    struct io_uring_params p;
    memset(&p, 0, sizeof(p));
    ring_fd = (int)syscall(__NR_io_uring_setup, 8, &p);
    if (ring_fd < 0) {
        fprintf(stderr, "uring_rw: io_uring_setup: %s\n", strerror(errno));
        return 2;
    }
    size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    char *sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring_fd,
                    IORING_OFF_SQ_RING);
    char *cq = mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring_fd,
                    IORING_OFF_CQ_RING);
    sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_POPULATE, ring_fd, IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED)
        return fail("mmap");
    sq_tail = (unsigned *)(sq + p.sq_off.tail);
    sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    sq_array = (unsigned *)(sq + p.sq_off.array);
    cq_head = (unsigned *)(cq + p.cq_off.head);
    cq_tail = (unsigned *)(cq + p.cq_off.tail);
    cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);

    int file = open(argv[1], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (file < 0)
        return fail("open");
    if (syscall(__NR_io_uring_register, ring_fd, IORING_REGISTER_FILES, &file, 1) < 0)
        return fail("io_uring_register");

    static char out[BATCH][BLOCK], in[BATCH][BLOCK];
    long submitted = 0;
    for (int r = 0; r < rounds; r++) {
        for (int op = 0; op < 2; op++) {
            for (unsigned i = 0; i < BATCH; i++) {
                if (op == 0) {
                    memset(out[i], 'a' + (r * BATCH + i) % 26, BLOCK);
                    queue(IORING_OP_WRITE, i, out[i], (unsigned long long)i * BLOCK);
                } else {
                    queue(IORING_OP_READ, i, in[i], (unsigned long long)i * BLOCK);
                }
            }
            int done = 0;
            int to_submit = BATCH;
            while (done < BATCH) {
                long n = syscall(__NR_io_uring_enter, ring_fd, to_submit, BATCH - done,
                                 IORING_ENTER_GETEVENTS, NULL, 0);
                if (n < 0)
                    return fail("io_uring_enter");
                submitted += n;
                to_submit = 0;
                int got = reap(BATCH - done);
                if (got < 0)
                    return 1;
                done += got;
            }
        }
        if (memcmp(out, in, sizeof(out)) != 0) {
            fprintf(stderr, "uring_rw: round %d read back other data\n", r);
            return 1;
        }
    }
    if (syscall(__NR_io_uring_register, ring_fd, IORING_UNREGISTER_FILES, NULL, 0) < 0)
        return fail("io_uring_unregister");
    close(file);
    close(ring_fd);
    printf("uring_rw: %d rounds, %ld submissions, %d blocks of %d bytes per batch\n", rounds,
           submitted, BATCH, BLOCK);
    return 0;
}
