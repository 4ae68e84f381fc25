/* Batch framing and generation reading (mirrors v2/wire.py and
 * v2/generation.py, including every error offset and message). Batches are
 * not copied: they are (offset, size) references into the trace buffer. */
#include <math.h>
#include <stdio.h>

#include "dec.h"

/* 0 ok, 1 clean end of input, -1 error (err set). */
int read_batch(Dec *d, size_t pos, Framed *out, size_t *npos, Err *err)
{
    static const char *what[4] = {"gen", "M ID", "timestamp", "size"};
    const uint8_t *buf = d->data;
    size_t end = d->len;
    if (pos >= end)
        return 1;
    size_t start = pos;
    uint8_t typ = buf[pos++];
    memset(out, 0, sizeof(*out));
    if (typ == EV_END_OF_GENERATION) {
        out->b.m = NONE_ID;
        out->b.off = start;
        out->b.hdr = start;
        out->b.size = 1;
        out->b.eog = 1;
        out->gen = 0;
        *npos = pos;
        return 0;
    }
    if (typ != EV_EVENT_BATCH && typ != EV_EXPERIMENTAL_BATCH) {
        set_err(err, (int64_t)start, "expected batch event, got event %u", typ);
        return -1;
    }
    uint8_t exp = 0;
    if (typ == EV_EXPERIMENTAL_BATCH) {
        if (pos >= end)
            return 1;
        exp = buf[pos++];
    }
    uint64_t f[4];
    for (int i = 0; i < 4; i++) {
        size_t lim = end - pos > 10 ? pos + 10 : end;
        size_t p = pos;
        int r = uvarint(buf, &p, lim, &f[i]);
        if (r == -2) {
            set_err(err, (int64_t)pos, "error reading batch %s: varint overflows a 64-bit integer",
                    what[i]);
            return -1;
        }
        if (r == -1) {
            set_err(err, (int64_t)pos, "error reading batch %s: %s", what[i],
                    pos >= end ? "EOF" : "unexpected EOF");
            return -1;
        }
        pos = p;
    }
    uint64_t size = f[3];
    if (size > MAX_BATCH_SIZE) {
        set_err(err, (int64_t)start, "invalid batch size %llu, maximum is %u",
                (unsigned long long)size, MAX_BATCH_SIZE);
        return -1;
    }
    if (size > end - pos) {
        set_err(err, (int64_t)start, "failed to read full batch: read %zu but wanted %llu",
                end - pos, (unsigned long long)size);
        return -1;
    }
    out->b.m = (int64_t)f[1];
    out->b.time = f[2];
    out->b.off = pos;
    out->b.hdr = start;
    out->b.size = (uint32_t)size;
    out->b.exp = exp;
    out->gen = f[0];
    *npos = pos + size;
    return 0;
}

void gen_reset(Gen *g)
{
    g->gen = 0;
    g->start = g->end = 0;
    g->batches.n = 0;
    g->ms.n = 0;
    g->mstart.n = 0;
    map_clear(&g->mindex);
    g->samples.n = 0;
    g->min_ts = 0;
    g->freq = 0;
    g->ticks_raw = 0;
    g->has_clock = 0;
    g->snap_time = g->snap_mono = g->snap_sec = g->snap_nsec = 0;
    map_clear(&g->strings);
    g->strs.n = 0;
    map_clear(&g->stacks);
    g->stackrecs.n = 0;
    g->stackpcs.n = 0;
    map_clear(&g->pcs);
    g->pcinfo.n = 0;
    map_clear(&g->resolved);
    free(g->str_dense);
    free(g->res_dense);
    free(g->name_dense);
    g->str_dense = g->res_dense = g->name_dense = NULL;
    g->str_dense_n = g->res_dense_n = 0;
}

void gen_free(Gen *g)
{
    buf_free(&g->batches);
    buf_free(&g->ms);
    buf_free(&g->mstart);
    map_free(&g->mindex);
    buf_free(&g->samples);
    map_free(&g->strings);
    buf_free(&g->strs);
    map_free(&g->stacks);
    buf_free(&g->stackrecs);
    buf_free(&g->stackpcs);
    map_free(&g->pcs);
    buf_free(&g->pcinfo);
    map_free(&g->resolved);
    free(g->str_dense);
    free(g->res_dense);
    free(g->name_dense);
    g->str_dense = g->res_dense = g->name_dense = NULL;
}

#define NOMEM()                                                                                    \
    do {                                                                                           \
        d->nomem = 1;                                                                              \
        set_err(err, -1, "out of memory");                                                         \
        return -1;                                                                                 \
    } while (0)

/* Read a varint field of a table batch; on failure set Go's "reading WHAT"
 * error (a bare EOF when not one byte of the field is there). */
static int v(Dec *d, size_t *p, size_t end, uint64_t *out, Err *err, const char *what)
{
    size_t at = *p;
    int r = uvarint(d->data, p, end, out);
    if (r) {
        if (at >= end) {
            set_err(err, (int64_t)at, "reading %s: EOF", what);
            err->table_eof = 1;
            return -1;
        }
        set_err(err, (int64_t)at, "reading %s: %s", what,
                r == -2 ? "varint overflows a 64-bit integer" : "unexpected EOF");
        return -1;
    }
    return 0;
}

static int add_strings(Dec *d, const CBatch *b, Err *err)
{
    Gen *g = &d->gen;
    const uint8_t *data = d->data;
    size_t p = b->off + 1, end = b->off + b->size;
    while (p < end) {
        uint8_t typ = data[p];
        if (typ != EV_STRING) {
            set_err(err, (int64_t)p, "expected string event, got %u", typ);
            return -1;
        }
        p++;
        uint64_t sid, n;
        if (v(d, &p, end, &sid, err, "string ID") || v(d, &p, end, &n, err, "string length"))
            return -1;
        if (n > MAX_STRING_SIZE) {
            set_err(err, (int64_t)p, "invalid string size %llu, maximum is %u",
                    (unsigned long long)n, MAX_STRING_SIZE);
            return -1;
        }
        if (n > end - p) {
            set_err(err, (int64_t)p, "failed to read full string: read %zu but wanted %llu",
                    end - p, (unsigned long long)n);
            return -1;
        }
        StrRef s = {p, (uint32_t)n};
        p += n;
        if (sid == 0 || map_get(&g->strings, sid)) {
            set_err(err, (int64_t)p, "multiple strings with the same ID: id=%llu",
                    (unsigned long long)sid);
            return -1;
        }
        if (map_put(&g->strings, sid, VEC_LEN(&g->strs, StrRef)) || buf_put(&g->strs, &s, sizeof s))
            NOMEM();
    }
    return 0;
}

static int add_stacks(Dec *d, const CBatch *b, Err *err)
{
    Gen *g = &d->gen;
    const uint8_t *data = d->data;
    size_t p = b->off + 1, end = b->off + b->size;
    char what[96];
    while (p < end) {
        uint8_t typ = data[p];
        if (typ != EV_STACK) {
            set_err(err, (int64_t)p, "expected stack event, got %u", typ);
            return -1;
        }
        p++;
        uint64_t sid, nframes;
        if (v(d, &p, end, &sid, err, "stack ID") || v(d, &p, end, &nframes, err, "stack frame count"))
            return -1;
        if (nframes > MAX_FRAMES) {
            set_err(err, (int64_t)p, "invalid stack size %llu, maximum is %u",
                    (unsigned long long)nframes, MAX_FRAMES);
            return -1;
        }
        StackRec rec = {sid, (uint32_t)VEC_LEN(&g->stackpcs, uint64_t), (uint32_t)nframes};
        for (uint64_t i = 0; i < nframes; i++) {
            uint64_t pc, fn, fl, line;
            static const char *parts[4] = {"PC", "funcID", "fileID", "line"};
            uint64_t *dst[4] = {&pc, &fn, &fl, &line};
            for (int k = 0; k < 4; k++) {
                size_t at = p;
                int r = uvarint(data, &p, end, dst[k]);
                if (r) {
                    snprintf(what, sizeof what, "frame %llu's %s for stack %llu",
                             (unsigned long long)(i + 1), parts[k], (unsigned long long)sid);
                    set_err(err, (int64_t)at, "reading %s: %s", what,
                            r == -2 ? "varint overflows a 64-bit integer" : "unexpected EOF");
                    return -1;
                }
            }
            if (buf_put(&g->stackpcs, &pc, sizeof pc))
                NOMEM();
            if (!map_get(&g->pcs, pc)) {
                /* The first frame seen for a PC wins for the whole generation. */
                PcInfo pi = {fn, fl, line};
                if (map_put(&g->pcs, pc, VEC_LEN(&g->pcinfo, PcInfo)) ||
                    buf_put(&g->pcinfo, &pi, sizeof pi))
                    NOMEM();
            }
        }
        if (sid == 0 || map_get(&g->stacks, sid)) {
            set_err(err, (int64_t)p, "multiple stacks with the same ID: id=%llu",
                    (unsigned long long)sid);
            return -1;
        }
        if (map_put(&g->stacks, sid, VEC_LEN(&g->stackrecs, StackRec)) ||
            buf_put(&g->stackrecs, &rec, sizeof rec))
            NOMEM();
    }
    return 0;
}

static int add_samples(Dec *d, const CBatch *b, Err *err)
{
    Gen *g = &d->gen;
    const uint8_t *data = d->data;
    size_t p = b->off + 1, end = b->off + b->size;
    while (p < end) {
        uint8_t typ = data[p];
        if (typ != EV_CPU_SAMPLE) {
            set_err(err, (int64_t)p, "expected CPU sample event, got %u", typ);
            return -1;
        }
        p++;
        uint64_t ts, m, pp, gid, stk;
        if (v(d, &p, end, &ts, err, "CPU sample time") || v(d, &p, end, &m, err, "CPU sample M") ||
            v(d, &p, end, &pp, err, "CPU sample P") || v(d, &p, end, &gid, err, "CPU sample G") ||
            v(d, &p, end, &stk, err, "CPU sample stack"))
            return -1;
        /* t holds the raw time until the generation is installed. */
        Sample s = {(int64_t)ts, (int64_t)m, (int64_t)pp, gid ? (int64_t)gid : NONE_ID, stk};
        if (buf_put(&g->samples, &s, sizeof s))
            NOMEM();
    }
    return 0;
}

static int set_sync(Dec *d, const CBatch *b, Err *err)
{
    Gen *g = &d->gen;
    const uint8_t *data = d->data;
    size_t p = b->off + (d->minor >= 25 ? 1 : 0), end = b->off + b->size;
    uint64_t last = b->time;
    while (p < end) {
        uint8_t typ = data[p++];
        if (typ == EV_FREQUENCY) {
            if (g->freq != 0) {
                set_err(err, (int64_t)p, "found multiple frequency events");
                return -1;
            }
            uint64_t f;
            if (v(d, &p, end, &f, err, "frequency"))
                return -1;
            g->freq = f ? 1.0 / ((double)f / 1e9) : INFINITY;
            g->ticks_raw = f;
        } else if (typ == EV_CLOCK_SNAPSHOT && d->minor >= 25) {
            if (g->has_clock) {
                set_err(err, (int64_t)p, "found multiple clock snapshot events");
                return -1;
            }
            g->has_clock = 1;
            uint64_t dt;
            if (v(d, &p, end, &dt, err, "clock snapshot time"))
                return -1;
            last += dt;
            g->snap_time = last;
            if (v(d, &p, end, &g->snap_mono, err, "clock snapshot mono") ||
                v(d, &p, end, &g->snap_sec, err, "clock snapshot sec") ||
                v(d, &p, end, &g->snap_nsec, err, "clock snapshot nsec"))
                return -1;
        } else {
            set_err(err, (int64_t)(p - 1), "expected frequency or clock snapshot event, got %u", typ);
            return -1;
        }
    }
    return 0;
}

/* File one batch into the generation (Go's processBatch). */
static int process(Dec *d, CBatch *b, Err *err)
{
    Gen *g = &d->gen;
    int head = b->size ? d->data[b->off] : -1;
    if (b->exp == 0 && head == EV_STRINGS)
        return add_strings(d, b, err);
    if (b->exp == 0 && head == EV_STACKS)
        return add_stacks(d, b, err);
    if (b->exp == 0 && head == EV_CPU_SAMPLES)
        return add_samples(d, b, err);
    if (b->exp == 0 && ((head == EV_FREQUENCY && d->minor < 25) || (head == EV_SYNC && d->minor >= 25)))
        return set_sync(d, b, err);
    if (b->exp != 0)
        return 0; /* experimental side data: not surfaced as events */
    if (head == EV_END_OF_GENERATION) {
        set_err(err, (int64_t)b->hdr, "unexpected EndOfGeneration batch; broken trace?");
        return -1;
    }
    uint64_t *mi = map_get(&g->mindex, (uint64_t)b->m);
    if (!mi) {
        uint64_t idx = VEC_LEN(&g->ms, int64_t);
        if (map_put(&g->mindex, (uint64_t)b->m, idx) || buf_put(&g->ms, &b->m, sizeof b->m))
            NOMEM();
        b->mi = (uint32_t)idx;
    } else {
        b->mi = (uint32_t)*mi;
    }
    if (buf_put(&g->batches, b, sizeof *b))
        NOMEM();
    return 0;
}

static int finish(Dec *d, Err *err)
{
    Gen *g = &d->gen;
    if (g->freq == 0) {
        set_err(err, g->start, "no frequency event found");
        return -1;
    }
    if (d->minor >= 25 && !g->has_clock) {
        set_err(err, g->start, "no clock snapshot event found");
        return -1;
    }
    size_t ns = VEC_LEN(&g->stackrecs, StackRec);
    for (size_t i = 0; i < ns; i++) {
        StackRec *r = &VEC_AT(&g->stackrecs, StackRec, i);
        for (uint32_t k = 0; k < r->n; k++) {
            uint64_t pc = VEC_AT(&g->stackpcs, uint64_t, r->first + k);
            uint64_t *pi = map_get(&g->pcs, pc);
            PcInfo *info = &VEC_AT(&g->pcinfo, PcInfo, *pi);
            if (info->fn != 0 && !map_get(&g->strings, info->fn)) {
                set_err(err, g->start, "found invalid func string ID %llu for stack %llu",
                        (unsigned long long)info->fn, (unsigned long long)r->sid);
                return -1;
            }
            if (info->fl != 0 && !map_get(&g->strings, info->fl)) {
                set_err(err, g->start, "found invalid file string ID %llu for stack %llu",
                        (unsigned long long)info->fl, (unsigned long long)r->sid);
                return -1;
            }
        }
    }
    /* Dense tables for the small ids. */
    uint64_t max_str = 0, max_stk = 0;
    for (size_t i = 0; i < g->strings.cap; i++)
        if (g->strings.used[i] && g->strings.keys[i] < DENSE_MAX && g->strings.keys[i] > max_str)
            max_str = g->strings.keys[i];
    for (size_t i = 0; i < ns; i++) {
        uint64_t sid = VEC_AT(&g->stackrecs, StackRec, i).sid;
        if (sid < DENSE_MAX && sid > max_stk)
            max_stk = sid;
    }
    g->str_dense = (uint32_t *)calloc(max_str + 1, sizeof(uint32_t));
    g->res_dense = (uint32_t *)calloc(max_stk + 1, sizeof(uint32_t));
    g->name_dense = (uint32_t *)calloc(max_str + 1, sizeof(uint32_t));
    if (!g->str_dense || !g->res_dense || !g->name_dense)
        NOMEM();
    g->str_dense_n = max_str + 1;
    g->res_dense_n = max_stk + 1;
    for (size_t i = 0; i < g->strings.cap; i++)
        if (g->strings.used[i] && g->strings.keys[i] < g->str_dense_n)
            g->str_dense[g->strings.keys[i]] = (uint32_t)(g->strings.vals[i] + 1);
    /* Group the event batches by thread (stable), threads in first-seen order. */
    size_t nb = VEC_LEN(&g->batches, CBatch), nm = VEC_LEN(&g->ms, int64_t);
    g->mstart.n = 0;
    if (buf_grow(&g->mstart, (nm + 1) * sizeof(uint32_t)))
        NOMEM();
    uint32_t *cnt = (uint32_t *)g->mstart.p;
    memset(cnt, 0, (nm + 1) * sizeof(uint32_t));
    for (size_t i = 0; i < nb; i++)
        cnt[VEC_AT(&g->batches, CBatch, i).mi + 1]++;
    for (size_t i = 0; i < nm; i++)
        cnt[i + 1] += cnt[i];
    g->mstart.n = (nm + 1) * sizeof(uint32_t);
    if (nb) {
        CBatch *sorted = (CBatch *)malloc(nb * sizeof(CBatch));
        uint32_t *fill = (uint32_t *)malloc((nm + 1) * sizeof(uint32_t));
        if (!sorted || !fill) {
            free(sorted);
            free(fill);
            NOMEM();
        }
        memcpy(fill, cnt, (nm + 1) * sizeof(uint32_t));
        for (size_t i = 0; i < nb; i++) {
            CBatch *b = &VEC_AT(&g->batches, CBatch, i);
            sorted[fill[b->mi]++] = *b;
        }
        memcpy(g->batches.p, sorted, nb * sizeof(CBatch));
        free(sorted);
        free(fill);
    }
    return 0;
}

int read_generation_spill(Dec *d, Err *err)
{
    Gen *g = &d->gen;
    gen_reset(g);
    size_t pos = d->pos;
    g->start = (int64_t)pos;
    if (d->have_spill) {
        Framed f = d->spill;
        d->have_spill = 0;
        g->gen = f.gen;
        g->min_ts = f.b.time;
        g->start = (int64_t)f.b.hdr;
        if (process(d, &f.b, err))
            return -1;
    }
    g->end = -1;
    for (;;) {
        Framed f;
        size_t npos;
        Err e2;
        e2.set = 0;
        int r = read_batch(d, pos, &f, &npos, &e2);
        if (r == 1)
            break;
        if (r < 0) {
            if (g->gen != 0) {
                /* Possibly just the next generation's first batch: keep what we have. */
                d->spill_err = e2;
                break;
            }
            *err = e2;
            return -1;
        }
        if (f.gen == 0) {
            set_err(err, (int64_t)pos, "invalid generation number %llu", (unsigned long long)f.gen);
            return -1;
        }
        if (g->gen == 0)
            g->gen = f.gen;
        if (f.gen == g->gen + 1) {
            d->spill = f;
            d->have_spill = 1;
            g->end = (int64_t)f.b.hdr;
            pos = npos;
            break;
        }
        if (f.gen != g->gen) {
            set_err(err, (int64_t)pos, "generations out of order");
            return -1;
        }
        if (g->min_ts == 0 || f.b.time < g->min_ts)
            g->min_ts = f.b.time;
        if (process(d, &f.b, err))
            return -1;
        pos = npos;
    }
    if (g->end < 0)
        g->end = (int64_t)pos;
    if (finish(d, err))
        return -1;
    d->pos = pos;
    return 0;
}

int read_generation_marked(Dec *d, int *eof, Err *err)
{
    Gen *g = &d->gen;
    gen_reset(g);
    size_t pos = d->pos;
    g->start = (int64_t)pos;
    *eof = 0;
    for (;;) {
        Framed f;
        size_t npos;
        int r = read_batch(d, pos, &f, &npos, err);
        if (r == 1) {
            if (g->batches.n) {
                set_err(err, (int64_t)pos, "incomplete generation found; trace likely truncated");
                return -1;
            }
            *eof = 1;
            return 0;
        }
        if (r < 0)
            return -1;
        if (g->gen == 0)
            g->gen = f.gen;
        if (f.b.exp == 0 && f.b.size && d->data[f.b.off] == EV_END_OF_GENERATION) {
            pos = npos;
            break;
        }
        if (f.gen == 0) {
            set_err(err, (int64_t)pos, "invalid generation number %llu", (unsigned long long)f.gen);
            return -1;
        }
        if (f.gen != g->gen) {
            set_err(err, (int64_t)pos,
                    "broken trace: missing end-of-generation event, or generations are interleaved");
            return -1;
        }
        if (g->min_ts == 0 || f.b.time < g->min_ts)
            g->min_ts = f.b.time;
        if (process(d, &f.b, err))
            return -1;
        pos = npos;
    }
    g->end = (int64_t)pos;
    if (finish(d, err))
        return -1;
    d->pos = pos;
    return 0;
}

/* Best-effort count of the generations in the undecoded tail (at least 1). */
int64_t count_generations(Dec *d, size_t pos)
{
    U64Map seen = {0};
    Err e;
    e.set = 0;
    for (;;) {
        Framed f;
        size_t npos;
        if (read_batch(d, pos, &f, &npos, &e) != 0)
            break;
        if (f.gen && map_put(&seen, f.gen, 1))
            break;
        pos = npos;
    }
    int64_t n = (int64_t)seen.len;
    map_free(&seen);
    return n > 1 ? n : 1;
}
