/* The ordering state machine (mirrors v2/order.py and v2/order_misc.py):
 * decides whether the event at the head of a thread's cursor may be emitted
 * now, validates it against the emulated scheduler state and queues the
 * resulting events. */
#include <stdio.h>

#include "order.h"


static const char *GO_STATUS_NAMES[5] = {"Bad", "Runnable", "Running", "Syscall", "Waiting"};
static const char *PROC_STATUS_NAMES[5] = {"Bad", "Running", "Idle", "Syscall", "SyscallAbandoned"};
static const uint8_t GO_STATUS_TO_STATE[5] = {GO_UNDETERMINED, GO_RUNNABLE, GO_RUNNING, GO_SYSCALL,
                                              GO_WAITING};
static const uint8_t PROC_STATUS_TO_STATE[5] = {PROC_UNDETERMINED, PROC_RUNNING, PROC_IDLE,
                                                PROC_RUNNING, PROC_IDLE};

/* ------------------------------------------------------------ state tables */

static RState *rstate(Dec *d, uint64_t idx) { return &VEC_AT(&d->rstates, RState, idx); }

/* Small non-negative ids (the runtime's goroutine and proc ids are) are
 * also indexed densely: id -> rstate index + 1, 0 for none. */
static uint32_t *dense_of(Dec *d, U64Map *m, size_t *n)
{
    if (m == &d->gs) {
        *n = d->gs_dense_n;
        return d->gs_dense;
    }
    *n = d->ps_dense_n;
    return d->ps_dense;
}

static void dense_set(Dec *d, U64Map *m, int64_t id, uint32_t v)
{
    if (id < 0 || id >= DENSE_IDS)
        return;
    uint32_t **arr = m == &d->gs ? &d->gs_dense : &d->ps_dense;
    size_t *n = m == &d->gs ? &d->gs_dense_n : &d->ps_dense_n;
    if ((size_t)id >= *n) {
        size_t nn = *n ? *n : 1024;
        while (nn <= (size_t)id)
            nn *= 2;
        uint32_t *na = (uint32_t *)realloc(*arr, nn * sizeof(uint32_t));
        if (!na)
            return; /* the map still has it */
        memset(na + *n, 0, (nn - *n) * sizeof(uint32_t));
        *arr = na;
        *n = nn;
    }
    (*arr)[id] = v;
}

RState *ord_find(Dec *d, U64Map *m, int64_t id)
{
    size_t n;
    uint32_t *arr = dense_of(d, m, &n);
    if (id >= 0 && (size_t)id < n) {
        uint32_t v = arr[id];
        if (v)
            return rstate(d, v - 1);
        if (id < DENSE_IDS)
            return NULL; /* every small id present is in the dense table */
    }
    uint64_t *v = map_get(m, (uint64_t)id);
    return v ? rstate(d, *v) : NULL;
}

static RState *create(Dec *d, U64Map *m, int64_t id, uint8_t status, uint64_t sgen)
{
    uint64_t idx;
    if (d->rfree.n) {
        d->rfree.n -= sizeof(uint32_t);
        idx = *(uint32_t *)(d->rfree.p + d->rfree.n);
    } else {
        RState z;
        memset(&z, 0, sizeof z);
        idx = VEC_LEN(&d->rstates, RState);
        if (idx >= UINT32_MAX || buf_put(&d->rstates, &z, sizeof z))
            return NULL;
    }
    if (map_put(m, (uint64_t)id, idx))
        return NULL;
    dense_set(d, m, id, (uint32_t)(idx + 1));
    RState *st = rstate(d, idx);
    st->id = id;
    st->status = status;
    st->sgen = sgen;
    st->seq = 0;
    st->regions.n = 0;
    st->ranges.n = 0;
    return st;
}

static int destroy(Dec *d, U64Map *m, int64_t id)
{
    uint64_t *v = map_get(m, (uint64_t)id);
    if (!v)
        return 0;
    uint32_t idx = (uint32_t)*v;
    map_del(m, (uint64_t)id);
    dense_set(d, m, id, 0);
    return buf_put(&d->rfree, &idx, sizeof idx);
}

static MRec *mfind(Dec *d, int64_t id)
{
    uint64_t *v = map_get(&d->mmap, (uint64_t)id);
    return v ? &VEC_AT(&d->mlist, MRec, *v) : NULL;
}

static int64_t madd(Dec *d, int64_t id, int64_t g, int64_t p)
{
    MRec r = {id, g, p};
    uint64_t idx = VEC_LEN(&d->mlist, MRec);
    if (map_put(&d->mmap, (uint64_t)id, idx) || buf_put(&d->mlist, &r, sizeof r))
        return -1;
    return (int64_t)idx;
}

/* ------------------------------------------------------------ queue */

static int queue_grow(Dec *d)
{
    size_t ncap = d->qcap ? d->qcap * 2 : 64; /* a power of two: index by mask */
    QEv *nq = (QEv *)malloc(ncap * sizeof(QEv));
    if (!nq)
        return -1;
    QEv *old = (QEv *)d->queue.p;
    for (size_t i = 0; i < d->qlen; i++)
        nq[i] = old[(d->qhead + i) & (d->qcap - 1)];
    free(d->queue.p);
    d->queue.p = (uint8_t *)nq;
    d->queue.cap = ncap * sizeof(QEv);
    d->qcap = ncap;
    d->qhead = 0;
    return 0;
}

/* The next free queue slot (NULL when out of memory). */
static inline QEv *queue_slot(Dec *d)
{
    if (d->qlen == d->qcap && queue_grow(d))
        return NULL;
    QEv *q = &((QEv *)d->queue.p)[(d->qhead + d->qlen) & (d->qcap - 1)];
    d->qlen++;
    return q;
}

int queue_push(Dec *d, const QEv *q)
{
    QEv *slot = queue_slot(d);
    if (!slot)
        return -1;
    *slot = *q;
    return 0;
}

int ord_push(Dec *d, const Cursor *c, int64_t m, int64_t p, int64_t g)
{
    QEv *q = queue_slot(d);
    if (!q)
        return -1;
    q->typ = c->typ;
    q->time = c->time;
    memcpy(q->a, c->a, sizeof q->a);
    q->m = m;
    q->p = p;
    q->g = g;
    return 0;
}

static int push_raw(Dec *d, uint16_t typ, int64_t t, uint64_t a0, uint64_t a1, uint64_t a2,
                    uint64_t a3, int64_t m, int64_t p, int64_t g)
{
    QEv q = {typ, t, {a0, a1, a2, a3}, m, p, g};
    return queue_push(d, &q);
}

void order_free(Dec *d)
{
    size_t n = VEC_LEN(&d->rstates, RState);
    for (size_t i = 0; i < n; i++) {
        buf_free(&rstate(d, i)->regions);
        buf_free(&rstate(d, i)->ranges);
    }
    buf_free(&d->rstates);
    buf_free(&d->rfree);
    free(d->gs_dense);
    free(d->ps_dense);
    d->gs_dense = d->ps_dense = NULL;
    d->gs_dense_n = d->ps_dense_n = 0;
    map_free(&d->gs);
    map_free(&d->ps);
    map_free(&d->mmap);
    buf_free(&d->mlist);
    map_free(&d->tasks);
    buf_free(&d->taskrecs);
    buf_free(&d->taskfree);
    buf_free(&d->queue);
    d->qcap = d->qlen = d->qhead = 0;
}

/* ------------------------------------------------------------ checks */

int ord_check_ctx(int64_t p, int64_t g, int64_t m, int rm, int rp, int rg, Err *err)
{
    if (rm == MUST && m == NONE_ID)
        FAIL("expected a thread but didn't have one");
    if (rm == MUST_NOT && m != NONE_ID)
        FAIL("expected no thread but had one");
    if (rp == MUST && p == NONE_ID)
        FAIL("expected a proc but didn't have one");
    if (rp == MUST_NOT && p != NONE_ID)
        FAIL("expected no proc but had one");
    if (rg == MUST && g == NONE_ID)
        FAIL("expected a goroutine but didn't have one");
    if (rg == MUST_NOT && g != NONE_ID)
        FAIL("expected no goroutine but had one");
    return 0;
}

int ord_check_user(int64_t m, int64_t p, int64_t g, Err *err)
{
    if (m == NONE_ID || p == NONE_ID || g == NONE_ID)
        return ord_check_ctx(p, g, m, MUST, MUST, MUST, err);
    return 0;
}

static inline int succeeds(uint64_t sgen, uint64_t seq, uint64_t gen, uint64_t nw)
{
    return sgen == gen && nw == seq + 1;
}


static RState *running_g(Dec *d, int typ, int64_t g, uint8_t want, Err *err)
{
    char namebuf[32];
    RState *st = ord_find(d, &d->gs, g);
    if (!st) {
        set_err(err, -1, "event %s for goroutine (%lld) that doesn't exist", NAME(typ), LL(g));
        return NULL;
    }
    if (st->status != want) {
        const char *w = (want == GS_SYSCALL && typ == EV_GO_DESTROY_SYSCALL) ? "Syscall" : "Running";
        set_err(err, -1, "%s event for goroutine that's not %s", NAME(typ), w);
        return NULL;
    }
    return st;
}

RState *ord_pstate(Dec *d, int64_t pid, int typ, const char *what, Err *err)
{
    char namebuf[32];
    RState *st = ord_find(d, &d->ps, pid);
    if (!st)
        set_err(err, -1, "%s proc %lld found during %s", what, LL(pid), NAME(typ));
    return st;
}

/* ------------------------------------------------------------ advance */

/* Try to advance the event at the head of cursor c. *ok = 1 when it (and
 * possibly derived events) was queued. Returns -1 when the trace is broken. */
int order_advance(Dec *d, Cursor *c, int *ok, Err *err)
{
    char namebuf[32];
    uint64_t gen = d->gen.gen;
    if (d->initial_gen == 0)
        d->initial_gen = gen;
    int64_t m = VEC_AT(&d->gen.ms, int64_t, c->mi);
    int64_t p = NONE_ID, g = NONE_ID;
    int64_t mi = c->mrec;
    if (m != NONE_ID && mi < 0) {
        uint64_t *v = map_get(&d->mmap, (uint64_t)m);
        if (v) {
            mi = (int64_t)*v;
        } else {
            /* Created even when the event cannot advance yet (Go does too). */
            mi = madd(d, m, NONE_ID, NONE_ID);
            if (mi < 0)
                NOMEM();
        }
        c->mrec = mi;
    }
    if (mi >= 0) {
        MRec *r = &VEC_AT(&d->mlist, MRec, mi);
        p = r->p;
        g = r->g;
    }
    int typ = c->typ;
    uint64_t *a = c->a;
    int64_t np = p, ng = g; /* the new context */
    *ok = 0;
    RState *st;
    switch (typ) {
    /* ---------------------------------------------------------- procs */
    case EV_PROC_STATUS: {
        int64_t pid = (int64_t)a[0];
        uint64_t status = a[1];
        if (status >= 5)
            FAIL("invalid status for proc %lld: %llu", LL(pid), ULL(status));
        uint64_t old = PROC_STATUS_TO_STATE[status];
        st = ord_find(d, &d->ps, pid);
        if (st) {
            if (status == PS_SYSCALL_ABANDONED && st->status == PS_SYSCALL) {
                /* Nothing was lost after all: the P is still known to be in a syscall. */
                old = PROC_RUNNING;
                a[1] = PS_SYSCALL;
            } else if (status == PS_SYSCALL_ABANDONED && st->status == PS_SYSCALL_ABANDONED) {
                old = PROC_IDLE;
                a[1] = PS_SYSCALL_ABANDONED;
            } else if (st->status != status) {
                FAIL("inconsistent status for proc %lld: old %s vs. new %s", LL(pid),
                     PROC_STATUS_NAMES[st->status], PROC_STATUS_NAMES[status]);
            }
            st->sgen = gen;
            st->seq = 0;
        } else {
            if (!create(d, &d->ps, pid, (uint8_t)status, gen))
                NOMEM();
            old = gen == d->initial_gen ? PROC_UNDETERMINED : PROC_NOT_EXIST;
        }
        a[2] = old;
        np = (status == PS_RUNNING || status == PS_SYSCALL) ? pid : p;
        int64_t em = m, ep = p, eg = g;
        if (status == PS_SYSCALL_ABANDONED && old == PROC_RUNNING) {
            /* Report it in the context of the thread the P is still bound to. */
            int found = 0;
            size_t n = VEC_LEN(&d->mlist, MRec);
            for (size_t i = 0; i < n; i++) {
                MRec *r = &VEC_AT(&d->mlist, MRec, i);
                if (r->p == pid) {
                    em = r->id;
                    ep = pid;
                    eg = r->g;
                    found = 1;
                }
            }
            if (!found)
                FAIL("failed to find sched context for proc %lld that's about to be stolen", LL(pid));
        }
        if (ord_push(d, c, em, ep, eg))
            NOMEM();
        break;
    }
    case EV_PROC_START: {
        int64_t pid = (int64_t)a[0];
        st = ord_find(d, &d->ps, pid);
        if (!st || st->status != PS_IDLE || !succeeds(st->sgen, st->seq, gen, a[1]) || p != NONE_ID)
            return 0;
        if (ord_check_ctx(p, g, m, MUST, MUST_NOT, MAY, err))
            return -1;
        st->status = PS_RUNNING;
        st->sgen = gen;
        st->seq = a[1];
        if (ord_push(d, c, m, p, g))
            NOMEM();
        np = pid;
        break;
    }
    case EV_PROC_STOP:
        st = ord_find(d, &d->ps, p);
        if (!st)
            FAIL("event %s for proc (%lld) that doesn't exist", NAME(typ), LL(p));
        if (st->status != PS_RUNNING && st->status != PS_SYSCALL)
            FAIL("%s event for proc that's not Running or Syscall", NAME(typ));
        if (ord_check_ctx(p, g, m, MUST, MUST, MAY, err))
            return -1;
        st->status = PS_IDLE;
        if (ord_push(d, c, m, p, g))
            NOMEM();
        np = NONE_ID;
        break;
    case EV_PROC_STEAL: {
        int64_t pid = (int64_t)a[0];
        st = ord_find(d, &d->ps, pid);
        if (!st || (st->status != PS_SYSCALL && st->status != PS_SYSCALL_ABANDONED) ||
            !succeeds(st->sgen, st->seq, gen, a[1]))
            return 0;
        if (ord_check_ctx(p, g, m, MUST, MAY, MAY, err))
            return -1;
        uint8_t old = st->status;
        a[3] = old; /* lets the event report Idle->Idle when information was lost */
        st->status = PS_IDLE;
        st->sgen = gen;
        st->seq = a[1];
        if (old == PS_SYSCALL_ABANDONED) {
            if (ord_push(d, c, m, p, g))
                NOMEM();
            break;
        }
        int64_t victim = (int64_t)a[2];
        if (victim == m) {
            if (p != pid)
                FAIL("tried to self-steal proc %lld (thread %lld), but got proc %lld instead",
                     LL(pid), LL(victim), LL(p));
            if (ord_push(d, c, m, p, g))
                NOMEM();
            np = NONE_ID;
            break;
        }
        MRec *vst = mfind(d, victim);
        if (!vst)
            FAIL("stole proc from non-existent thread %lld", LL(victim));
        if (vst->p != pid)
            FAIL("tried to steal proc %lld from thread %lld, but got proc %lld instead", LL(pid),
                 LL(victim), LL(vst->p));
        vst->p = NONE_ID; /* the victim may now leave its syscall */
        if (ord_push(d, c, m, p, g))
            NOMEM();
        break;
    }
    /* ---------------------------------------------------------- goroutines */
    case EV_GO_STATUS:
    case EV_GO_STATUS_STACK: {
        int64_t gid = (int64_t)a[0], mid = (int64_t)a[1];
        uint64_t status = a[2];
        if (status >= 5)
            FAIL("invalid status for goroutine %lld: %llu", LL(gid), ULL(status));
        uint64_t old = GO_STATUS_TO_STATE[status];
        st = ord_find(d, &d->gs, gid);
        if (st) {
            if (st->status != status)
                FAIL("inconsistent status for goroutine %lld: old %s vs. new %s", LL(gid),
                     GO_STATUS_NAMES[st->status], GO_STATUS_NAMES[status]);
            st->sgen = gen;
            st->seq = 0;
        } else if (gen == d->initial_gen) {
            if (!create(d, &d->gs, gid, (uint8_t)status, gen))
                NOMEM();
            old = GO_UNDETERMINED;
        } else {
            FAIL("found goroutine status for new goroutine after the first generation: id=%lld "
                 "status=%s", LL(gid), GO_STATUS_NAMES[status]);
        }
        a[2] = (old << 32) | status;
        int64_t em = m, eg = g;
        if (status == GS_RUNNING) {
            ng = gid;
        } else if (status == GS_SYSCALL) {
            if (mid == NONE_ID)
                FAIL("found goroutine %lld in syscall without a thread", LL(gid));
            if (mid == m) {
                if (gen != d->initial_gen && g != gid)
                    FAIL("inconsistent thread for syscalling goroutine %lld: thread has goroutine %lld",
                         LL(gid), LL(g));
                ng = gid;
            } else {
                /* A goroutine in a syscall on another thread for the whole generation. */
                MRec *mst = mfind(d, mid);
                if (mst) {
                    if (mst->g != gid)
                        FAIL("inconsistent thread for syscalling goroutine %lld: thread has "
                             "goroutine %lld", LL(gid), LL(mst->g));
                    eg = mst->g;
                } else if (madd(d, mid, gid, NONE_ID) < 0) {
                    NOMEM();
                }
                em = mid;
            }
        }
        if (ord_push(d, c, em, p, eg))
            NOMEM();
        break;
    }
    case EV_GO_CREATE:
    case EV_GO_CREATE_BLOCKED: {
        if (ord_check_ctx(p, g, m, MUST, MUST, MAY, err))
            return -1;
        st = ord_find(d, &d->gs, g);
        if (st && st->status != GS_RUNNING)
            FAIL("%s event for goroutine that's not Running", NAME(typ));
        int64_t newg = (int64_t)a[0];
        if (ord_find(d, &d->gs, newg))
            FAIL("tried to create goroutine (%lld) that already exists", LL(newg));
        if (!create(d, &d->gs, newg, typ == EV_GO_CREATE_BLOCKED ? GS_WAITING : GS_RUNNABLE, gen))
            NOMEM();
        if (ord_push(d, c, m, p, g))
            NOMEM();
        break;
    }
    case EV_GO_DESTROY:
    case EV_GO_STOP:
    case EV_GO_BLOCK:
        if (ord_check_user(m, p, g, err))
            return -1;
        st = running_g(d, typ, g, GS_RUNNING, err);
        if (!st)
            return -1;
        if (typ == EV_GO_DESTROY) {
            if (destroy(d, &d->gs, g))
                NOMEM();
        } else {
            st->status = typ == EV_GO_STOP ? GS_RUNNABLE : GS_WAITING;
        }
        if (ord_push(d, c, m, p, g))
            NOMEM();
        ng = NONE_ID;
        break;
    case EV_GO_START: {
        int64_t gid = (int64_t)a[0];
        st = ord_find(d, &d->gs, gid);
        if (!st || st->status != GS_RUNNABLE || !succeeds(st->sgen, st->seq, gen, a[1]))
            return 0;
        if (ord_check_ctx(p, g, m, MUST, MUST, MUST_NOT, err))
            return -1;
        st->status = GS_RUNNING;
        st->sgen = gen;
        st->seq = a[1];
        if (ord_push(d, c, m, p, g))
            NOMEM();
        ng = gid;
        break;
    }
    case EV_GO_UNBLOCK: {
        st = ord_find(d, &d->gs, (int64_t)a[0]);
        if (!st || st->status != GS_WAITING || !succeeds(st->sgen, st->seq, gen, a[1]))
            return 0;
        st->status = GS_RUNNABLE;
        st->sgen = gen;
        st->seq = a[1];
        if (ord_push(d, c, m, p, g))
            NOMEM();
        break;
    }
    case EV_GO_SWITCH:
    case EV_GO_SWITCH_DESTROY: {
        if (ord_check_user(m, p, g, err))
            return -1;
        RState *cur = running_g(d, typ, g, GS_RUNNING, err);
        if (!cur)
            return -1;
        int64_t nextg = (int64_t)a[0];
        RState *nst = ord_find(d, &d->gs, nextg);
        if (!nst || nst->status != GS_WAITING || !succeeds(nst->sgen, nst->seq, gen, a[1]))
            return 0;
        if (ord_push(d, c, m, p, g))
            NOMEM();
        int64_t t = c->time;
        if (typ == EV_GO_SWITCH) {
            cur->status = GS_WAITING;
            if (push_raw(d, EV_GO_BLOCK, t, 0, 0, 0, 0, m, p, g))
                NOMEM();
        } else {
            if (destroy(d, &d->gs, g))
                NOMEM();
            if (push_raw(d, EV_GO_DESTROY, t, 0, 0, 0, 0, m, p, g))
                NOMEM();
        }
        nst = ord_find(d, &d->gs, nextg);
        nst->status = GS_RUNNING;
        nst->sgen = gen;
        nst->seq = a[1];
        if (push_raw(d, EV_GO_START, t, a[0], a[1], 0, 0, m, p, NONE_ID))
            NOMEM();
        ng = nextg;
        break;
    }
    case EV_GO_SYSCALL_BEGIN: {
        if (ord_check_user(m, p, g, err))
            return -1;
        st = running_g(d, typ, g, GS_RUNNING, err);
        if (!st)
            return -1;
        st->status = GS_SYSCALL;
        RState *pst = ord_pstate(d, p, typ, "uninitialized", err);
        if (!pst)
            return -1;
        pst->status = PS_SYSCALL;
        /* The P sequence number tells which syscall a later steal refers to. */
        if (!succeeds(pst->sgen, pst->seq, gen, a[0]))
            FAIL("failed to advance %s: can't make sequence: %llu (gen=%llu) -> %llu (gen=%llu)",
                 NAME(typ), ULL(pst->seq), ULL(pst->sgen), ULL(a[0]), ULL(gen));
        pst->sgen = gen;
        pst->seq = a[0];
        if (ord_push(d, c, m, p, g))
            NOMEM();
        break;
    }
    case EV_GO_SYSCALL_END: {
        if (ord_check_user(m, p, g, err))
            return -1;
        st = running_g(d, typ, g, GS_SYSCALL, err);
        if (!st)
            return -1;
        st->status = GS_RUNNING;
        RState *pst = ord_pstate(d, p, typ, "uninitialized", err);
        if (!pst)
            return -1;
        if (pst->status != PS_SYSCALL)
            FAIL("expected proc %lld in state Syscall, but got %s instead", LL(p),
                 PROC_STATUS_NAMES[pst->status]);
        pst->status = PS_RUNNING;
        if (ord_push(d, c, m, p, g))
            NOMEM();
        break;
    }
    case EV_GO_SYSCALL_END_BLOCKED: {
        if (p != NONE_ID) {
            /* While this thread still holds the P, wait for the ProcStop or ProcSteal. */
            RState *pst = ord_pstate(d, p, typ, "uninitialized", err);
            if (!pst)
                return -1;
            if (pst->status == PS_SYSCALL)
                return 0;
        }
        if (ord_check_ctx(p, g, m, MUST, MAY, MUST, err))
            return -1;
        st = running_g(d, typ, g, GS_SYSCALL, err);
        if (!st)
            return -1;
        st->status = GS_RUNNABLE;
        if (ord_push(d, c, m, p, g))
            NOMEM();
        ng = NONE_ID;
        break;
    }
    case EV_GO_CREATE_SYSCALL: {
        if (ord_check_ctx(p, g, m, MUST, MAY, MUST_NOT, err))
            return -1;
        int64_t newg = (int64_t)a[0];
        if (ord_find(d, &d->gs, newg))
            FAIL("tried to create goroutine (%lld) in syscall that already exists", LL(newg));
        if (!create(d, &d->gs, newg, GS_SYSCALL, gen))
            NOMEM();
        if (ord_push(d, c, m, p, g))
            NOMEM();
        ng = newg;
        break;
    }
    case EV_GO_DESTROY_SYSCALL: {
        if (ord_check_ctx(p, g, m, MUST, MAY, MUST, err))
            return -1;
        if (!running_g(d, typ, g, GS_SYSCALL, err))
            return -1;
        if (destroy(d, &d->gs, g))
            NOMEM();
        if (p != NONE_ID) {
            /* The thread id may be reused: drop the P now, as if it stole it from itself. */
            RState *pst = ord_pstate(d, p, typ, "invalid", err);
            if (!pst)
                return -1;
            if (pst->status != PS_SYSCALL)
                FAIL("proc %lld in unexpected state %s during %s", LL(p),
                     PROC_STATUS_NAMES[pst->status], NAME(typ));
            pst->status = PS_SYSCALL_ABANDONED;
            np = NONE_ID;
            if (push_raw(d, EV_PROC_STEAL, c->time, (uint64_t)p, 0, 0, PS_SYSCALL, m, p, g))
                NOMEM();
        }
        if (ord_push(d, c, m, p, g))
            NOMEM();
        ng = NONE_ID;
        break;
    }
    default: {
        /* GC, ranges, metrics, user annotations, experimental events. */
        int r = ord_advance_misc(d, c, m, p, g, err);
        if (r <= 0)
            return r;
        break;
    }
    }
    if (mi >= 0) {
        MRec *r = &VEC_AT(&d->mlist, MRec, mi);
        r->p = np;
        r->g = ng;
    }
    *ok = 1;
    return 0;
}
