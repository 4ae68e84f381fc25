/* Events to columns: mirrors v2/events.py (kinds, fields, stacks) and
 * parquet_out.py's row layout, one row per event in transitions or events,
 * plus transition_stacks rows. */
#include <stdio.h>

#include "dec.h"


/* Dictionary columns hold indices; the dictionaries themselves are in
 * columnar.py (model.KINDS, _STATES, scopes, resource goroutine/proc), the
 * reason one is built here. State indices: the goroutine states are their
 * own codes, the proc states map through PROC_STATE_IDX; "Bad" (last) joins
 * the dictionary only once d->bad_state says a row uses it. */
enum { S_IDLE = 6, S_BAD = 7 };
static const uint8_t PROC_STATE_IDX[5] = {GO_UNDETERMINED, GO_NOT_EXIST, GO_RUNNING, S_IDLE, S_BAD};
static const uint8_t GO_STATUS_TO_STATE[5] = {GO_UNDETERMINED, GO_RUNNABLE, GO_RUNNING, GO_SYSCALL,
                                              GO_WAITING};
static const uint8_t PROC_STATUS_TO_STATE[5] = {PROC_UNDETERMINED, PROC_RUNNING, PROC_IDLE,
                                                PROC_RUNNING, PROC_IDLE};

/* ------------------------------------------------------------ cells
 * (the tables themselves: tables.c) */

static inline void put_i64(Col *c, int64_t row, int64_t v) { ((int64_t *)c->data.p)[row] = v; }

static inline void put_opt(Col *c, int64_t row, int valid, int64_t v)
{
    ((int64_t *)c->data.p)[row] = valid ? v : 0;
    if (valid)
        c->valid.p[row >> 3] |= (uint8_t)(1u << (row & 7));
}

static inline void put_idx(Col *c, int64_t row, int valid, int32_t v)
{
    ((int32_t *)c->data.p)[row] = valid ? v : 0;
    if (valid && c->nullable)
        c->valid.p[row >> 3] |= (uint8_t)(1u << (row & 7));
}

/* Index of s[:n] (n > 0) in dictionary t, adding it if new; -1 out of
 * memory. */
static int32_t dict_index(Dec *d, StrDict *t, const uint8_t *s, size_t n)
{
    size_t slot = (size_t)(((uintptr_t)s * 0x9E3779B97F4A7C15ull) >> (64 - DICT_CACHE_BITS));
    if (t->cache[slot].p == s && t->cache[slot].n == n) {
        int32_t idx = t->cache[slot].idx;
        const int32_t *off = (const int32_t *)t->off.p;
        if ((size_t)(off[idx + 1] - off[idx]) == n && !memcmp(t->bytes.p + off[idx], s, n))
            return idx;
    }
    int64_t gid = intern_string(d, s, n);
    if (gid < 0)
        return -1;
    size_t have = VEC_LEN(&t->map, uint32_t);
    if ((size_t)gid >= have) {
        size_t add = ((size_t)gid + 1 - have) * 4;
        if (buf_grow(&t->map, add))
            return -1;
        memset(t->map.p + t->map.n, 0, add);
        t->map.n += add;
    }
    uint32_t *m = &VEC_AT(&t->map, uint32_t, gid);
    if (!*m) {
        if (buf_put_utf8(&t->bytes, s, n) || t->bytes.n > INT32_MAX)
            return -1;
        int32_t end = (int32_t)t->bytes.n;
        if (buf_put(&t->off, &end, 4))
            return -1;
        *m = (uint32_t)(VEC_LEN(&t->off, int32_t) - 1); /* new index + 1 */
    }
    t->cache[slot].p = s;
    t->cache[slot].n = n;
    t->cache[slot].idx = (int32_t)(*m - 1);
    return t->cache[slot].idx;
}

/* Index of the reason s[:n] in the reason dictionary (0: none). */
static int32_t reason_index(Dec *d, const uint8_t *s, size_t n)
{
    return n ? dict_index(d, &d->reasons, s, n) : 0;
}

/* A string of a group table: its index in the events' string dictionary;
 * an empty one is a null. */
static inline int put_sid(Dec *d, Col *c, int64_t row, const uint8_t *s, size_t n)
{
    int32_t v = n ? dict_index(d, &d->estrings, s, n) : 0;
    if (v < 0)
        return -1;
    ((int32_t *)c->data.p)[row] = v;
    if (n)
        c->valid.p[row >> 3] |= (uint8_t)(1u << (row & 7));
    return 0;
}

/* Append a string; for nullable columns an empty string is a null. */
static inline int put_str(Col *c, int64_t row, const void *s, size_t n)
{
    if (n && buf_put_utf8(&c->data, (const uint8_t *)s, n))
        return -1;
    if (c->data.n > INT32_MAX)
        return -1;
    ((int32_t *)c->offsets.p)[row + 1] = (int32_t)c->data.n;
    if (c->nullable && n)
        c->valid.p[row >> 3] |= (uint8_t)(1u << (row & 7));
    return 0;
}

/* ------------------------------------------------------------ rows */

typedef struct {
    int kind;
    int64_t ts, m, p, g, stack;
    const uint8_t *name;
    size_t name_len;
    int has_value;
    uint64_t value;
    const char *scope;
    int64_t scope_id;
    const char *attrs;
    size_t attrs_len;
    int has_task, has_parent;
    uint64_t task, parent;
    const uint8_t *cat, *msg;
    size_t cat_len, msg_len;
    int has_sync;
    int64_t sync_n;
    int has_clock;
    int64_t clock[3];
} ERow;

static void note_event(Dec *d, int kind, int64_t ts)
{
    d->kinds[kind]++;
    if (!d->have_first) {
        d->have_first = 1;
        d->first_ts = ts;
    }
    d->last_out_ts = ts;
    d->seq++;
}

/* Events column w at index at[w] of table t, where at[w] >= 0. */
#define E_AT(w) ((k = at[w]) >= 0)

static int e_row(Dec *d, const ERow *r)
{
    static const int8_t WIDE[E_COLS] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                        11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
    Table *t = &d->et;
    const int8_t *at = WIDE;
    if (d->ngroups) {
        int g = d->kind_group[r->kind];
        if (g < 0)
            goto counted; /* a kind no group asked for */
        t = &d->gt[g];
        at = d->group_at[g];
    }
    Col *c = t->cols;
    int64_t i = t->rows;
    int k;
    if (E_AT(0))
        put_i64(&c[k], i, d->seq);
    if (E_AT(1))
        put_idx(&c[k], i, 1, r->kind);
    if (E_AT(2))
        put_i64(&c[k], i, r->ts);
    if (E_AT(3))
        put_i64(&c[k], i, r->m);
    if (E_AT(4))
        put_i64(&c[k], i, r->p);
    if (E_AT(5))
        put_i64(&c[k], i, r->g);
    if (E_AT(6))
        put_i64(&c[k], i, r->stack);
    if (E_AT(7) && (c[k].type == COL_DICT ? put_sid(d, &c[k], i, r->name, r->name_len)
                                          : put_str(&c[k], i, r->name, r->name_len)))
        return -1;
    if (E_AT(8))
        put_opt(&c[k], i, r->has_value, (int64_t)r->value);
    if (E_AT(9) && put_str(&c[k], i, "", 0))
        return -1;
    /* scope dictionary: goroutine, global, proc */
    const char *scope = r->scope ? r->scope : "";
    if (E_AT(10))
        put_idx(&c[k], i, scope[0] != 0, scope[0] == 'p' ? 2 : scope[1] == 'l' ? 1 : 0);
    if (E_AT(11))
        put_opt(&c[k], i, scope[0] != 0, r->scope_id);
    if (E_AT(12) && put_str(&c[k], i, r->attrs, r->attrs_len))
        return -1;
    if (E_AT(13))
        put_opt(&c[k], i, r->has_task, (int64_t)r->task);
    if (E_AT(14))
        put_opt(&c[k], i, r->has_parent, (int64_t)r->parent);
    if (E_AT(15) && (c[k].type == COL_DICT ? put_sid(d, &c[k], i, r->cat, r->cat_len)
                                           : put_str(&c[k], i, r->cat, r->cat_len)))
        return -1;
    if (E_AT(16) && (c[k].type == COL_DICT ? put_sid(d, &c[k], i, r->msg, r->msg_len)
                                           : put_str(&c[k], i, r->msg, r->msg_len)))
        return -1;
    if (E_AT(17))
        put_opt(&c[k], i, r->has_sync, r->sync_n);
    for (int j = 0; j < 3; j++)
        if (E_AT(18 + j))
            put_opt(&c[k], i, r->has_clock, r->clock[j]);
    t->rows++;
counted:
    if (r->has_clock && !d->have_clock) {
        d->have_clock = 1;
        memcpy(d->clock, r->clock, sizeof d->clock);
    }
    note_event(d, r->kind, r->ts);
    return 0;
}

#undef E_AT

static int t_row(Dec *d, int64_t ts, int proc, int64_t id, int from, int to,
                 const uint8_t *reason, size_t reason_len, int64_t m, int64_t p, int64_t g,
                 int64_t stack, int64_t tstack)
{
    Table *t = &d->tt;
    Col *c = t->cols;
    int64_t i = t->rows;
    int32_t ri = reason_index(d, reason, reason_len);
    if (ri < 0)
        return -1;
    put_i64(&c[0], i, ts);
    put_idx(&c[1], i, 1, proc);
    put_i64(&c[2], i, id);
    put_idx(&c[3], i, 1, proc ? PROC_STATE_IDX[from] : from);
    if (proc && PROC_STATE_IDX[from] == S_BAD)
        d->bad_state = 1;
    put_idx(&c[4], i, 1, proc ? PROC_STATE_IDX[to] : to);
    put_idx(&c[5], i, 1, ri);
    put_i64(&c[6], i, m);
    put_i64(&c[7], i, p);
    put_i64(&c[8], i, g);
    put_i64(&c[9], i, stack);
    t->rows++;
    if (tstack && tstack != stack) {
        Table *s = &d->st;
        put_i64(&s->cols[0], s->rows, d->ntrans);
        put_i64(&s->cols[1], s->rows, tstack);
        s->rows++;
    }
    d->ntrans++;
    note_event(d, K_STATE_TRANSITION, ts);
    return 0;
}

/* ------------------------------------------------------------ emission */

static int64_t fix_ts(Dec *d, int64_t t)
{
    /* Go forces strictly increasing times across all emitted events. */
    if (t <= d->last_ts)
        t = (int64_t)((uint64_t)d->last_ts + 1);
    d->last_ts = t;
    return t;
}

int emit_sync(Dec *d, int with_clock, int64_t t)
{
    ERow r;
    memset(&r, 0, sizeof r);
    d->syncs++;
    r.kind = K_SYNC;
    r.m = r.p = r.g = NONE_ID;
    if (with_clock) {
        Gen *g = &d->gen;
        r.has_clock = 1;
        r.clock[0] = ns_of(g->snap_time, g->freq);
        r.clock[1] = (int64_t)g->snap_mono;
        r.clock[2] = (int64_t)(g->snap_sec * 1000000000ULL + g->snap_nsec);
    }
    r.ts = fix_ts(d, t);
    r.has_sync = 1;
    r.sync_n = d->syncs;
    return e_row(d, &r);
}

int emit_sample(Dec *d, const Sample *s, Err *err)
{
    uint64_t gid;
    int missing;
    if (resolve_stack(d, s->stk, &gid, &missing))
        goto nomem;
    if (missing) {
        set_err(err, -1, "CPU sample: found invalid stack ID %llu", (unsigned long long)s->stk);
        return -1;
    }
    ERow r;
    memset(&r, 0, sizeof r);
    r.kind = K_STACK_SAMPLE;
    r.ts = fix_ts(d, s->t);
    r.m = s->m;
    r.p = s->p;
    r.g = s->g;
    r.stack = (int64_t)gid;
    if (e_row(d, &r))
        goto nomem;
    return 0;
nomem:
    d->nomem = 1;
    set_err(err, -1, "out of memory");
    return -1;
}

static const uint8_t *gstr_of(Dec *d, uint64_t id, size_t *n)
{
    uint64_t *o = &VEC_AT(&d->gstroff, uint64_t, id);
    *n = (size_t)(o[1] - o[0]);
    return d->gstr.p + o[0];
}

static int str_of(Dec *d, uint64_t sid, const uint8_t **s, size_t *n, Err *err)
{
    if (sid == 0) {
        *s = (const uint8_t *)"";
        *n = 0;
        return 0;
    }
    Gen *g = &d->gen;
    uint64_t idx;
    if (sid < g->str_dense_n && g->str_dense[sid]) {
        idx = g->str_dense[sid] - 1;
    } else {
        uint64_t *v = map_get(&g->strings, sid);
        if (!v) {
            set_err(err, -1, "found invalid string ID %llu", (unsigned long long)sid);
            return -1;
        }
        idx = *v;
    }
    StrRef *r = &VEC_AT(&g->strs, StrRef, idx);
    *s = d->data + r->off;
    *n = r->len;
    return 0;
}

static int stack_of(Dec *d, uint64_t sid, int64_t *out, Err *err)
{
    uint64_t gid;
    int missing;
    if (resolve_stack(d, sid, &gid, &missing)) {
        d->nomem = 1;
        set_err(err, -1, "out of memory");
        return -1;
    }
    if (missing) {
        set_err(err, -1, "found invalid stack ID %llu", (unsigned long long)sid);
        return -1;
    }
    *out = (int64_t)gid;
    return 0;
}

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (x)                                                                                     \
            return -1;                                                                             \
    } while (0)
#define ROWCHECK(x)                                                                                \
    do {                                                                                           \
        if (x) {                                                                                   \
            d->nomem = 1;                                                                          \
            set_err(err, -1, "out of memory");                                                     \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

static int go_row(Dec *d, const QEv *q, int64_t ts, int64_t stack, int64_t rid, int from, int to,
                  const uint8_t *reason, size_t rlen, int64_t tstack, Err *err)
{
    ROWCHECK(t_row(d, ts, 0, rid, from, to, reason, rlen, q->m, q->p, q->g, stack, tstack));
    return 0;
}

static int proc_row(Dec *d, const QEv *q, int64_t ts, int64_t stack, int64_t rid, uint64_t from,
                    int to, Err *err)
{
    ROWCHECK(t_row(d, ts, 1, rid, from < 4 ? (int)from : 4, to, NULL, 0, q->m, q->p, q->g, stack, 0));
    return 0;
}

static int emit_other(Dec *d, const QEv *q, int64_t ts, int64_t stack, Err *err);

/* Validate, convert and append the queued event q. */
int emit_queued(Dec *d, const QEv *q, Err *err)
{
    /* Every stack and string id is resolved below in the reference's order;
     * an unknown id fails there (Go's table-id validation). */
    int typ = q->typ;
    int64_t ts = fix_ts(d, q->time);
    const Spec *spec = &SPECS[typ];
    int64_t stack = 0;
    if (spec->nstacks)
        CHECK(stack_of(d, q->a[spec->stacks[0] - 1], &stack, err));
    const uint64_t *a = q->a;
    const uint8_t *s1;
    size_t n1;
    switch (typ) {
    case EV_GO_CREATE:
    case EV_GO_CREATE_BLOCKED: {
        int64_t tstack;
        CHECK(stack_of(d, a[1], &tstack, err));
        return go_row(d, q, ts, stack, (int64_t)a[0], GO_NOT_EXIST,
                      typ == EV_GO_CREATE_BLOCKED ? GO_WAITING : GO_RUNNABLE, NULL, 0, tstack, err);
    }
    case EV_GO_START:
        return go_row(d, q, ts, stack, (int64_t)a[0], GO_RUNNABLE, GO_RUNNING, NULL, 0, 0, err);
    case EV_GO_UNBLOCK:
    case EV_GO_SWITCH:
    case EV_GO_SWITCH_DESTROY:
        return go_row(d, q, ts, stack, (int64_t)a[0], GO_WAITING, GO_RUNNABLE, NULL, 0, 0, err);
    case EV_GO_STOP:
    case EV_GO_BLOCK:
        CHECK(str_of(d, a[0], &s1, &n1, err));
        return go_row(d, q, ts, stack, q->g, GO_RUNNING,
                      typ == EV_GO_STOP ? GO_RUNNABLE : GO_WAITING, s1, n1, stack, err);
    case EV_GO_DESTROY:
        return go_row(d, q, ts, stack, q->g, GO_RUNNING, GO_NOT_EXIST, NULL, 0, 0, err);
    case EV_GO_SYSCALL_BEGIN:
        return go_row(d, q, ts, stack, q->g, GO_RUNNING, GO_SYSCALL, NULL, 0, stack, err);
    case EV_GO_SYSCALL_END:
    case EV_GO_SYSCALL_END_BLOCKED:
        return go_row(d, q, ts, stack, q->g, GO_SYSCALL,
                      typ == EV_GO_SYSCALL_END ? GO_RUNNING : GO_RUNNABLE, NULL, 0, 0, err);
    case EV_GO_CREATE_SYSCALL:
        return go_row(d, q, ts, stack, (int64_t)a[0], GO_NOT_EXIST, GO_SYSCALL, NULL, 0, 0, err);
    case EV_GO_DESTROY_SYSCALL:
        return go_row(d, q, ts, stack, q->g, GO_SYSCALL, GO_NOT_EXIST, NULL, 0, 0, err);
    case EV_GO_STATUS:
    case EV_GO_STATUS_STACK: {
        uint64_t to = a[2] & 0xffffffffu;
        return go_row(d, q, ts, stack, (int64_t)a[0], (int)(a[2] >> 32),
                      to < 5 ? GO_STATUS_TO_STATE[to] : 0, NULL, 0, stack, err);
    }
    case EV_PROC_START:
        return proc_row(d, q, ts, stack, (int64_t)a[0], PROC_IDLE, PROC_RUNNING, err);
    case EV_PROC_STOP:
        return proc_row(d, q, ts, stack, q->p, PROC_RUNNING, PROC_IDLE, err);
    case EV_PROC_STEAL:
        return proc_row(d, q, ts, stack, (int64_t)a[0],
                        a[3] == PS_SYSCALL_ABANDONED ? PROC_IDLE : PROC_RUNNING, PROC_IDLE, err);
    case EV_PROC_STATUS:
        return proc_row(d, q, ts, stack, (int64_t)a[0], a[2], PROC_STATUS_TO_STATE[a[1]], err);
    default:
        return emit_other(d, q, ts, stack, err);
    }
}

/* Events that are not state transitions: one events.parquet row. */
static int emit_other(Dec *d, const QEv *q, int64_t ts, int64_t stack, Err *err)
{
    int typ = q->typ;
    const Spec *spec = &SPECS[typ];
    const uint64_t *a = q->a;
    ERow r;
    memset(&r, 0, sizeof r);
    r.ts = ts;
    r.m = q->m;
    r.p = q->p;
    r.g = q->g;
    r.stack = stack;
    char buf[MAX_STRING_SIZE + 64];
    const uint8_t *s1;
    size_t n1;
    switch (typ) {
    case EV_PROCS_CHANGE:
    case EV_HEAP_ALLOC:
    case EV_HEAP_GOAL: {
        const char *nm = typ == EV_PROCS_CHANGE ? "/sched/gomaxprocs:threads"
                         : typ == EV_HEAP_ALLOC ? "/memory/classes/heap/objects:bytes"
                                                : "/gc/heap/goal:bytes";
        r.kind = K_METRIC;
        r.name = (const uint8_t *)nm;
        r.name_len = strlen(nm);
        r.has_value = 1;
        r.value = a[0];
        break;
    }
    case EV_GO_LABEL:
        CHECK(str_of(d, a[0], &r.name, &r.name_len, err));
        r.kind = K_LABEL;
        r.scope = "goroutine";
        r.scope_id = q->g;
        break;
    case EV_STW_BEGIN:
    case EV_STW_END:
        CHECK(str_of(d, a[0], &s1, &n1, err));
        r.kind = typ == EV_STW_BEGIN ? K_RANGE_BEGIN : K_RANGE_END;
        memcpy(buf, "stop-the-world (", 16);
        memcpy(buf + 16, s1, n1);
        buf[16 + n1] = ')';
        r.name = (const uint8_t *)buf;
        r.name_len = 17 + n1;
        r.scope = "goroutine";
        r.scope_id = q->g;
        break;
    case EV_GC_BEGIN:
    case EV_GC_ACTIVE:
    case EV_GC_END:
        r.kind = typ == EV_GC_BEGIN ? K_RANGE_BEGIN : typ == EV_GC_ACTIVE ? K_RANGE_ACTIVE : K_RANGE_END;
        r.name = (const uint8_t *)"GC concurrent mark phase";
        r.name_len = 24;
        r.scope = "global";
        r.scope_id = -1;
        break;
    case EV_GC_SWEEP_BEGIN:
    case EV_GC_SWEEP_ACTIVE:
    case EV_GC_SWEEP_END:
        r.kind = typ == EV_GC_SWEEP_BEGIN    ? K_RANGE_BEGIN
                 : typ == EV_GC_SWEEP_ACTIVE ? K_RANGE_ACTIVE
                                             : K_RANGE_END;
        r.name = (const uint8_t *)"GC incremental sweep";
        r.name_len = 20;
        r.scope = "proc";
        r.scope_id = typ == EV_GC_SWEEP_ACTIVE ? (int64_t)a[0] : q->p;
        if (typ == EV_GC_SWEEP_END) {
            int n = snprintf(buf, sizeof buf, "[[\"bytes swept\", %llu], [\"bytes reclaimed\", %llu]]",
                             (unsigned long long)a[0], (unsigned long long)a[1]);
            r.attrs = buf;
            r.attrs_len = (size_t)n;
        }
        break;
    case EV_GC_MARK_ASSIST_BEGIN:
    case EV_GC_MARK_ASSIST_ACTIVE:
    case EV_GC_MARK_ASSIST_END:
        r.kind = typ == EV_GC_MARK_ASSIST_BEGIN    ? K_RANGE_BEGIN
                 : typ == EV_GC_MARK_ASSIST_ACTIVE ? K_RANGE_ACTIVE
                                                   : K_RANGE_END;
        r.name = (const uint8_t *)"GC mark assist";
        r.name_len = 14;
        r.scope = "goroutine";
        r.scope_id = typ == EV_GC_MARK_ASSIST_ACTIVE ? (int64_t)a[0] : q->g;
        break;
    case EV_USER_TASK_BEGIN:
        CHECK(str_of(d, a[2], &r.name, &r.name_len, err));
        r.kind = K_TASK_BEGIN;
        r.has_task = r.has_parent = 1;
        r.task = a[0];
        r.parent = a[1];
        break;
    case EV_USER_TASK_END:
        r.kind = K_TASK_END;
        r.has_task = r.has_parent = 1;
        r.task = a[0];
        r.parent = a[2];
        r.name = gstr_of(d, a[3], &r.name_len);
        break;
    case EV_USER_REGION_BEGIN:
    case EV_USER_REGION_END:
        CHECK(str_of(d, a[1], &r.name, &r.name_len, err));
        r.kind = typ == EV_USER_REGION_BEGIN ? K_REGION_BEGIN : K_REGION_END;
        r.has_task = 1;
        r.task = a[0];
        break;
    case EV_USER_LOG:
        CHECK(str_of(d, a[1], &r.cat, &r.cat_len, err));
        CHECK(str_of(d, a[2], &r.msg, &r.msg_len, err));
        r.kind = K_LOG;
        r.has_task = 1;
        r.task = a[0];
        break;
    default: {
        /* Experimental AllocFree events: every argument is an integer. */
        size_t n = 0;
        buf[n++] = '[';
        for (int i = 1; i < spec->nargs; i++) {
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s[\"%s\", %llu]", i > 1 ? ", " : "",
                                  spec->args[i], (unsigned long long)a[i - 1]);
        }
        buf[n++] = ']';
        r.kind = K_EXPERIMENTAL;
        r.name = (const uint8_t *)spec->name;
        r.name_len = strlen(spec->name);
        if (spec->nargs > 1) {
            r.attrs = buf;
            r.attrs_len = n;
        }
        break;
    }
    }
    ROWCHECK(e_row(d, &r));
    return 0;
}
