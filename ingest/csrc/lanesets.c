/* ingest._lanesets: the rows of the timeline's P and M lane sets
 * (ingest/timeline_lanes.py p_lanes, m_lanes) in one pass each over the
 * frames, in (lane, start) order, instead of numpy's masks, concatenations,
 * sort and gathers (a dozen passes over millions of rows).
 *
 * m_lane_rows(seq, res, state, m, start, end, codes)
 *     -> None, or (ids, lo, hi, start, end, cat, rows) as bytearrays (int64
 *     but cat, int8): the goroutine Running and Syscall intervals begun on a
 *     thread (m >= 0), lane by lane (ids: the threads, ascending; lane k's
 *     rows lo[k] .. hi[k]-1), each lane in start order. The rows are taken in
 *     Go's order (seq, a permutation of the rows), which is start order
 *     within a thread: one counting pass places them. None when that does not
 *     hold (seq not a permutation, a thread's starts not ascending in it, ids
 *     spread over more than 2**20): the caller sorts instead.
 *     codes = bytes(goroutine, running, syscall, cat_running, cat_syscall).
 * p_lane_rows(run_p, run_start, run_end, rid, start, end, state, first_proc_row, codes)
 *     -> None, or (ids, lo, hi, start, end, cat, ref) as above, ref being
 *     row * ref_sources + source: each proc's runs (SRC_RUN, from the proc
 *     runs, ordered by (p, start)) merged with its Idle intervals
 *     (SRC_INTERVAL, the proc rows from first_proc_row on, ordered by (proc,
 *     start)). None when an input is not in that order or ids spread over
 *     more than 2**20. codes = bytes(idle, cat_running, cat_idle,
 *     ref_sources, src_run, src_interval).
 */
#include "buffers.h"
#include <stdint.h>
#include <stdlib.h>

#define MAX_SPAN (1 << 20)
#define AHEAD 16

typedef struct {
    PyObject *ids, *lo, *hi, *start, *end, *cat, *ref;
} Out;

static void out_clear(Out *o)
{
    Py_CLEAR(o->ids);
    Py_CLEAR(o->lo);
    Py_CLEAR(o->hi);
    Py_CLEAR(o->start);
    Py_CLEAR(o->end);
    Py_CLEAR(o->cat);
    Py_CLEAR(o->ref);
}

static int out_alloc(Out *o, Py_ssize_t lanes, Py_ssize_t rows)
{
    o->ids = PyByteArray_FromStringAndSize(NULL, lanes * 8);
    o->lo = PyByteArray_FromStringAndSize(NULL, lanes * 8);
    o->hi = PyByteArray_FromStringAndSize(NULL, lanes * 8);
    o->start = PyByteArray_FromStringAndSize(NULL, rows * 8);
    o->end = PyByteArray_FromStringAndSize(NULL, rows * 8);
    o->cat = PyByteArray_FromStringAndSize(NULL, rows);
    o->ref = PyByteArray_FromStringAndSize(NULL, rows * 8);
    if (!o->ids || !o->lo || !o->hi || !o->start || !o->end || !o->cat || !o->ref) {
        out_clear(o);
        return -1;
    }
    return 0;
}

static PyObject *out_tuple(Out *o)
{
    PyObject *t = PyTuple_Pack(7, o->ids, o->lo, o->hi, o->start, o->end, o->cat, o->ref);
    out_clear(o);
    return t;
}

#define I64(o) ((int64_t *)PyByteArray_AS_STRING(o))

/* An integer item of a 4- or 8-byte buffer. */
static inline int64_t item(const Buf *b, Py_ssize_t i)
{
    return b->b.itemsize == 4 ? (int64_t)((const int32_t *)b->b.buf)[i]
                              : ((const int64_t *)b->b.buf)[i];
}

/* Lane codes: present ids ascending, and each id's lane (-1: none). */
static Py_ssize_t lanes_of(const Py_ssize_t *count, Py_ssize_t span, Py_ssize_t *lane)
{
    Py_ssize_t lanes = 0;
    for (Py_ssize_t c = 0; c < span; c++)
        lane[c] = count[c] ? lanes++ : -1;
    return lanes;
}

/* ------------------------------------------------------------ M lanes */

static PyObject *m_lane_rows(PyObject *self, PyObject *args)
{
    PyObject *o[6];
    const char *codes;
    Py_ssize_t ncodes;
    if (!PyArg_ParseTuple(args, "OOOOOOy#:m_lane_rows", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &codes, &ncodes))
        return NULL;
    if (ncodes != 5) {
        PyErr_SetString(PyExc_ValueError, "m_lane_rows: 5 codes expected");
        return NULL;
    }
    static const char *names[6] = {"seq", "res", "state", "m", "start", "end"};
    static const char *formats[6] = {"ilq", "b", "b", "ilq", "lq", "lq"};
    Py_ssize_t sizes[6] = {0, 1, 1, 0, 8, 8};
    Buf b[6];
    memset(b, 0, sizeof b);
    for (int i = 0; i < 6; i++) {
        Py_ssize_t size = sizes[i];
        if (buf_get(o[i], &b[i], 0, formats[i], size ? size : 8, names[i]) < 0) {
            if (!size) { /* 4 or 8 bytes: try 4 */
                PyErr_Clear();
                buf_release(&b[i], 1);
                b[i].held = 0;
                if (buf_get(o[i], &b[i], 0, formats[i], 4, names[i]) == 0)
                    continue;
            }
            buf_release(b, 6);
            return NULL;
        }
    }
    Py_ssize_t n = buf_same_items(b, 6, names, "m_lane_rows");
    if (n < 0)
        return NULL;
    const int8_t *res = b[1].b.buf, *state = b[2].b.buf;
    const int64_t *start = b[4].b.buf, *end = b[5].b.buf;
    int8_t goroutine = codes[0], running = codes[1], syscall = codes[2];
    int8_t cat_running = codes[3], cat_syscall = codes[4];
    PyObject *result = NULL;
    int32_t *inv = NULL;
    Py_ssize_t *count = NULL, *lane = NULL, *pos = NULL;
    Out out = {0};
    int ok = 1;
    int64_t mmin = INT64_MAX, mmax = INT64_MIN;
    Py_ssize_t rows = 0, lanes = 0, span = 0;

    Py_BEGIN_ALLOW_THREADS
    /* One pass in row order: each row's slot in Go's order (seq) gets the
     * row if it belongs to an M lane, else -1 (unwritten slots stay -2:
     * seq is not a permutation); the threads' spread and row counts. */
    inv = n < INT32_MAX ? malloc((size_t)(n ? n : 1) * sizeof *inv) : NULL;
    ok = inv != NULL;
    if (ok)
        for (Py_ssize_t t = 0; t < n; t++)
            inv[t] = -2;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        int64_t s = item(&b[0], i);
        if (s < 0 || s >= n || inv[s] != -2) {
            ok = 0; /* not a permutation */
            break;
        }
        int in_lane = 0;
        if (res[i] == goroutine && (state[i] == running || state[i] == syscall)) {
            int64_t m = item(&b[3], i);
            if (m >= 0) {
                in_lane = 1;
                mmin = m < mmin ? m : mmin;
                mmax = m > mmax ? m : mmax;
                rows++;
            }
        }
        inv[s] = in_lane ? (int32_t)i : -1;
    }
    span = rows ? (Py_ssize_t)(mmax - mmin + 1) : 0;
    if (ok && (span < 0 || span > MAX_SPAN))
        ok = 0;
    if (ok) {
        count = calloc((size_t)(span ? span : 1), sizeof *count);
        lane = calloc((size_t)(span ? span : 1), sizeof *lane);
        pos = calloc((size_t)(span ? span : 1), sizeof *pos);
        ok = count && lane && pos;
    }
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        if (res[i] == goroutine && (state[i] == running || state[i] == syscall)) {
            int64_t m = item(&b[3], i);
            if (m >= 0)
                count[m - mmin]++;
        }
    }
    if (ok)
        lanes = lanes_of(count, span, lane);
    Py_END_ALLOW_THREADS

    if (ok && out_alloc(&out, lanes, rows) == 0) {
        int64_t *ids = I64(out.ids), *lo = I64(out.lo), *hi = I64(out.hi);
        int64_t *ostart = I64(out.start), *oend = I64(out.end), *oref = I64(out.ref);
        int8_t *ocat = (int8_t *)PyByteArray_AS_STRING(out.cat);
        Py_BEGIN_ALLOW_THREADS
        Py_ssize_t at = 0;
        for (Py_ssize_t c = 0; c < span; c++) {
            if (lane[c] < 0)
                continue;
            ids[lane[c]] = mmin + c;
            lo[lane[c]] = at;
            pos[c] = at;
            at += count[c];
            hi[lane[c]] = at;
        }
        /* In Go's order: each thread's rows arrive in start order. Only the
         * lanes' rows are read, fetched ahead (they are scattered). */
        int is4 = b[3].b.itemsize == 4;
        for (Py_ssize_t t = 0; ok && t < n; t++) {
            if (t + AHEAD < n) {
                int32_t a = inv[t + AHEAD];
                if (a >= 0) {
                    __builtin_prefetch(start + a);
                    __builtin_prefetch(end + a);
                    __builtin_prefetch(is4 ? (const void *)((const int32_t *)b[3].b.buf + a)
                                           : (const void *)((const int64_t *)b[3].b.buf + a));
                    __builtin_prefetch(state + a);
                }
            }
            int32_t i = inv[t];
            if (i < 0)
                continue;
            int64_t m = item(&b[3], i);
            Py_ssize_t c = (Py_ssize_t)(m - mmin), k = pos[c]++;
            if (k > lo[lane[c]] && start[i] < ostart[k - 1]) {
                ok = 0; /* not in start order: the caller sorts */
                break;
            }
            ostart[k] = start[i];
            oend[k] = end[i];
            ocat[k] = state[i] == syscall ? cat_syscall : cat_running;
            oref[k] = i;
        }
        Py_END_ALLOW_THREADS
        if (ok)
            result = out_tuple(&out);
        else
            out_clear(&out);
    } else if (ok) {
        ok = -1; /* out of memory: the error is set */
    }
    free(inv);
    free(count);
    free(lane);
    free(pos);
    buf_release(b, 6);
    if (result)
        return result;
    if (ok == -1 || PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------ P lanes */

static PyObject *p_lane_rows(PyObject *self, PyObject *args)
{
    PyObject *o[7];
    Py_ssize_t first_proc;
    const char *codes;
    Py_ssize_t ncodes;
    if (!PyArg_ParseTuple(args, "OOOOOOOny#:p_lane_rows", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6], &first_proc, &codes, &ncodes))
        return NULL;
    if (ncodes != 6) {
        PyErr_SetString(PyExc_ValueError, "p_lane_rows: 6 codes expected");
        return NULL;
    }
    static const char *names[7] = {"run_p", "run_start", "run_end", "rid", "start", "end",
                                   "state"};
    static const char *formats[7] = {"ilq", "lq", "lq", "ilq", "lq", "lq", "b"};
    Py_ssize_t sizes[7] = {0, 8, 8, 0, 8, 8, 1};
    Buf b[7];
    memset(b, 0, sizeof b);
    for (int i = 0; i < 7; i++) {
        Py_ssize_t size = sizes[i];
        if (buf_get(o[i], &b[i], 0, formats[i], size ? size : 8, names[i]) < 0) {
            if (!size) {
                PyErr_Clear();
                buf_release(&b[i], 1);
                b[i].held = 0;
                if (buf_get(o[i], &b[i], 0, formats[i], 4, names[i]) == 0)
                    continue;
            }
            buf_release(b, 7);
            return NULL;
        }
    }
    Py_ssize_t nruns = buf_same_items(b, 3, names, "p_lane_rows");
    if (nruns < 0) {
        buf_release(b, 7);
        return NULL;
    }
    Py_ssize_t n = buf_same_items(b + 3, 4, names + 3, "p_lane_rows");
    if (n < 0) {
        buf_release(b, 7);
        return NULL;
    }
    if (first_proc < 0 || first_proc > n) {
        buf_release(b, 7);
        PyErr_SetString(PyExc_ValueError, "p_lane_rows: first_proc_row out of range");
        return NULL;
    }
    const int64_t *rstart = b[1].b.buf, *rend = b[2].b.buf;
    const int64_t *start = b[4].b.buf, *end = b[5].b.buf;
    const int8_t *state = b[6].b.buf;
    int8_t idle = codes[0], cat_running = codes[1], cat_idle = codes[2];
    int64_t ref_sources = codes[3], src_run = codes[4], src_interval = codes[5];
    PyObject *result = NULL;
    Py_ssize_t *count = NULL, *lane = NULL;
    Out out = {0};
    int ok = 1;
    int64_t pmin = INT64_MAX, pmax = INT64_MIN;
    Py_ssize_t rows = 0, lanes = 0, span = 0;

    Py_BEGIN_ALLOW_THREADS
    /* Both inputs ordered by (proc, start), and the ids' spread. */
    for (Py_ssize_t r = 0; ok && r < nruns; r++) {
        int64_t p = item(&b[0], r);
        if (r && (p < item(&b[0], r - 1) || (p == item(&b[0], r - 1) && rstart[r] < rstart[r - 1])))
            ok = 0;
        pmin = p < pmin ? p : pmin;
        pmax = p > pmax ? p : pmax;
        rows++;
    }
    int64_t prev_p = INT64_MIN, prev_start = INT64_MIN;
    for (Py_ssize_t i = first_proc; ok && i < n; i++) {
        if (state[i] != idle)
            continue;
        int64_t p = item(&b[3], i);
        if (p < prev_p || (p == prev_p && start[i] < prev_start))
            ok = 0;
        prev_p = p;
        prev_start = start[i];
        pmin = p < pmin ? p : pmin;
        pmax = p > pmax ? p : pmax;
        rows++;
    }
    span = rows ? (Py_ssize_t)(pmax - pmin + 1) : 0;
    if (ok && (span < 0 || span > MAX_SPAN))
        ok = 0;
    if (ok) {
        count = calloc((size_t)(span ? span : 1), sizeof *count);
        lane = calloc((size_t)(span ? span : 1), sizeof *lane);
        ok = count && lane;
    }
    for (Py_ssize_t r = 0; ok && r < nruns; r++)
        count[item(&b[0], r) - pmin]++;
    for (Py_ssize_t i = first_proc; ok && i < n; i++)
        if (state[i] == idle)
            count[item(&b[3], i) - pmin]++;
    if (ok)
        lanes = lanes_of(count, span, lane);
    Py_END_ALLOW_THREADS

    if (ok && out_alloc(&out, lanes, rows) == 0) {
        int64_t *ids = I64(out.ids), *lo = I64(out.lo), *hi = I64(out.hi);
        int64_t *ostart = I64(out.start), *oend = I64(out.end), *oref = I64(out.ref);
        int8_t *ocat = (int8_t *)PyByteArray_AS_STRING(out.cat);
        Py_BEGIN_ALLOW_THREADS
        Py_ssize_t at = 0;
        for (Py_ssize_t c = 0; c < span; c++) {
            if (lane[c] < 0)
                continue;
            ids[lane[c]] = pmin + c;
            lo[lane[c]] = at;
            at += count[c];
            hi[lane[c]] = at;
        }
        /* Merge, proc by proc (both inputs ascend by proc): a run before an
         * Idle interval starting at the same time. */
        Py_ssize_t r = 0, i = first_proc, k = 0;
        while (i < n && state[i] != idle)
            i++;
        while (r < nruns || i < n) {
            int take_run;
            if (r >= nruns) {
                take_run = 0;
            } else if (i >= n) {
                take_run = 1;
            } else {
                int64_t pr = item(&b[0], r), pi = item(&b[3], i);
                take_run = pr < pi || (pr == pi && rstart[r] <= start[i]);
            }
            if (take_run) {
                ostart[k] = rstart[r];
                oend[k] = rend[r];
                ocat[k] = cat_running;
                oref[k] = (int64_t)r * ref_sources + src_run;
                r++;
            } else {
                ostart[k] = start[i];
                oend[k] = end[i];
                ocat[k] = cat_idle;
                oref[k] = (int64_t)i * ref_sources + src_interval;
                i++;
                while (i < n && state[i] != idle)
                    i++;
            }
            k++;
        }
        Py_END_ALLOW_THREADS
        result = out_tuple(&out);
    } else if (ok) {
        ok = -1;
    }
    free(count);
    free(lane);
    buf_release(b, 7);
    if (result)
        return result;
    if (ok == -1 || PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"m_lane_rows", m_lane_rows, METH_VARARGS,
     "m_lane_rows(seq, res, state, m, start, end, codes) -> lane rows or None"},
    {"p_lane_rows", p_lane_rows, METH_VARARGS,
     "p_lane_rows(run_p, run_start, run_end, rid, start, end, state, first_proc_row, codes)"
     " -> lane rows or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_lanesets",
    "The timeline's P and M lane sets' rows in one pass (see ingest/timeline_lanes.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__lanesets(void) { return PyModule_Create(&module); }
