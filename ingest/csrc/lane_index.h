/* What ingest.derive._lanesets' streaming builders share (lanesets.c):
 *
 * - Release: a Python callable called back every `stride` rows of a pass, so
 *   that the caller hands back the pages of the memory-mapped columns the
 *   pass reads (ingest.derive.cache.release_pages decides which are file
 *   mappings; this code never advises memory itself).
 * - Acc: a lane set's kept rows and its LaneSetIndex (ingest/derive/lanesets.py
 *   build_index) made as the rows come, in lane order: rows lasting no time
 *   are dropped, the ref of each kept row written out, and per block of
 *   `block` kept rows the longest duration and the ns of each of two
 *   candidate categories before it, as block_index makes them from whole
 *   columns (no index where two consecutive rows of a lane overlap).
 * - block_index: that index of a lane set held whole (build_index).
 */
#ifndef GMPSCOPE_LANE_INDEX_H
#define GMPSCOPE_LANE_INDEX_H

#include "buffers.h"
#include <stdint.h>

#define I64(o) ((int64_t *)PyByteArray_AS_STRING(o))

typedef struct {
    PyObject *fn; /* None/NULL: never called */
    Py_ssize_t stride, left;
    PyThreadState *ts; /* the thread state saved while the GIL is let go */
} Release;

static int release_init(Release *r, PyObject *fn, Py_ssize_t stride)
{
    r->fn = fn == Py_None ? NULL : fn;
    if (r->fn && !PyCallable_Check(r->fn)) {
        PyErr_SetString(PyExc_TypeError, "release must be callable or None");
        return -1;
    }
    r->stride = stride > 0 ? stride : 1;
    r->left = r->stride;
    r->ts = NULL;
    return 0;
}

static inline void release_unlock(Release *r) { r->ts = PyEval_SaveThread(); }

static inline void release_lock(Release *r) { PyEval_RestoreThread(r->ts); }

/* One row done: every `stride` rows the callback, with the GIL held; -1 when
 * it raised (the error is set once the GIL is taken back by release_lock). */
static inline int release_tick(Release *r)
{
    if (!r->fn || --r->left > 0)
        return 0;
    r->left = r->stride;
    PyEval_RestoreThread(r->ts);
    PyObject *x = PyObject_CallNoArgs(r->fn);
    Py_XDECREF(x);
    r->ts = PyEval_SaveThread();
    return x ? 0 : -1;
}

typedef struct {
    Py_ssize_t block, kept, cap, at; /* at: kept rows of the current block */
    int64_t *bmax, *cum;            /* bmax[cap / block + 1], cum[(.. + 1) * 2] */
    PyObject *obmax, *ocum;
    int8_t cand[2];                 /* the two categories, ascending */
    int seen[2], overlap;
    int64_t total[2], top, last_end;
    Py_ssize_t last_lane;
    char *ref;                      /* the kept rows' refs, 4 or 8 bytes each */
    int wide;
} Acc;

/* Room for `cap` rows of categories a and b; refs into `ref` (wide: int64). */
static int acc_init(Acc *a, Py_ssize_t cap, Py_ssize_t block, int8_t ca, int8_t cb, char *ref,
                    int wide)
{
    memset(a, 0, sizeof *a);
    a->block = block;
    a->cap = cap;
    a->cand[0] = ca < cb ? ca : cb;
    a->cand[1] = ca < cb ? cb : ca;
    a->last_lane = -1;
    a->ref = ref;
    a->wide = wide;
    Py_ssize_t blocks = cap / block + 1;
    a->obmax = PyByteArray_FromStringAndSize(NULL, blocks * 8);
    a->ocum = PyByteArray_FromStringAndSize(NULL, (blocks + 1) * 2 * 8);
    if (!a->obmax || !a->ocum) {
        Py_CLEAR(a->obmax);
        Py_CLEAR(a->ocum);
        return -1;
    }
    a->bmax = (int64_t *)PyByteArray_AS_STRING(a->obmax);
    a->cum = (int64_t *)PyByteArray_AS_STRING(a->ocum);
    a->cum[0] = a->cum[1] = 0;
    return 0;
}

static void acc_clear(Acc *a)
{
    Py_CLEAR(a->obmax);
    Py_CLEAR(a->ocum);
}

/* Row (start s, end e, category cat, ref v) of lane `lane` (lanes come in
 * order, each lane's rows in time order); 1 when kept (it lasts some time). */
static inline int acc_add(Acc *a, Py_ssize_t lane, int64_t s, int64_t e, int8_t cat, int64_t v)
{
    if (e <= s)
        return 0;
    if (lane == a->last_lane && a->last_end > s)
        a->overlap = 1; /* rows of one lane overlap: no index */
    a->last_lane = lane;
    a->last_end = e;
    if (!a->overlap) {
        if (a->at == a->block) {
            Py_ssize_t j = a->kept / a->block; /* blocks done */
            a->bmax[j - 1] = a->top;
            a->cum[2 * j] = a->total[0];
            a->cum[2 * j + 1] = a->total[1];
            a->top = 0;
            a->at = 0;
        }
        int c = cat == a->cand[0] ? 0 : 1;
        int64_t d = e - s;
        a->total[c] += d;
        a->seen[c] = 1;
        a->top = d > a->top ? d : a->top;
        a->at++;
    }
    if (a->wide)
        ((int64_t *)a->ref)[a->kept] = v;
    else
        ((int32_t *)a->ref)[a->kept] = (int32_t)v;
    a->kept++;
    return 1;
}

/* The index as build_index's block_index gives it: (block_max, cats, cum) as
 * bytearrays of int64, the categories present only; Py_None for overlapping
 * rows. Needs the GIL. */
static PyObject *acc_index(Acc *a)
{
    if (a->overlap)
        Py_RETURN_NONE;
    Py_ssize_t blocks = (a->kept + a->block - 1) / a->block;
    if (blocks) {
        a->bmax[blocks - 1] = a->top;
        a->cum[2 * blocks] = a->total[0];
        a->cum[2 * blocks + 1] = a->total[1];
    }
    int ncats = a->seen[0] + a->seen[1];
    int64_t cats[2];
    int k = 0;
    for (int c = 0; c < 2; c++)
        if (a->seen[c])
            cats[k++] = a->cand[c];
    if (ncats < 2) { /* the columns present, in place (each row moves down) */
        int keep = a->seen[0] ? 0 : 1;
        for (Py_ssize_t j = 0; j <= blocks; j++)
            for (int c = 0; c < ncats; c++)
                a->cum[j * ncats + c] = a->cum[j * 2 + keep];
    }
    PyObject *ocats = PyByteArray_FromStringAndSize((const char *)cats, ncats * 8);
    if (!ocats || PyByteArray_Resize(a->obmax, blocks * 8) < 0 ||
        PyByteArray_Resize(a->ocum, (blocks + 1) * ncats * 8) < 0) {
        Py_XDECREF(ocats);
        return NULL;
    }
    PyObject *t = PyTuple_Pack(3, a->obmax, ocats, a->ocum);
    Py_DECREF(ocats);
    return t;
}

/* Lane bounds grown as lanes come (their number is not known beforehand). */
typedef struct {
    int64_t *ids, *lo, *hi;
    Py_ssize_t n, cap;
} Lanes;

static int lanes_push(Lanes *l, int64_t id, int64_t lo)
{
    if (l->n == l->cap) {
        Py_ssize_t cap = l->cap ? 2 * l->cap : 16;
        int64_t *ids = realloc(l->ids, (size_t)cap * 8);
        if (ids)
            l->ids = ids;
        int64_t *los = realloc(l->lo, (size_t)cap * 8);
        if (los)
            l->lo = los;
        int64_t *his = realloc(l->hi, (size_t)cap * 8);
        if (his)
            l->hi = his;
        if (!ids || !los || !his)
            return -1;
        l->cap = cap;
    }
    l->ids[l->n] = id;
    l->lo[l->n] = lo;
    l->hi[l->n] = lo;
    l->n++;
    return 0;
}

static void lanes_free(Lanes *l)
{
    free(l->ids);
    free(l->lo);
    free(l->hi);
    memset(l, 0, sizeof *l);
}

/* An int64 array as a new bytearray. */
static PyObject *bytes_of(const int64_t *v, Py_ssize_t n)
{
    return PyByteArray_FromStringAndSize((const char *)v, n * 8);
}

/* ------------------------------------------------------------ block index */

static PyObject *block_index(PyObject *self, PyObject *args)
{
    PyObject *o[4];
    Py_ssize_t block;
    if (!PyArg_ParseTuple(args, "OOOOn:block_index", &o[0], &o[1], &o[2], &o[3], &block))
        return NULL;
    if (block < 1) {
        PyErr_SetString(PyExc_ValueError, "block_index: block must be positive");
        return NULL;
    }
    static const char *names[4] = {"start", "end", "cat", "lo"};
    static const char *formats[4] = {"lq", "lq", "b", "lq"};
    static const Py_ssize_t sizes[4] = {8, 8, 1, 8};
    Buf b[4];
    if (buf_get_all(o, b, 4, 4, names, formats, sizes) < 0)
        return NULL;
    Py_ssize_t n = buf_same_items(b, 3, names, "block_index");
    if (n < 0) {
        buf_release(b, 4);
        return NULL;
    }
    const int64_t *start = b[0].b.buf, *end = b[1].b.buf, *lo = b[3].b.buf;
    const int8_t *cat = b[2].b.buf;
    Py_ssize_t lanes = buf_items(&b[3]);
    for (Py_ssize_t k = 0; k < lanes; k++) {
        if (lo[k] < 0 || lo[k] > n) {
            buf_release(b, 4);
            PyErr_SetString(PyExc_ValueError, "block_index: a lane outside the rows");
            return NULL;
        }
    }
    Py_ssize_t nblocks = (n + block - 1) / block;
    unsigned char *first = calloc((size_t)(n ? n : 1), 1); /* rows that begin a lane */
    int overlap = 0, ncats = 0, bad_cat = 0;
    int code_of[128];
    int64_t cats[128];
    PyObject *bmax = NULL, *ocats = NULL, *cum = NULL, *result = NULL;
    if (!first) {
        buf_release(b, 4);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 1; k < lanes; k++)
        if (lo[k] > 0)
            first[lo[k]] = 1;
    for (Py_ssize_t i = 0; i + 1 < n && !overlap; i++)
        if (!first[i + 1] && end[i] > start[i + 1])
            overlap = 1; /* rows of one lane overlap: no index (reduced row by row) */
    if (!overlap) {
        unsigned char seen[128] = {0};
        for (Py_ssize_t i = 0; i < n; i++) {
            if (cat[i] < 0) {
                bad_cat = 1;
                break;
            }
            seen[cat[i]] = 1;
        }
        for (int c = 0; c < 128; c++) {
            code_of[c] = seen[c] ? ncats : -1;
            if (seen[c])
                cats[ncats++] = c;
        }
    }
    Py_END_ALLOW_THREADS
    free(first);
    if (bad_cat) {
        buf_release(b, 4);
        PyErr_SetString(PyExc_ValueError, "block_index: a negative category");
        return NULL;
    }
    if (overlap) {
        buf_release(b, 4);
        Py_RETURN_NONE;
    }
    bmax = PyByteArray_FromStringAndSize(NULL, nblocks * 8);
    ocats = PyByteArray_FromStringAndSize(NULL, ncats * 8);
    cum = PyByteArray_FromStringAndSize(NULL, (nblocks + 1) * ncats * 8);
    if (bmax && ocats && cum) {
        int64_t *mx = I64(bmax), *cs = I64(cum);
        memcpy(PyByteArray_AS_STRING(ocats), cats, (size_t)ncats * 8);
        Py_BEGIN_ALLOW_THREADS
        for (int c = 0; c < ncats; c++)
            cs[c] = 0;
        for (Py_ssize_t j = 0; j < nblocks; j++) {
            int64_t *row = cs + (j + 1) * ncats, *prev = cs + j * ncats;
            for (int c = 0; c < ncats; c++)
                row[c] = prev[c];
            int64_t m = 0; /* durations are positive: build_index dropped empty rows */
            Py_ssize_t a = j * block, z = a + block < n ? a + block : n;
            for (Py_ssize_t i = a; i < z; i++) {
                int64_t d = end[i] - start[i];
                m = d > m ? d : m;
                row[code_of[cat[i]]] += d;
            }
            mx[j] = m;
        }
        Py_END_ALLOW_THREADS
        result = PyTuple_Pack(3, bmax, ocats, cum);
    }
    Py_XDECREF(bmax);
    Py_XDECREF(ocats);
    Py_XDECREF(cum);
    buf_release(b, 4);
    return result;
}


#endif
