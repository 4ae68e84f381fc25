/* Ordering of everything that is not a proc or goroutine state change
 * (mirrors v2/order_misc.py): GC phases, special ranges (sweep, mark assist,
 * stop-the-world), metrics, user tasks, regions, logs and labels, and the
 * experimental events. */
#include <stdio.h>

#include "order.h"

enum { GC_UNDETERMINED, GC_NOT_RUNNING, GC_RUNNING };

/* ------------------------------------------------------------ ranges */

static int has_range(RState *st, uint16_t typ, uint64_t desc)
{
    size_t n = VEC_LEN(&st->ranges, RangeRec);
    for (size_t i = 0; i < n; i++) {
        RangeRec *r = &VEC_AT(&st->ranges, RangeRec, i);
        if (r->typ == typ && r->desc == desc)
            return 1;
    }
    return 0;
}

static int begin_range(Dec *d, RState *st, uint16_t typ, uint64_t desc, Err *err)
{
    if (has_range(st, typ, desc))
        FAIL("discovered event already in-flight for when starting event %s", SPECS[typ].name);
    RangeRec r = {typ, desc};
    if (buf_put(&st->ranges, &r, sizeof r))
        NOMEM();
    return 0;
}

static int active_range(Dec *d, RState *st, uint16_t typ, int initial, Err *err)
{
    if (initial) {
        if (has_range(st, typ, 0))
            FAIL("found named active range already in first gen: %s", SPECS[typ].name);
        RangeRec r = {typ, 0};
        if (buf_put(&st->ranges, &r, sizeof r))
            NOMEM();
    } else if (!has_range(st, typ, 0)) {
        FAIL("resource is missing active range: %s", SPECS[typ].name);
    }
    return 0;
}

static int end_range(RState *st, int typ, uint64_t *desc, Err *err)
{
    uint8_t start = SPECS[typ].start;
    size_t n = VEC_LEN(&st->ranges, RangeRec);
    RangeRec *rs = (RangeRec *)st->ranges.p;
    for (size_t i = 0; i < n; i++) {
        if (rs[i].typ == start) {
            *desc = rs[i].desc;
            /* Swap-remove, as Go does: the order of the ranges left matters later. */
            rs[i] = rs[n - 1];
            st->ranges.n -= sizeof(RangeRec);
            return 0;
        }
    }
    FAIL("tried to end event %s, but not in-flight", SPECS[start].name);
}

/* Gen string content for an id (0 is ""); NULL when unknown. */
static const uint8_t *gen_string(Dec *d, uint64_t sid, size_t *len)
{
    if (sid == 0) {
        *len = 0;
        return (const uint8_t *)"";
    }
    uint64_t *v = map_get(&d->gen.strings, sid);
    if (!v)
        return NULL;
    StrRef *s = &VEC_AT(&d->gen.strs, StrRef, *v);
    *len = s->len;
    return d->data + s->off;
}

static int64_t name_id(Dec *d, uint64_t sid, int typ, Err *err)
{
    Gen *g = &d->gen;
    if (sid < g->str_dense_n && g->name_dense[sid])
        return (int64_t)g->name_dense[sid] - 1;
    size_t n;
    const uint8_t *s = gen_string(d, sid, &n);
    if (!s) {
        set_err(err, -1, "invalid string ID %llu for %d event", ULL(sid), typ);
        return -1;
    }
    int64_t id = intern_string(d, s, n);
    if (id < 0) {
        d->nomem = 1;
        set_err(err, -1, "out of memory");
    } else if (sid < g->str_dense_n && id < UINT32_MAX - 1) {
        g->name_dense[sid] = (uint32_t)(id + 1);
    }
    return id;
}

/* ------------------------------------------------------------ advance */

/* Advance c's head event of a kind handled here: 1 queued, 0 must wait,
 * -1 broken trace (err set). */
int ord_advance_misc(Dec *d, Cursor *c, int64_t m, int64_t p, int64_t g, Err *err)
{
    char namebuf[32];
    uint64_t gen = d->gen.gen;
    int typ = c->typ;
    uint64_t *a = c->a;
    RState *st;
    switch (typ) {
    /* ---------------------------------------------------------- GC */
    case EV_GC_ACTIVE: {
        uint64_t seq = a[0];
        if (gen == d->initial_gen) {
            if (d->gc_state != GC_UNDETERMINED)
                FAIL("GCActive in the first generation isn't first GC event");
            d->gc_seq = seq;
            d->gc_state = GC_RUNNING;
            if (ord_push(d, c, m, p, g))
                NOMEM();
            break;
        }
        if (seq != d->gc_seq + 1)
            return 0;
        if (d->gc_state != GC_RUNNING)
            FAIL("encountered GCActive while GC was not in progress");
        d->gc_seq = seq;
        if (ord_check_user(m, p, g, err))
            return -1;
        if (ord_push(d, c, m, p, g))
            NOMEM();
        break;
    }
    case EV_GC_BEGIN: {
        uint64_t seq = a[0];
        if (d->gc_state == GC_UNDETERMINED) {
            d->gc_seq = seq;
            d->gc_state = GC_RUNNING;
            if (ord_push(d, c, m, p, g))
                NOMEM();
            break;
        }
        if (seq != d->gc_seq + 1)
            return 0;
        if (d->gc_state == GC_RUNNING)
            FAIL("encountered GCBegin while GC was already in progress");
        d->gc_seq = seq;
        d->gc_state = GC_RUNNING;
        if (ord_check_user(m, p, g, err))
            return -1;
        if (ord_push(d, c, m, p, g))
            NOMEM();
        break;
    }
    case EV_GC_END: {
        uint64_t seq = a[0];
        if (seq != d->gc_seq + 1)
            return 0;
        if (d->gc_state == GC_NOT_RUNNING)
            FAIL("encountered GCEnd when GC was not in progress");
        if (d->gc_state == GC_UNDETERMINED)
            FAIL("encountered GCEnd when GC was in an undetermined state");
        d->gc_seq = seq;
        d->gc_state = GC_NOT_RUNNING;
        if (ord_check_user(m, p, g, err))
            return -1;
        if (ord_push(d, c, m, p, g))
            NOMEM();
        break;
    }
    case EV_GC_SWEEP_BEGIN:
        if (ord_check_ctx(p, g, m, MUST, MUST, MAY, err))
            return -1;
        st = ord_pstate(d, p, typ, "uninitialized", err);
        if (!st || begin_range(d, st, EV_GC_SWEEP_BEGIN, 0, err))
            return -1;
        if (ord_push(d, c, m, p, g))
            NOMEM();
        break;
    case EV_GC_SWEEP_ACTIVE: {
        int64_t pid = (int64_t)a[0];
        st = ord_find(d, &d->ps, pid);
        if (!st)
            FAIL("encountered GCSweepActive for unknown proc %lld", LL(pid));
        if (active_range(d, st, EV_GC_SWEEP_BEGIN, gen == d->initial_gen, err))
            return -1;
        if (ord_push(d, c, m, p, g))
            NOMEM();
        break;
    }
    case EV_GC_SWEEP_END: {
        if (ord_check_ctx(p, g, m, MUST, MUST, MAY, err))
            return -1;
        st = ord_pstate(d, p, typ, "uninitialized", err);
        uint64_t desc;
        if (!st || end_range(st, typ, &desc, err))
            return -1;
        if (ord_push(d, c, m, p, g))
            NOMEM();
        break;
    }
    case EV_STW_BEGIN:
    case EV_GC_MARK_ASSIST_BEGIN: {
        if (ord_check_user(m, p, g, err))
            return -1;
        uint64_t desc = typ == EV_STW_BEGIN ? a[0] : 0;
        st = ord_find(d, &d->gs, g);
        if (!st)
            FAIL("encountered event of type %d without known state for current goroutine %lld", typ,
                 LL(g));
        if (begin_range(d, st, (uint16_t)typ, desc, err))
            return -1;
        if (ord_push(d, c, m, p, g))
            NOMEM();
        break;
    }
    case EV_GC_MARK_ASSIST_ACTIVE: {
        int64_t gid = (int64_t)a[0];
        st = ord_find(d, &d->gs, gid);
        if (!st)
            FAIL("uninitialized goroutine %lld found during %s", LL(gid), NAME(typ));
        if (active_range(d, st, SPECS[typ].start, gen == d->initial_gen, err))
            return -1;
        if (ord_push(d, c, m, p, g))
            NOMEM();
        break;
    }
    case EV_STW_END:
    case EV_GC_MARK_ASSIST_END: {
        if (ord_check_user(m, p, g, err))
            return -1;
        st = ord_find(d, &d->gs, g);
        if (!st)
            FAIL("encountered event of type %d without known state for current goroutine %lld", typ,
                 LL(g));
        uint64_t desc;
        if (end_range(st, typ, &desc, err))
            return -1;
        if (typ == EV_STW_END)
            a[0] = desc; /* the stop-the-world kind, for the range name */
        if (ord_push(d, c, m, p, g))
            NOMEM();
        break;
    }
    /* ---------------------------------------------------------- simple events */
    case EV_PROCS_CHANGE:
    case EV_GO_LABEL:
    case EV_USER_LOG:
        if (ord_check_user(m, p, g, err))
            return -1;
        if (ord_push(d, c, m, p, g))
            NOMEM();
        break;
    case EV_HEAP_ALLOC:
    case EV_HEAP_GOAL:
        if ((m == NONE_ID || p == NONE_ID) && ord_check_ctx(p, g, m, MUST, MUST, MAY, err))
            return -1;
        if (ord_push(d, c, m, p, g))
            NOMEM();
        break;
    /* ---------------------------------------------------------- tasks and regions */
    case EV_USER_TASK_BEGIN: {
        uint64_t tid = a[0];
        if (map_get(&d->tasks, tid))
            FAIL("task ID conflict: %llu", ULL(tid));
        if (a[1] == 0)
            a[1] = NO_TASK; /* parent 0 means "no parent" here, not the background task */
        int64_t name = name_id(d, a[2], typ, err);
        if (name < 0)
            return -1;
        TaskRec tr = {a[1], (uint32_t)name};
        uint64_t idx;
        if (d->taskfree.n) {
            d->taskfree.n -= sizeof(uint32_t);
            idx = *(uint32_t *)(d->taskfree.p + d->taskfree.n);
            VEC_AT(&d->taskrecs, TaskRec, idx) = tr;
        } else {
            idx = VEC_LEN(&d->taskrecs, TaskRec);
            if (buf_put(&d->taskrecs, &tr, sizeof tr))
                NOMEM();
        }
        if (map_put(&d->tasks, tid, idx))
            NOMEM();
        if (ord_check_user(m, p, g, err))
            return -1;
        if (ord_push(d, c, m, p, g))
            NOMEM();
        break;
    }
    case EV_USER_TASK_END: {
        uint64_t *v = map_get(&d->tasks, a[0]);
        if (v) {
            uint32_t idx = (uint32_t)*v;
            TaskRec *tr = &VEC_AT(&d->taskrecs, TaskRec, idx);
            a[2] = tr->parent;
            a[3] = tr->name;
            map_del(&d->tasks, a[0]);
            if (buf_put(&d->taskfree, &idx, sizeof idx))
                NOMEM();
        } else {
            int64_t e = intern_string(d, (const uint8_t *)"", 0);
            if (e < 0)
                NOMEM();
            a[2] = NO_TASK;
            a[3] = (uint64_t)e;
        }
        if (ord_check_user(m, p, g, err))
            return -1;
        if (ord_push(d, c, m, p, g))
            NOMEM();
        break;
    }
    case EV_USER_REGION_BEGIN:
    case EV_USER_REGION_END: {
        if (ord_check_user(m, p, g, err))
            return -1;
        int64_t name = name_id(d, a[1], typ, err);
        if (name < 0)
            return -1;
        const char *what = typ == EV_USER_REGION_BEGIN ? "EvUserRegionBegin" : "EvUserRegionEnd";
        st = ord_find(d, &d->gs, g);
        if (!st)
            FAIL("encountered %s without known state for current goroutine %lld", what, LL(g));
        if (typ == EV_USER_REGION_BEGIN) {
            RegionRec r = {a[0], (uint32_t)name};
            if (buf_put(&st->regions, &r, sizeof r))
                NOMEM();
        } else if (st->regions.n) {
            /* Regions begun before tracing started are unknown; check only known ones. */
            RegionRec *top = &((RegionRec *)st->regions.p)[VEC_LEN(&st->regions, RegionRec) - 1];
            if (top->task != a[0] || top->name != (uint32_t)name) {
                uint64_t *o1 = &VEC_AT(&d->gstroff, uint64_t, name);
                uint64_t *o2 = &VEC_AT(&d->gstroff, uint64_t, top->name);
                FAIL("misuse of region in goroutine %lld: region end {%llu %.*s} when the "
                     "inner-most active region start event is {%llu %.*s}",
                     LL(g), ULL(a[0]), (int)(o1[1] - o1[0]), (const char *)d->gstr.p + o1[0],
                     ULL(top->task), (int)(o2[1] - o2[0]), (const char *)d->gstr.p + o2[0]);
            }
            st->regions.n -= sizeof(RegionRec);
        }
        if (ord_push(d, c, m, p, g))
            NOMEM();
        break;
    }
    default:
        if (typ >= 128 && typ < NUM_SPECS) {
            if (ord_check_ctx(p, g, m, MUST, MAY, MAY, err))
                return -1;
            if (ord_push(d, c, m, p, g))
                NOMEM();
            break;
        }
        FAIL("bad event type found while ordering: %d", typ);
    }
    return 1;
}
