/*
 * uring_sqfull: an io_uring producer whose batches are bigger than its ring.
 *
 * Raw system calls (no liburing): a ring of ENTRIES submission entries; ROUNDS
 * times, try to queue BATCH (> ENTRIES) no-op requests, stopping when the
 * submission queue is full, and submit the batch with
 * io_uring_enter(to_submit=BATCH, min_complete=0); the kernel submits only what
 * the queue held and returns that count (a short submit). Completions are
 * reaped after each round. Prints one line per round. Usage: uring_sqfull
 * [ROUNDS]. Exit 2 when io_uring_setup fails (io_uring disabled), else 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/io_uring.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ENTRIES 4
#define BATCH 6

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    struct io_uring_params p;
    memset(&p, 0, sizeof(p));
    int fd = (int)syscall(__NR_io_uring_setup, ENTRIES, &p);
    if (fd < 0) {
        fprintf(stderr, "uring_sqfull: io_uring_setup: %s\n", strerror(errno));
        return 2;
    }
    size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    char *sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                    IORING_OFF_SQ_RING);
    char *cq = mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                    IORING_OFF_CQ_RING);
    struct io_uring_sqe *sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe),
                                     PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                                     IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) {
        perror("uring_sqfull: mmap");
        return 1;
    }
    unsigned *tail = (unsigned *)(sq + p.sq_off.tail);
    unsigned *head = (unsigned *)(sq + p.sq_off.head);
    unsigned *mask = (unsigned *)(sq + p.sq_off.ring_mask);
    unsigned *array = (unsigned *)(sq + p.sq_off.array);
    unsigned *cq_head = (unsigned *)(cq + p.cq_off.head);
    unsigned *cq_tail = (unsigned *)(cq + p.cq_off.tail);
    long asked = 0, accepted = 0;
    for (int r = 0; r < rounds; r++) {
        unsigned t = *tail;
        unsigned queued = 0;
        /* The queue holds ENTRIES: the rest of the batch does not fit. */
        while (queued < BATCH && t - __atomic_load_n(head, __ATOMIC_ACQUIRE) < p.sq_entries) {
            struct io_uring_sqe *sqe = &sqes[t & *mask];
            memset(sqe, 0, sizeof(*sqe));
            sqe->opcode = IORING_OP_NOP;
            sqe->user_data = (unsigned long long)(r * BATCH + queued);
            array[t & *mask] = t & *mask;
            t++;
            queued++;
        }
        __atomic_store_n(tail, t, __ATOMIC_RELEASE);
        long n = syscall(__NR_io_uring_enter, fd, BATCH, 0, 0, NULL, 0);
        if (n < 0) {
            fprintf(stderr, "uring_sqfull: io_uring_enter: %s\n", strerror(errno));
            return 1;
        }
        asked += BATCH;
        accepted += n;
        /* Reap whatever completed (no-ops complete at submission). */
        __atomic_store_n(cq_head, __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
        printf("round %d: batch %d, queued %u, submitted %ld\n", r, BATCH, queued, n);
    }
    printf("uring_sqfull: asked %ld, submitted %ld\n", asked, accepted);
    close(fd);
    return 0;
}
