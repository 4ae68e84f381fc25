/* Interval order of a trace's transitions by counting sort (ingest/derive/intervals.py).
 *
 * order_intervals(res, rid, order, first, last) -> bool
 *
 * Sorts the transitions by (resource, id), keeping their order within one
 * resource (a stable sort), and fills three of the arrays derive.Ordered
 * holds: order (int32 row numbers), first and last (bool: the row begins /
 * ends its resource's run). Ids are dense small numbers (goroutine and proc
 * ids), so one counting pass replaces numpy's comparison sort. Returns False,
 * touching nothing, when the ids do not fit that scheme (a negative id, a
 * resource code other than 0 or 1, or ids so sparse that the count table
 * would outgrow the trace); the caller sorts then.
 *
 * interval_ends(order, ts, last, last_ts, end[, rows])
 *
 * Fills end (int64): the next row's ts within the same resource, else
 * last_ts, never before the row's own ts; with rows (int32 or int64 row
 * numbers), end[i] is the end of row rows[i] instead. Made only when the intervals are
 * stored: the reductions compute an end where they need one, so the loader
 * does not hold this array while it derives.
 */
#include "buffers.h"
#include "intervals.h"
#include <stdint.h>
#include <stdlib.h>

/* 0: done; 1: ids out of the scheme; -1: out of memory. */
static int run(const int8_t *res, const int32_t *rid, Py_ssize_t n, int32_t *order,
               uint8_t *first, uint8_t *last)
{
    int32_t top = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (rid[i] < 0 || (res[i] != 0 && res[i] != 1))
            return 1;
        if (rid[i] > top)
            top = rid[i];
    }
    size_t per = (size_t)top + 1;
    size_t keys = 2 * per;
    if (keys > (size_t)n * 4 + (1u << 20))
        return 1;
    /* Unsigned 32 bits: n < 2**31 rows (checked by the caller). */
    uint32_t *at = calloc(keys + 1, sizeof *at);
    if (!at)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++)
        at[(size_t)res[i] * per + (size_t)rid[i] + 1]++;
    for (size_t k = 0; k < keys; k++)
        at[k + 1] += at[k];
    memset(first, 0, (size_t)n);
    memset(last, 0, (size_t)n);
    for (size_t k = 0; k < keys; k++) {
        if (at[k + 1] > at[k]) {
            first[at[k]] = 1;
            last[at[k + 1] - 1] = 1;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++)
        order[at[(size_t)res[i] * per + (size_t)rid[i]]++] = (int32_t)i;
    free(at);
    return 0;
}

static PyObject *order_intervals(PyObject *self, PyObject *args)
{
    PyObject *o[5];
    if (!PyArg_ParseTuple(args, "OOOOO:order_intervals", &o[0], &o[1], &o[2], &o[3], &o[4]))
        return NULL;
    static const char *names[5] = {"res", "rid", "order", "first", "last"};
    static const char *formats[5] = {"b", "i", "i", "?", "?"};
    static const Py_ssize_t sizes[5] = {1, 4, 4, 1, 1};
    Buf b[5];
    if (buf_get_all(o, b, 5, 2, names, formats, sizes) < 0)
        return NULL;
    Py_ssize_t n = buf_same_items(b, 5, names, "order_intervals");
    if (n < 0)
        return NULL;
    if (n >= INT32_MAX) {
        buf_release(b, 5);
        Py_RETURN_FALSE;
    }
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = run(b[0].b.buf, b[1].b.buf, n, b[2].b.buf, b[3].b.buf, b[4].b.buf);
    Py_END_ALLOW_THREADS
    buf_release(b, 5);
    if (r < 0)
        return PyErr_NoMemory();
    return PyBool_FromLong(r == 0);
}

static PyObject *interval_ends(PyObject *self, PyObject *args)
{
    PyObject *o[4], *rows_obj = Py_None;
    long long last_ts;
    if (!PyArg_ParseTuple(args, "OOOLO|O:interval_ends", &o[0], &o[1], &o[2], &last_ts, &o[3],
                          &rows_obj))
        return NULL;
    static const char *names[4] = {"order", "ts", "last", "end"};
    static const char *formats[4] = {"i", "lq", "?", "lq"};
    static const Py_ssize_t sizes[4] = {4, 8, 1, 8};
    Buf b[5];
    memset(b, 0, sizeof b);
    if (buf_get_all(o, b, 4, 3, names, formats, sizes) < 0)
        return NULL;
    Py_ssize_t n = buf_items(&b[0]);
    if (buf_items(&b[1]) != n || buf_items(&b[2]) != n) {
        PyErr_SetString(PyExc_ValueError, "interval_ends: order, ts and last differ in length");
        buf_release(b, 4);
        return NULL;
    }
    Py_ssize_t nrows = n, rowsize = 0;
    if (rows_obj != Py_None) {
        if (PyObject_GetBuffer(rows_obj, &b[4].b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
            buf_release(b, 4);
            return NULL;
        }
        b[4].held = 1;
        rowsize = b[4].b.itemsize;
        nrows = b[4].b.len / (rowsize ? rowsize : 1);
        if (rowsize != 4 && rowsize != 8) {
            PyErr_SetString(PyExc_TypeError, "interval_ends: rows must be int32 or int64");
            buf_release(b, 5);
            return NULL;
        }
    }
    if (buf_items(&b[3]) != nrows) {
        PyErr_Format(PyExc_ValueError, "interval_ends: end has %zd items, want %zd",
                     buf_items(&b[3]), nrows);
        buf_release(b, 5);
        return NULL;
    }
    const int32_t *order = b[0].b.buf;
    const int64_t *ts = b[1].b.buf;
    const uint8_t *last = b[2].b.buf;
    int64_t *end = b[3].b.buf;
    const void *rows = b[4].held ? b[4].b.buf : NULL;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    /* The order's entries are checked as they are read, not all of them on
     * every call (the loader asks for the ends a part at a time). Row k's
     * end is row k+1's own ts: for consecutive rows each ts is read once
     * (they are cache misses: the order scatters them). */
    Py_ssize_t next_k = -1;
    int64_t next_ts = 0;
    for (Py_ssize_t i = 0; i < nrows; i++) {
        Py_ssize_t k = i, ahead = i + 16 < nrows ? i + 16 : -1;
        if (rows) {
            k = rowsize == 4 ? (Py_ssize_t)((const int32_t *)rows)[i]
                             : (Py_ssize_t)((const int64_t *)rows)[i];
            if (ahead >= 0)
                ahead = rowsize == 4 ? (Py_ssize_t)((const int32_t *)rows)[ahead]
                                     : (Py_ssize_t)((const int64_t *)rows)[ahead];
        }
        if (k < 0 || k >= n) {
            bad = 1;
            break;
        }
        if (ahead >= 0 && ahead + 1 < n) {
            int32_t a = order[ahead + 1];
            if (a >= 0 && a < n)
                __builtin_prefetch(&ts[a]);
        }
        int32_t own = order[k];
        if (own < 0 || own >= n) {
            bad = 1;
            break;
        }
        int64_t t = k == next_k ? next_ts : ts[own];
        int64_t e = (int64_t)last_ts;
        if (!last[k] && k + 1 < n) {
            int32_t nx = order[k + 1];
            if (nx < 0 || nx >= n) {
                bad = 1;
                break;
            }
            e = ts[nx];
            next_k = k + 1;
            next_ts = e;
        }
        end[i] = e > t ? e : t;
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 5);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "interval_ends: a row out of range");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"order_intervals", order_intervals, METH_VARARGS,
     "order_intervals(res, rid, order, first, last) -> bool\n\n"
     "Counting sort of transitions into interval order; False when the ids do not fit."},
    {"interval_ends", interval_ends, METH_VARARGS,
     "interval_ends(order, ts, last, last_ts, end[, rows]): interval ends (see the module doc)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_intervalorder",
    "Interval order of transitions by counting sort (see ingest/derive/intervals.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__intervalorder(void)
{
    return PyModule_Create(&module);
}
