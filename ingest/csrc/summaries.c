/* Per-resource, per-thread and per-edge reductions of a trace's transitions
 * (ingest/derive/intervals.py), each one pass over the interval order without the
 * trace-length temporaries their numpy forms need.
 *
 * resource_sums(order, last_ts, starts, ts, frm, to, states, not_exist, sums, created, ended)
 *     Per resource run g (rows starts[g] .. starts[g+1]-1 of the interval
 *     order): the ns spent in each state of the bytes `states` (sums, G rows
 *     of len(states)), the first row entered from not_exist (created, -1:
 *     none) and the ts of the last row entering not_exist (ended, -1: none).
 * thread_sums(m, ts, res, to, order, last, last_ts, goroutine, running, syscall)
 *     -> (ms, first_ts, last_ts, transitions, running_ns, syscall_ns, syscalls)
 *     as bytearrays of int64, one item per distinct thread (m >= 0), by m.
 *     first/last: the ts of the thread's first and last transition (row
 *     order); the sums cover the goroutine Running and Syscall intervals
 *     whose transition was on that thread.
 * state_edges(order, first, ts, res, frm, to)
 *     -> [(code, count, dwell_count, dwell_sum, p50, p99, max)] per edge code
 *     (resource*64 + from*8 + to) present, by code; dwell is the time since
 *     the resource's previous row (none for its first row; negative ones are
 *     not measured); p50/p99 are nearest-rank quantiles (None when no dwell).
 *
 * syscall_rows(order, last_ts, last, ts, res, frm, to, p, m, codes)
 *     -> (rows, next_state, p_entry, p_lost, stolen_ts, stolen_m) as
 *     bytearrays (int64, int8, int64, bool, int64, int64), one item per
 *     goroutine Syscall interval, by interval row. codes = bytes(goroutine,
 *     proc, syscall, running, idle). next_state: the state the goroutine's
 *     next row enters (-1: none); p_lost: that is not Running on the P it
 *     entered the syscall with; stolen: the first Running->Idle of that P by
 *     another M than the one that last made it Running, within the syscall
 *     (-1: none).
 *
 * kind_counts(res, frm, to, reason, nreasons, counts)
 *     Adds to counts (int64, 2*8*8*nreasons items) each transition's kind
 *     code ((res*8 + frm)*8 + to)*nreasons + reason; False when a code is out
 *     of that range.
 * kind_numbers(res, frm, to, reason, nreasons, lut, kinds)
 *     kinds[i] (int8 or int16) = lut[code of transition i] (lut: int16, one
 *     item per code).
 *
 * An interval's end is computed where it is needed (row_end), not read from
 * an array of the trace's length: the loader does not hold one meanwhile.
 * Sums wrap like numpy's int64 arithmetic (they are done unsigned here).
 */
#include "buffers.h"
#include "intervals.h"
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define NCODES 128 /* 2 resources x 8 from-states x 8 to-states */
/* Rows fetched ahead in the gathers through the interval order: those are
 * cache misses, and prefetching halves the time of a pass. */
#define AHEAD 16
#define FETCH_AHEAD(order, k, norder, nrows, ...)                         \
    do {                                                                  \
        if ((k) + AHEAD < (norder)) {                                     \
            int32_t a_ = (order)[(k) + AHEAD];                            \
            if (a_ >= 0 && a_ < (nrows)) {                                \
                const void *p_[] = {__VA_ARGS__};                         \
                for (size_t i_ = 0; i_ < sizeof p_ / sizeof *p_; i_++)    \
                    __builtin_prefetch((const char *)p_[i_]);             \
            }                                                             \
        }                                                                 \
    } while (0)

/* ------------------------------------------------------------ resources */

static PyObject *resource_sums(PyObject *self, PyObject *args)
{
    PyObject *o[8];
    const char *states;
    Py_ssize_t nstates;
    int not_exist;
    long long last_ts;
    if (!PyArg_ParseTuple(args, "OLOOOOy#iOOO:resource_sums", &o[0], &last_ts, &o[1], &o[2],
                          &o[3], &o[4], &states, &nstates, &not_exist, &o[5], &o[6], &o[7]))
        return NULL;
    static const char *names[8] = {"order", "starts", "ts", "frm", "to", "sums", "created",
                                   "ended"};
    static const char *formats[8] = {"i", "lq", "lq", "b", "b", "lq", "lq", "lq"};
    static const Py_ssize_t sizes[8] = {4, 8, 8, 1, 1, 8, 8, 8};
    Buf b[8];
    if (buf_get_all(o, b, 8, 5, names, formats, sizes) < 0)
        return NULL;
    Py_ssize_t n = buf_items(&b[0]), groups = buf_items(&b[1]), ntr = buf_items(&b[2]);
    if (buf_items(&b[3]) != ntr || buf_items(&b[4]) != ntr ||
        buf_items(&b[5]) != groups * nstates || buf_items(&b[6]) != groups ||
        buf_items(&b[7]) != groups || nstates > 16) {
        PyErr_SetString(PyExc_ValueError, "resource_sums: arrays of mismatched lengths");
        buf_release(b, 8);
        return NULL;
    }
    const int32_t *order = b[0].b.buf;
    const int64_t *starts = b[1].b.buf, *ts = b[2].b.buf;
    const int8_t *frm = b[3].b.buf, *to = b[4].b.buf;
    uint64_t *sums = b[5].b.buf;
    int64_t *created = b[6].b.buf, *ended = b[7].b.buf;
    int slot[256];
    for (int s = 0; s < 256; s++)
        slot[s] = -1;
    for (Py_ssize_t j = 0; j < nstates; j++)
        slot[(uint8_t)states[j]] = (int)j;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t g = 0; g < groups && !bad; g++) {
        int64_t lo = starts[g], hi = g + 1 < groups ? starts[g + 1] : n;
        if (lo < 0 || hi > n || lo > hi) {
            bad = 1;
            break;
        }
        uint64_t *row = sums + g * nstates;
        memset(row, 0, (size_t)nstates * sizeof *row);
        created[g] = -1;
        ended[g] = -1;
        for (int64_t k = lo; k < hi; k++) {
            FETCH_AHEAD(order, k, n, ntr, &ts[a_], &frm[a_], &to[a_]);
            int32_t q = order[k];
            if (q < 0 || q >= ntr || (k + 1 < hi && (order[k + 1] < 0 || order[k + 1] >= ntr))) {
                bad = 1;
                break;
            }
            int s = slot[(uint8_t)to[q]];
            if (s >= 0)
                row[s] += (uint64_t)row_end(order, ts, k, k + 1 == hi, last_ts) - (uint64_t)ts[q];
            if (created[g] < 0 && frm[q] == not_exist)
                created[g] = k;
            if (to[q] == not_exist)
                ended[g] = ts[q];
        }
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 8);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "resource_sums: a row or run out of range");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* -------------------------------------------------------------- threads */

typedef struct {
    int64_t m, first, last, transitions, running, syscall, syscalls;
    int used;
} Thread;

typedef struct {
    Thread *t;
    size_t cap, n;
} Threads;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

/* The slot of thread m, or NULL when it has none. */
static Thread *find_thread(const Threads *h, int64_t m)
{
    if (!h->cap)
        return NULL;
    size_t j = mix((uint64_t)m) & (h->cap - 1);
    while (h->t[j].used) {
        if (h->t[j].m == m)
            return &h->t[j];
        j = (j + 1) & (h->cap - 1);
    }
    return NULL;
}

/* The slot of thread m, made when new; NULL when out of memory. */
static Thread *thread_of(Threads *h, int64_t m)
{
    Thread *found = find_thread(h, m);
    if (found)
        return found;
    if (2 * (h->n + 1) > h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        Thread *t = calloc(cap, sizeof *t);
        if (!t)
            return NULL;
        for (size_t i = 0; i < h->cap; i++) {
            if (!h->t[i].used)
                continue;
            size_t j = mix((uint64_t)h->t[i].m) & (cap - 1);
            while (t[j].used)
                j = (j + 1) & (cap - 1);
            t[j] = h->t[i];
        }
        free(h->t);
        h->t = t;
        h->cap = cap;
    }
    size_t j = mix((uint64_t)m) & (h->cap - 1);
    while (h->t[j].used && h->t[j].m != m)
        j = (j + 1) & (h->cap - 1);
    if (!h->t[j].used) {
        memset(&h->t[j], 0, sizeof h->t[j]);
        h->t[j].used = 1;
        h->t[j].m = m;
        h->n++;
    }
    return &h->t[j];
}

static int by_m(const void *a, const void *b)
{
    int64_t x = ((const Thread *)a)->m, y = ((const Thread *)b)->m;
    return (x > y) - (x < y);
}

static PyObject *column(const Thread *t, size_t n, size_t offset)
{
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(int64_t)));
    if (!out)
        return NULL;
    int64_t *v = (int64_t *)PyByteArray_AS_STRING(out);
    for (size_t i = 0; i < n; i++)
        memcpy(&v[i], (const char *)&t[i] + offset, sizeof(int64_t));
    return out;
}

static PyObject *thread_sums(PyObject *self, PyObject *args)
{
    PyObject *o[6];
    int goroutine, running, syscall;
    long long last_ts;
    if (!PyArg_ParseTuple(args, "OOOOOOLiii:thread_sums", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &last_ts, &goroutine, &running, &syscall))
        return NULL;
    static const char *names[6] = {"m", "ts", "res", "to", "order", "last"};
    static const char *formats[6] = {"i", "lq", "b", "b", "i", "?"};
    static const Py_ssize_t sizes[6] = {4, 8, 1, 1, 4, 1};
    Buf b[6];
    if (buf_get_all(o, b, 6, 6, names, formats, sizes) < 0)
        return NULL;
    Py_ssize_t n = buf_same_items(b, 6, names, "thread_sums");
    if (n < 0)
        return NULL;
    const int32_t *m = b[0].b.buf, *order = b[4].b.buf;
    const int64_t *ts = b[1].b.buf;
    const uint8_t *last = b[5].b.buf;
    const int8_t *res = b[2].b.buf, *to = b[3].b.buf;
    Threads h = {NULL, 0, 0};
    int err = 0; /* 1: no memory, 2: a row out of range */
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && !err; i++) {
        if (m[i] < 0)
            continue;
        Thread *t = thread_of(&h, m[i]);
        if (!t) {
            err = 1;
            break;
        }
        if (t->transitions == 0)
            t->first = ts[i];
        t->last = ts[i];
        t->transitions++;
    }
    for (Py_ssize_t k = 0; k < n && !err; k++) {
        FETCH_AHEAD(order, k, n, n, &ts[a_], &res[a_], &to[a_], &m[a_]);
        int32_t q = order[k];
        if (q < 0 || q >= n) {
            err = 2;
            break;
        }
        if (res[q] != goroutine || m[q] < 0 || (to[q] != running && to[q] != syscall))
            continue;
        Thread *t = find_thread(&h, m[q]); /* every m >= 0 got a slot above */
        if (!t) {
            err = 2;
            break;
        }
        if (!last[k] && (k + 1 >= n || order[k + 1] < 0 || order[k + 1] >= n)) {
            err = 2;
            break;
        }
        uint64_t d = (uint64_t)row_end(order, ts, k, last[k], last_ts) - (uint64_t)ts[q];
        if (to[q] == running) {
            t->running = (int64_t)((uint64_t)t->running + d);
        } else {
            t->syscall = (int64_t)((uint64_t)t->syscall + d);
            t->syscalls++;
        }
    }
    if (!err) {
        size_t k = 0;
        for (size_t i = 0; i < h.cap; i++)
            if (h.t[i].used)
                h.t[k++] = h.t[i];
        if (k)
            qsort(h.t, k, sizeof *h.t, by_m);
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 6);
    if (err) {
        free(h.t);
        if (err == 1)
            return PyErr_NoMemory();
        PyErr_SetString(PyExc_ValueError, "thread_sums: a row out of range");
        return NULL;
    }
    size_t offsets[7] = {offsetof(Thread, m), offsetof(Thread, first), offsetof(Thread, last),
                         offsetof(Thread, transitions), offsetof(Thread, running),
                         offsetof(Thread, syscall), offsetof(Thread, syscalls)};
    PyObject *out = PyTuple_New(7);
    for (int i = 0; out && i < 7; i++) {
        PyObject *c = column(h.t, h.n, offsets[i]);
        if (!c) {
            Py_CLEAR(out);
            break;
        }
        PyTuple_SET_ITEM(out, i, c);
    }
    free(h.t);
    return out;
}

/* ---------------------------------------------------------------- edges */

static void swap64(int64_t *a, int64_t *b)
{
    int64_t t = *a;
    *a = *b;
    *b = t;
}

/* Rearrange v[0..n) so that v[k] is the k-th smallest (0-based), smaller or
 * equal ones before it (Hoare selection, median-of-three pivots). */
static void select_kth(int64_t *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (hi > lo) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < v[lo])
            swap64(&v[mid], &v[lo]);
        if (v[hi] < v[lo])
            swap64(&v[hi], &v[lo]);
        if (v[hi] < v[mid])
            swap64(&v[hi], &v[mid]);
        int64_t pivot = v[mid];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                swap64(&v[i], &v[j]);
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return;
    }
}

/* The nearest-rank q-quantile's 0-based index among n sorted values. */
static size_t rank_of(double q, size_t n)
{
    double c = ceil(q * (double)n);
    size_t k = c < 1 ? 1 : (size_t)c;
    return k - 1;
}

static PyObject *u128(unsigned __int128 v)
{
    PyObject *hi = PyLong_FromUnsignedLongLong((unsigned long long)(v >> 64));
    PyObject *lo = PyLong_FromUnsignedLongLong((unsigned long long)v);
    PyObject *shift = PyLong_FromLong(64);
    PyObject *up = hi && shift ? PyNumber_Lshift(hi, shift) : NULL;
    PyObject *out = up && lo ? PyNumber_Add(up, lo) : NULL;
    Py_XDECREF(hi);
    Py_XDECREF(lo);
    Py_XDECREF(shift);
    Py_XDECREF(up);
    return out;
}

/* The two passes state_edges and edge_dwells share: each edge code's count
 * and measured dwells (pass 1), then the measured dwells grouped by code in
 * position order into *dwell (pass 2; malloc'd unless `given`, which holds n
 * items). Returns 0, 1 (no memory) or 2 (a row or state out of range). */
static int dwell_passes(const int32_t *order, const uint8_t *first, const int64_t *ts,
                        const int8_t *res, const int8_t *frm, const int8_t *to, Py_ssize_t n,
                        int64_t *count, int64_t *measured, int64_t **dwell, int64_t *given)
{
    int64_t at[NCODES + 1] = {0};
    int err = 0;
    for (int pass = 0; pass < 2 && !err; pass++) {
        int64_t prev = 0;
        for (Py_ssize_t k = 0; k < n; k++) {
            FETCH_AHEAD(order, k, n, n, &ts[a_], &res[a_], &frm[a_], &to[a_]);
            int32_t q = order[k];
            if (q < 0 || q >= n || res[q] < 0 || res[q] > 1 || frm[q] < 0 || frm[q] > 7 ||
                to[q] < 0 || to[q] > 7) {
                err = 2;
                break;
            }
            int code = (res[q] * 8 + frm[q]) * 8 + to[q];
            int64_t t = ts[q];
            int64_t d = (k == 0 || first[k]) ? -1 : t - prev;
            prev = t;
            if (pass == 0) {
                count[code]++;
                if (d >= 0)
                    measured[code]++;
            } else if (d >= 0) {
                (*dwell)[at[code]++] = d;
            }
        }
        if (pass == 0 && !err) {
            int64_t total = 0;
            for (int c = 0; c < NCODES; c++) {
                at[c] = total;
                total += measured[c];
            }
            *dwell = given ? given : malloc((size_t)(total ? total : 1) * sizeof **dwell);
            if (!*dwell)
                err = 1;
        }
    }
    return err;
}

static PyObject *state_edges(PyObject *self, PyObject *args)
{
    PyObject *o[6];
    if (!PyArg_ParseTuple(args, "OOOOOO:state_edges", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5]))
        return NULL;
    static const char *names[6] = {"order", "first", "ts", "res", "frm", "to"};
    static const char *formats[6] = {"i", "?", "lq", "b", "b", "b"};
    static const Py_ssize_t sizes[6] = {4, 1, 8, 1, 1, 1};
    Buf b[6];
    if (buf_get_all(o, b, 6, 6, names, formats, sizes) < 0)
        return NULL;
    Py_ssize_t n = buf_same_items(b, 6, names, "state_edges");
    if (n < 0)
        return NULL;
    int64_t count[NCODES] = {0}, measured[NCODES] = {0};
    int64_t top[NCODES];
    unsigned __int128 sum[NCODES];
    memset(sum, 0, sizeof sum);
    int64_t *dwell = NULL;
    int err;
    int64_t p50[NCODES], p99[NCODES];
    Py_BEGIN_ALLOW_THREADS
    err = dwell_passes(b[0].b.buf, b[1].b.buf, b[2].b.buf, b[3].b.buf, b[4].b.buf, b[5].b.buf,
                       n, count, measured, &dwell, NULL);
    if (!err) {
        int64_t startc = 0;
        for (int c = 0; c < NCODES; c++) {
            int64_t *v = dwell + startc;
            size_t len = (size_t)measured[c];
            startc += measured[c];
            top[c] = -1;
            if (!len)
                continue;
            for (size_t i = 0; i < len; i++) {
                sum[c] += (uint64_t)v[i];
                if (v[i] > top[c])
                    top[c] = v[i];
            }
            size_t k99 = rank_of(0.99, len), k50 = rank_of(0.5, len);
            select_kth(v, len, k99);
            p99[c] = v[k99];
            select_kth(v, k99 + 1, k50); /* the smaller ones sit before k99 */
            p50[c] = v[k50];
        }
    }
    Py_END_ALLOW_THREADS
    free(dwell);
    buf_release(b, 6);
    if (err == 1)
        return PyErr_NoMemory();
    if (err) {
        PyErr_SetString(PyExc_ValueError, "state_edges: a row or state out of range");
        return NULL;
    }
    PyObject *out = PyList_New(0);
    for (int c = 0; out && c < NCODES; c++) {
        if (!count[c])
            continue;
        PyObject *row;
        if (measured[c]) {
            /* The sum of up to 2**31 values below 2**63 fits 94 bits. */
            PyObject *s = u128(sum[c]);
            row = s ? Py_BuildValue("(iLLNLLL)", c, (long long)count[c],
                                    (long long)measured[c], s, (long long)p50[c],
                                    (long long)p99[c], (long long)top[c])
                    : NULL;
        } else {
            row = Py_BuildValue("(iLiOOOO)", c, (long long)count[c], 0, Py_None, Py_None,
                                Py_None, Py_None);
        }
        if (!row || PyList_Append(out, row) < 0) {
            Py_XDECREF(row);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(row);
    }
    return out;
}

/* edge_dwells(order, first, ts, res, frm, to, count, measured, dwell): the
 * passes of state_edges without the statistics, for a bucket of a big trace
 * whose edges' dwells are gathered across buckets (ingest/load/bucket_tables.py):
 * count and measured (int64, NCODES each) have each code's transitions and
 * measured dwells added, dwell (int64, as many items as order) gets the
 * measured dwells grouped by code, in position order within a code. */
static PyObject *edge_dwells(PyObject *self, PyObject *args)
{
    PyObject *o[9];
    if (!PyArg_ParseTuple(args, "OOOOOOOOO:edge_dwells", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6], &o[7], &o[8]))
        return NULL;
    static const char *names[9] = {"order", "first", "ts", "res", "frm", "to", "count",
                                   "measured", "dwell"};
    static const char *formats[9] = {"i", "?", "lq", "b", "b", "b", "lq", "lq", "lq"};
    static const Py_ssize_t sizes[9] = {4, 1, 8, 1, 1, 1, 8, 8, 8};
    Buf b[9];
    if (buf_get_all(o, b, 9, 6, names, formats, sizes) < 0)
        return NULL;
    Py_ssize_t n = buf_same_items(b, 6, names, "edge_dwells");
    if (n < 0) {
        buf_release(b, 9);
        return NULL;
    }
    if (buf_items(&b[6]) != NCODES || buf_items(&b[7]) != NCODES || buf_items(&b[8]) != n) {
        PyErr_Format(PyExc_ValueError, "edge_dwells: count and measured hold %d items, dwell "
                     "as many as order", NCODES);
        buf_release(b, 9);
        return NULL;
    }
    int64_t count[NCODES] = {0}, measured[NCODES] = {0};
    int64_t *dwell = b[8].b.buf;
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = dwell_passes(b[0].b.buf, b[1].b.buf, b[2].b.buf, b[3].b.buf, b[4].b.buf, b[5].b.buf,
                       n, count, measured, &dwell, dwell);
    Py_END_ALLOW_THREADS
    if (err) {
        buf_release(b, 9);
        PyErr_SetString(PyExc_ValueError, "edge_dwells: a row or state out of range");
        return NULL;
    }
    int64_t *c_out = b[6].b.buf, *m_out = b[7].b.buf;
    for (int c = 0; c < NCODES; c++) {
        c_out[c] += count[c];
        m_out[c] += measured[c];
    }
    buf_release(b, 9);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------- syscalls */

typedef struct {
    int64_t ts, m;
} Steal;

static PyObject *new_bytes(size_t n, size_t item, void **data)
{
    PyObject *o = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(n * item));
    if (o)
        *data = PyByteArray_AS_STRING(o);
    return o;
}

/* Whether interval row k (a proc's) is a steal: Running->Idle made by
 * another M than the one whose row just before made the proc Running. */
static int is_steal(Py_ssize_t k, const int32_t *order, const uint8_t *last,
                    const int8_t *res, const int8_t *frm, const int8_t *to, const int32_t *mm,
                    int8_t proc, int8_t running, int8_t idle)
{
    if (k == 0 || last[k - 1])
        return 0;
    int32_t q = order[k], prev = order[k - 1];
    return res[q] == proc && frm[q] == running && to[q] == idle && to[prev] == running &&
           mm[prev] >= 0 && mm[q] != mm[prev];
}

static PyObject *syscall_rows(PyObject *self, PyObject *args)
{
    PyObject *o[9];
    const char *codes;
    Py_ssize_t ncodes;
    long long last_ts;
    if (!PyArg_ParseTuple(args, "OLOOOOOOOOy#:syscall_rows", &o[0], &last_ts, &o[1], &o[2],
                          &o[3], &o[4], &o[5], &o[6], &o[7], &o[8], &codes, &ncodes))
        return NULL;
    if (ncodes != 5) {
        PyErr_SetString(PyExc_ValueError, "syscall_rows: codes must be 5 bytes");
        return NULL;
    }
    const int8_t goroutine = codes[0], proc = codes[1], syscall = codes[2], running = codes[3],
                 idle = codes[4];
    static const char *names[9] = {"order", "last", "ts", "res", "frm", "to", "rid", "p", "m"};
    /* p in 16 or 32 bits (the loader keeps small proc ids in 16). */
    static const char *formats[9] = {"i", "?", "lq", "b", "b", "b", "i", "hi", "i"};
    static const Py_ssize_t sizes[9] = {4, 1, 8, 1, 1, 1, 4, 0, 4};
    Buf b[9];
    if (buf_get_all(o, b, 9, 9, names, formats, sizes) < 0)
        return NULL;
    Py_ssize_t n = buf_same_items(b, 9, names, "syscall_rows");
    if (n < 0)
        return NULL;
    const int32_t *order = b[0].b.buf, *rid = b[6].b.buf, *mm = b[8].b.buf;
    const void *pbuf = b[7].b.buf;
    const int p16 = b[7].b.itemsize == 2;
#define PP(i) (p16 ? (int32_t)((const int16_t *)pbuf)[i] : ((const int32_t *)pbuf)[i])
    const int64_t *ts = b[2].b.buf;
    const uint8_t *last = b[1].b.buf;
    const int8_t *res = b[3].b.buf, *frm = b[4].b.buf, *to = b[5].b.buf;
    /* Pass 1: count the syscalls and the steals, and the top proc id that
     * has steals (steals are looked up by proc id). */
    size_t nsys = 0, nsteal = 0;
    int64_t top = -1;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < n; k++) {
        int32_t q = order[k];
        if (q < 0 || q >= n) {
            bad = 1;
            break;
        }
    }
    for (Py_ssize_t k = 0; k < n && !bad; k++) {
        FETCH_AHEAD(order, k, n, n, &res[a_], &frm[a_], &to[a_]);
        int32_t q = order[k];
        if (res[q] == goroutine && to[q] == syscall) {
            nsys++;
        } else if (is_steal(k, order, last, res, frm, to, mm, proc, running, idle) &&
                   rid[q] >= 0) {
            nsteal++;
            if (rid[q] > top)
                top = rid[q];
        }
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        buf_release(b, 9);
        PyErr_SetString(PyExc_ValueError, "syscall_rows: a row out of range");
        return NULL;
    }
    void *d[6] = {NULL};
    /* Rows, Ps and Ms in 32 bits, as the order and the trace hold them. */
    PyObject *out[6] = {new_bytes(nsys, 4, &d[0]), new_bytes(nsys, 1, &d[1]),
                        new_bytes(nsys, 4, &d[2]), new_bytes(nsys, 1, &d[3]),
                        new_bytes(nsys, 8, &d[4]), new_bytes(nsys, 4, &d[5])};
    Steal *steals = malloc((nsteal ? nsteal : 1) * sizeof *steals);
    /* Proc r's steals: steals[from[r] .. from[r + 1]), by time. */
    size_t *from = calloc((size_t)(top + 2), sizeof *from);
    int err = !steals || !from;
    for (int i = 0; i < 6; i++)
        err |= out[i] == NULL;
    if (err) {
        for (int i = 0; i < 6; i++)
            Py_XDECREF(out[i]);
        free(steals);
        free(from);
        buf_release(b, 9);
        return PyErr_NoMemory();
    }
    int32_t *rows = d[0], *p_entry = d[2], *stolen_m = d[5];
    int64_t *stolen_ts = d[4];
    int8_t *next_state = d[1];
    uint8_t *p_lost = d[3];
    Py_BEGIN_ALLOW_THREADS
    /* Proc rows come by (proc id, time): the steals come out in that order. */
    size_t w = 0;
    for (Py_ssize_t k = 1; k < n; k++) {
        int32_t q = order[k];
        if (is_steal(k, order, last, res, frm, to, mm, proc, running, idle) && rid[q] >= 0) {
            steals[w].ts = ts[q];
            steals[w].m = mm[q];
            w++;
            from[rid[q] + 1]++;
        }
    }
    for (int64_t r = 0; r <= top; r++)
        from[r + 1] += from[r];
    size_t i = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        FETCH_AHEAD(order, k, n, n, &res[a_], &to[a_]);
        int32_t q = order[k];
        if (res[q] != goroutine || to[q] != syscall)
            continue;
        int has_next = !last[k] && k + 1 < n;
        int32_t nq = has_next ? order[k + 1] : q;
        rows[i] = (int32_t)k; /* below 2**31: the order is int32 */
        next_state[i] = has_next ? to[nq] : -1;
        const int32_t pq = PP(q);
        p_entry[i] = pq;
        p_lost[i] = has_next && (to[nq] != running || PP(nq) != pq);
        stolen_ts[i] = stolen_m[i] = -1;
        if (p_lost[i] && pq >= 0 && pq <= top) {
            /* The first steal of that proc at or after the syscall's start. */
            size_t lo = from[pq], hi = from[pq + 1];
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (steals[mid].ts < ts[q])
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo < from[pq + 1] && steals[lo].ts <= row_end(order, ts, k, !has_next, last_ts)) {
                stolen_ts[i] = steals[lo].ts;
                stolen_m[i] = steals[lo].m;
            }
        }
        i++;
    }
    Py_END_ALLOW_THREADS
#undef PP
    free(steals);
    free(from);
    buf_release(b, 9);
    PyObject *tuple = PyTuple_New(6);
    if (!tuple) {
        for (int j = 0; j < 6; j++)
            Py_DECREF(out[j]);
        return NULL;
    }
    for (int j = 0; j < 6; j++)
        PyTuple_SET_ITEM(tuple, j, out[j]);
    return tuple;
}

/* ------------------------------------------------------------ kinds */

/* The four code columns (int8 each; reason int8 or int16) and nreasons,
 * checked; -1 with an error set. */
static Py_ssize_t kind_inputs(PyObject *const *o, Buf *b, long nreasons, const char *fn)
{
    static const char *names[4] = {"res", "frm", "to", "reason"};
    memset(b, 0, 4 * sizeof *b);
    for (int i = 0; i < 3; i++)
        if (buf_get(o[i], &b[i], 0, "b", 1, names[i]) < 0) {
            buf_release(b, 4);
            return -1;
        }
    if (buf_get_sizes(o[3], &b[3], 0, "bh", 1, 2, names[3]) < 0) {
        buf_release(b, 4);
        return -1;
    }
    if (nreasons < 1) {
        PyErr_Format(PyExc_ValueError, "%s: nreasons must be positive", fn);
        buf_release(b, 4);
        return -1;
    }
    return buf_same_items(b, 4, names, fn);
}

static inline int64_t kind_code(const Buf *b, Py_ssize_t i, long nreasons)
{
    int64_t res = ((const int8_t *)b[0].b.buf)[i], frm = ((const int8_t *)b[1].b.buf)[i];
    int64_t to = ((const int8_t *)b[2].b.buf)[i];
    int64_t reason = b[3].b.itemsize == 1 ? ((const int8_t *)b[3].b.buf)[i]
                                          : ((const int16_t *)b[3].b.buf)[i];
    if (res < 0 || res > 1 || frm < 0 || frm > 7 || to < 0 || to > 7 || reason < 0 ||
        reason >= nreasons)
        return -1;
    return ((res * 8 + frm) * 8 + to) * nreasons + reason;
}

static PyObject *kind_counts(PyObject *self, PyObject *args)
{
    PyObject *o[5];
    long nreasons;
    if (!PyArg_ParseTuple(args, "OOOOlO:kind_counts", &o[0], &o[1], &o[2], &o[3], &nreasons,
                          &o[4]))
        return NULL;
    Buf b[5];
    Py_ssize_t n = kind_inputs(o, b, nreasons, "kind_counts");
    if (n < 0)
        return NULL;
    if (buf_get(o[4], &b[4], 1, "lq", 8, "counts") < 0) {
        buf_release(b, 5);
        return NULL;
    }
    int64_t *counts = b[4].b.buf;
    Py_ssize_t top = buf_items(&b[4]);
    int ok = top == 2 * 8 * 8 * (Py_ssize_t)nreasons;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        int64_t c = kind_code(b, i, nreasons);
        if (c < 0)
            ok = 0;
        else
            counts[c]++;
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 5);
    return PyBool_FromLong(ok);
}

static PyObject *kind_numbers(PyObject *self, PyObject *args)
{
    PyObject *o[6];
    long nreasons;
    if (!PyArg_ParseTuple(args, "OOOOlOO:kind_numbers", &o[0], &o[1], &o[2], &o[3], &nreasons,
                          &o[4], &o[5]))
        return NULL;
    Buf b[6];
    Py_ssize_t n = kind_inputs(o, b, nreasons, "kind_numbers");
    if (n < 0)
        return NULL;
    if (buf_get(o[4], &b[4], 0, "h", 2, "lut") < 0) {
        buf_release(b, 6);
        return NULL;
    }
    if (buf_get_sizes(o[5], &b[5], 1, "bh", 1, 2, "kinds") < 0) {
        buf_release(b, 6);
        return NULL;
    }
    const int16_t *lut = b[4].b.buf;
    Py_ssize_t top = buf_items(&b[4]);
    int wide = b[5].b.itemsize == 2, ok = buf_items(&b[5]) == n;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        int64_t c = kind_code(b, i, nreasons);
        if (c < 0 || c >= top) {
            ok = 0;
            break;
        }
        if (wide)
            ((int16_t *)b[5].b.buf)[i] = lut[c];
        else
            ((int8_t *)b[5].b.buf)[i] = (int8_t)lut[c];
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 6);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "kind_numbers: a code out of range, or kinds of "
                        "another length");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"resource_sums", resource_sums, METH_VARARGS,
     "Per resource run: ns per state, the creating row and the end (see the module doc)."},
    {"thread_sums", thread_sums, METH_VARARGS,
     "Per thread: first/last ts, transitions, Running and Syscall ns, syscalls."},
    {"syscall_rows", syscall_rows, METH_VARARGS,
     "Per goroutine syscall: its row, next state, P, whether the P was lost, the steal."},
    {"edge_dwells", edge_dwells, METH_VARARGS,
     "edge_dwells(order, first, ts, res, frm, to, count, measured, dwell): each edge's "
     "transitions and measured dwells counted, the dwells grouped by edge code."},
    {"state_edges", state_edges, METH_VARARGS,
     "Per edge code: count, dwell count, sum, p50, p99 and max."},
    {"kind_counts", kind_counts, METH_VARARGS,
     "Counts of the transitions' kind codes; False when one is out of range."},
    {"kind_numbers", kind_numbers, METH_VARARGS,
     "Each transition's kind number, through a table by kind code."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_summaries",
    "Reductions of a trace's transitions in one pass each (see ingest/derive/intervals.py).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__summaries(void)
{
    return PyModule_Create(&module);
}
