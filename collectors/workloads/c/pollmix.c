/*
 * pollmix: every readiness and socket system call the poller collector
 * covers that Go programs do not make themselves, each called for real
 * through syscall(2) (so the C library cannot substitute another call):
 * poll, ppoll, select, pselect6, epoll_wait, epoll_pwait, epoll_pwait2,
 * accept, accept4, connect, sendto, recvfrom, plus openat, read, write,
 * close, nanosleep and futex. Everything is on loopback or /dev/null.
 *
 * Each wait is made twice: once with nothing ready (it times out after
 * a few ms) and once with a datagram waiting (it returns at once).
 * Usage: pollmix [ROUNDS]. Exit status 0 on success.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CHECK(x)                                                                        \
    do {                                                                                \
        if ((x) < 0) {                                                                  \
            fprintf(stderr, "pollmix: %s: %s (line %d)\n", #x, strerror(errno), __LINE__); \
            return 1;                                                                   \
        }                                                                               \
    } while (0)

static int udp_pair(int *rx, int *tx, struct sockaddr_in *addr) {
    socklen_t len = sizeof(*addr);
    memset(addr, 0, sizeof(*addr));
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    *rx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    *tx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (*rx < 0 || *tx < 0 || bind(*rx, (struct sockaddr *)addr, sizeof(*addr)) < 0 ||
        getsockname(*rx, (struct sockaddr *)addr, &len) < 0)
        return -1;
    return 0;
}

static long send_one(int tx, struct sockaddr_in *addr) {
    return syscall(SYS_sendto, tx, "ping", 4, 0, (struct sockaddr *)addr, sizeof(*addr));
}

static long recv_one(int rx) {
    char buf[64];
    struct sockaddr_in from;
    socklen_t len = sizeof(from);
    return syscall(SYS_recvfrom, rx, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from,
                   &len);
}

static int round_of_waits(int rx, int tx, struct sockaddr_in *addr, int ep) {
    struct pollfd pfd = {.fd = rx, .events = POLLIN};
    /* ppoll and pselect6 write the time left back into their timeout,
     * so every call gets a fresh 3 ms. */
    struct timespec ts;
    struct timeval tv;
    fd_set set;
    struct epoll_event evs[4];

    for (int ready = 0; ready < 2; ready++) {
        if (ready)
            CHECK(send_one(tx, addr));
        CHECK(syscall(SYS_poll, &pfd, 1, 3));
        ts.tv_sec = 0;
        ts.tv_nsec = 3000000;
        CHECK(syscall(SYS_ppoll, &pfd, 1, &ts, NULL, 0));
        FD_ZERO(&set);
        FD_SET(rx, &set);
        tv.tv_sec = 0;
        tv.tv_usec = 3000;
        CHECK(syscall(SYS_select, rx + 1, &set, NULL, NULL, &tv));
        FD_ZERO(&set);
        FD_SET(rx, &set);
        ts.tv_nsec = 3000000;
        CHECK(syscall(SYS_pselect6, rx + 1, &set, NULL, NULL, &ts, NULL));
        CHECK(syscall(SYS_epoll_wait, ep, evs, 4, 3));
        CHECK(syscall(SYS_epoll_pwait, ep, evs, 4, 3, NULL, 8));
#ifdef SYS_epoll_pwait2
        /* ENOSYS on kernels before 5.11: that is recorded too. */
        ts.tv_nsec = 3000000;
        syscall(SYS_epoll_pwait2, ep, evs, 4, &ts, NULL, 8);
#endif
        if (ready)
            CHECK(recv_one(rx));
    }
    return 0;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 2;
    int rx, tx;
    struct sockaddr_in addr;
    CHECK(udp_pair(&rx, &tx, &addr));

    int ep = (int)syscall(SYS_epoll_create1, EPOLL_CLOEXEC);
    CHECK(ep);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = rx};
    CHECK(syscall(SYS_epoll_ctl, ep, EPOLL_CTL_ADD, rx, &ev));
    ev.events = EPOLLIN | EPOLLET;
    CHECK(syscall(SYS_epoll_ctl, ep, EPOLL_CTL_MOD, rx, &ev));

    for (int r = 0; r < rounds; r++)
        if (round_of_waits(rx, tx, &addr, ep))
            return 1;
    CHECK(syscall(SYS_epoll_ctl, ep, EPOLL_CTL_DEL, rx, NULL));
    /* Nothing is queued now: recvfrom fails with EAGAIN. */
    if (recv_one(rx) >= 0 || errno != EAGAIN)
        fprintf(stderr, "pollmix: expected EAGAIN from an empty socket\n");

    /* TCP on loopback: a listener, two connects, accept and accept4. */
    int ln = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in la = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(la);
    CHECK(ln);
    CHECK(bind(ln, (struct sockaddr *)&la, sizeof(la)));
    CHECK(getsockname(ln, (struct sockaddr *)&la, &len));
    CHECK(listen(ln, 4));
    int c1 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int c2 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(syscall(SYS_connect, c1, (struct sockaddr *)&la, sizeof(la)));
    CHECK(syscall(SYS_connect, c2, (struct sockaddr *)&la, sizeof(la)));
    int s1 = (int)syscall(SYS_accept, ln, NULL, NULL);
    CHECK(s1);
    int s2 = (int)syscall(SYS_accept4, ln, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    CHECK(s2);
    char buf[16];
    CHECK(syscall(SYS_write, c1, "hello", 5));
    CHECK(syscall(SYS_read, s1, buf, sizeof(buf)));

    /* Files, sleeping and a futex that is not waited on. */
    int dn = (int)syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDWR | O_CLOEXEC);
    CHECK(dn);
    CHECK(syscall(SYS_write, dn, "x", 1));
    CHECK(syscall(SYS_read, dn, buf, sizeof(buf)));
    struct timespec nap = {.tv_sec = 0, .tv_nsec = 1000000};
    CHECK(syscall(SYS_nanosleep, &nap, NULL));
    uint32_t word = 1;
    /* The word is not 0: FUTEX_WAIT returns EAGAIN at once. */
    syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &nap, NULL, 0);
    CHECK(syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0));

    int fds[] = {dn, s2, s1, c2, c1, ln, ep, tx, rx};
    for (unsigned i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        CHECK(syscall(SYS_close, fds[i]));
    printf("pollmix: %d rounds\n", rounds);
    return 0;
}
