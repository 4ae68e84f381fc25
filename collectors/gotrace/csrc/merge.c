/* The main loop (mirrors v2/decode.py and v2/cursor.py): per-thread cursors
 * merged through a min-heap kept exactly as Go keeps it, CPU samples
 * interleaved by time, Sync events at generation boundaries. */
#include <math.h>
#include <stdio.h>

#include "dec.h"


static Cursor *front(Dec *d) { return (Cursor *)d->frontier.p; }
static size_t nfront(Dec *d) { return VEC_LEN(&d->frontier, Cursor); }

static int fail(Dec *d, int64_t off, const Err *e)
{
    d->fail = *e;
    d->fail.off = off;
    d->finished = 1;
    return 0;
}

/* Load the next event of c; 1 loaded, 0 none left, -1 malformed (err set). */
static int cursor_next(Dec *d, Cursor *c, Err *err)
{
    Gen *g = &d->gen;
    const CBatch *bs = (const CBatch *)g->batches.p;
    uint32_t bi = c->bi;
    while (bi < c->bend && bs[bi].size == c->off) {
        bi++;
        c->off = 0;
        c->last = 0;
    }
    c->bi = bi;
    if (bi == c->bend)
        return 0;
    const CBatch *b = &bs[bi];
    if (c->last == 0)
        c->last = ns_of(b->time, g->freq);
    const uint8_t *data = d->data;
    size_t pos = b->off + c->off, end = b->off + b->size;
    uint8_t typ = data[pos];
    int nargs = TIMED_NARGS[typ];
    if (nargs < 0) {
        if (nargs == -1)
            set_err(err, (int64_t)pos, "found invalid event type: %u", typ);
        else
            set_err(err, (int64_t)pos, "found event without a timestamp: type=%u", typ);
        return -1;
    }
    pos++;
    c->typ = typ;
    /* The arguments go straight into c->a (slots past this event's arguments
     * keep their old values, as the reference's event list does). */
    uint64_t dt = 0;
    for (int k = 0; k < nargs; k++) {
        if (pos >= end)
            goto bad;
        uint64_t x = data[pos++];
        if (x >= 0x80) {
            x &= 0x7f;
            unsigned s = 7;
            for (int i = 1;; i++) {
                if (pos >= end)
                    goto bad;
                uint64_t ch = data[pos++];
                if (i == 9 && ch > 1)
                    goto bad;
                if (ch < 0x80) {
                    x |= ch << s;
                    break;
                }
                x |= (ch & 0x7f) << s;
                s += 7;
            }
        }
        if (k == 0)
            dt = x;
        else
            c->a[k - 1] = x;
        continue;
    bad:
        set_err(err, (int64_t)pos, k == 0 ? "found invalid uvarint for timestamp" : "found invalid uvarint");
        return -1;
    }
    int64_t t = (int64_t)((uint64_t)ns_of(dt, g->freq) + (uint64_t)c->last);
    c->time = t;
    c->last = t;
    c->evoff = (int64_t)(b->off + c->off);
    c->off = (uint32_t)(pos - b->off);
    return 1;
}

/* File offset of the event at the head of c (for error reports). */
static int64_t cursor_offset(Dec *d, const Cursor *c)
{
    (void)d;
    return c->evoff;
}

/* ------------------------------------------------------------ heap */

static void swap(Cursor *h, size_t i, size_t j)
{
    Cursor t = h[i];
    h[i] = h[j];
    h[j] = t;
}

static size_t sift_up(Cursor *h, size_t i)
{
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h[parent].time > h[i].time) {
            swap(h, parent, i);
            i = parent;
        } else {
            break;
        }
    }
    return i;
}

static void sift_down(Cursor *h, size_t n, size_t i)
{
    for (;;) {
        size_t best = i;
        int have = i < n;
        int64_t bt = have ? h[i].time : 0;
        for (size_t j = 2 * i + 1; j <= 2 * i + 2; j++) {
            if (j < n && (!have || h[j].time < bt)) {
                bt = h[j].time;
                best = j;
                have = 1;
            }
        }
        if (best == i)
            return;
        swap(h, i, best);
        i = best;
    }
}

static int heap_insert(Dec *d, const Cursor *c)
{
    if (buf_put(&d->frontier, c, sizeof *c))
        return -1;
    sift_up(front(d), nfront(d) - 1);
    return 0;
}

static void heap_update(Dec *d, size_t i)
{
    if (sift_up(front(d), i) == i)
        sift_down(front(d), nfront(d), i);
}

static void heap_remove(Dec *d, size_t i)
{
    Cursor *h = front(d);
    /* Bubble the slot to the root regardless of times, then drop it. */
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        swap(h, parent, i);
        i = parent;
    }
    size_t n = nfront(d);
    swap(h, 0, n - 1);
    d->frontier.n -= sizeof(Cursor);
    sift_down(h, n - 1, 0);
}

/* Sort items by an int64 key leaving ties where Go's unstable sort leaves them. */
#define DEFINE_GOSORT(NAME, T, KEY)                                                                \
    static int NAME(T *a, size_t n)                                                                \
    {                                                                                              \
        if (n < 2)                                                                                 \
            return 0;                                                                              \
        int64_t *keys = (int64_t *)malloc(n * sizeof(int64_t));                                    \
        uint32_t *perm = (uint32_t *)malloc(n * sizeof(uint32_t));                                 \
        T *tmp = (T *)malloc(n * sizeof(T));                                                       \
        if (!keys || !perm || !tmp) {                                                              \
            free(keys);                                                                            \
            free(perm);                                                                            \
            free(tmp);                                                                             \
            return -1;                                                                             \
        }                                                                                          \
        for (size_t i = 0; i < n; i++)                                                             \
            keys[i] = a[i].KEY;                                                                    \
        go_sort_perm(keys, perm, n);                                                               \
        for (size_t i = 0; i < n; i++)                                                             \
            tmp[i] = a[perm[i]];                                                                   \
        memcpy(a, tmp, n * sizeof(T));                                                            \
        free(keys);                                                                                \
        free(perm);                                                                                \
        free(tmp);                                                                                 \
        return 0;                                                                                  \
    }

DEFINE_GOSORT(sort_samples, Sample, t)
DEFINE_GOSORT(sort_cursors, Cursor, time)

/* ------------------------------------------------------------ generations */

#define NOMEM()                                                                                    \
    do {                                                                                           \
        d->nomem = 1;                                                                              \
        return -1;                                                                                 \
    } while (0)

/* Install the generation just read: cursors, samples and its Sync event. */
static int install(Dec *d)
{
    Gen *g = &d->gen;
    d->have_gen = 1;
    d->lost_from = g->start;
    if (d->ticks == 0)
        d->ticks = g->ticks_raw;
    size_t ns = VEC_LEN(&g->samples, Sample);
    d->samples.n = 0;
    if (buf_put(&d->samples, g->samples.p, g->samples.n))
        NOMEM();
    Sample *s = (Sample *)d->samples.p;
    for (size_t i = 0; i < ns; i++)
        s[i].t = ns_of((uint64_t)s[i].t, g->freq);
    if (sort_samples(s, ns))
        NOMEM();
    d->si = 0;
    d->frontier.n = 0;
    size_t nm = VEC_LEN(&g->ms, int64_t);
    const uint32_t *ms = (const uint32_t *)g->mstart.p;
    for (size_t i = 0; i < nm; i++) {
        Cursor c;
        memset(&c, 0, sizeof c);
        c.mi = (uint32_t)i;
        c.bi = ms[i];
        c.bend = ms[i + 1];
        c.evoff = -1;
        c.mrec = -1;
        Err e;
        e.set = 0;
        int r = cursor_next(d, &c, &e);
        if (r < 0)
            return fail(d, e.off, &e);
        if (r == 0)
            continue;
        if (heap_insert(d, &c))
            NOMEM();
    }
    if (emit_sync(d, g->has_clock, ns_of(g->min_ts, g->freq)))
        NOMEM();
    return 0;
}

static int sync_none(Dec *d)
{
    d->have_gen = 0;
    if (emit_sync(d, 0, d->last_ts))
        NOMEM();
    return 0;
}

/* Report a generation read error once its Sync event is out. */
static int stored_error(Dec *d, const Err *e)
{
    if (e->table_eof) {
        /* Go hands a bare end-of-file up, which its callers take for the
         * regular end of the trace: no error. */
        d->done = 1;
        return 0;
    }
    return fail(d, e->off, e);
}

/* Move to the next generation (emitting its Sync event) or fail or finish. */
static int refresh(Dec *d)
{
    if (d->have_gen) {
        d->completed++;
        d->lost_from = d->gen.end;
    }
    Err e;
    e.set = 0;
    if (d->minor < 26) {
        if (d->spill_err.set) {
            if (d->spill_err_sync)
                return stored_error(d, &d->spill_err);
            d->spill_err_sync = 1;
            return sync_none(d);
        }
        if (d->have_gen && !d->have_spill) {
            d->done = 1;
            return sync_none(d);
        }
        if (read_generation_spill(d, &e)) {
            if (d->nomem)
                return -1;
            d->spill_err = e;
            d->spill_err_sync = 1;
            return sync_none(d);
        }
        return install(d);
    }
    if (d->read_err.set)
        return stored_error(d, &d->read_err);
    int eof;
    if (read_generation_marked(d, &eof, &e)) {
        if (d->nomem)
            return -1;
        d->read_err = e;
        return sync_none(d);
    }
    if (eof) {
        d->done = 1;
        return sync_none(d);
    }
    return install(d);
}

/* Try to advance the head event of frontier slot i; 1 advanced, 0 not,
 * -1 out of memory. Failures set d->finished. */
static int try_slot(Dec *d, size_t i)
{
    Err e;
    e.set = 0;
    Cursor *c = &front(d)[i];
    int ok;
    if (order_advance(d, c, &ok, &e)) {
        if (d->nomem)
            return -1;
        fail(d, cursor_offset(d, c), &e);
        return 0;
    }
    if (!ok)
        return 0;
    int r = cursor_next(d, c, &e);
    if (r < 0) {
        fail(d, e.off, &e);
        return 0;
    }
    if (r)
        heap_update(d, i);
    else
        heap_remove(d, i);
    return 1;
}

static int emit_next_queued(Dec *d)
{
    QEv q = ((QEv *)d->queue.p)[d->qhead];
    d->qhead = (d->qhead + 1) & (d->qcap - 1);
    d->qlen--;
    Err e;
    e.set = 0;
    if (emit_queued(d, &q, &e)) {
        if (d->nomem)
            return -1;
        fail(d, nfront(d) ? cursor_offset(d, &front(d)[0]) : -1, &e);
    }
    return 0;
}

/* Decode until a table is full (1), the end or a failure (0), or out of memory (-1). */
int run_until(Dec *d, int64_t limit)
{
    Err e;
    while (!d->finished) {
        if (d->tt.rows >= limit || d->et.rows >= limit || d->st.rows >= limit)
            return 1;
        for (int g = 0; g < d->ngroups; g++)
            if (d->gt[g].rows >= limit)
                return 1;
        if (d->qlen) {
            if (emit_next_queued(d))
                return -1;
            continue;
        }
        if (d->done) {
            d->finished = 1;
            break;
        }
        size_t nsamp = VEC_LEN(&d->samples, Sample);
        Sample *samples = (Sample *)d->samples.p;
        if (!nfront(d) && d->si >= nsamp) {
            if (refresh(d))
                return -1;
            continue;
        }
        if (d->si < nsamp && (!nfront(d) || samples[d->si].t < front(d)[0].time)) {
            Sample s = samples[d->si++];
            e.set = 0;
            if (emit_sample(d, &s, &e)) {
                if (d->nomem)
                    return -1;
                fail(d, -1, &e);
            }
            continue;
        }
        int r = try_slot(d, 0);
        if (r < 0)
            return -1;
        if (d->finished)
            break;
        if (!r) {
            /* Rare path: try the other threads in time order. */
            if (sort_cursors(front(d), nfront(d)))
                NOMEM();
            size_t i;
            for (i = 1; i < nfront(d); i++) {
                r = try_slot(d, i);
                if (r < 0)
                    return -1;
                if (d->finished || r)
                    break;
            }
            if (d->finished)
                break;
            if (!r) {
                set_err(&e, -1, "broken trace: failed to advance: no thread can make progress in "
                        "generation %llu", (unsigned long long)(d->have_gen ? d->gen.gen : 0));
                fail(d, nfront(d) ? cursor_offset(d, &front(d)[0]) : -1, &e);
                break;
            }
        }
        if (emit_next_queued(d))
            return -1;
    }
    return 0;
}
