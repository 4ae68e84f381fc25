/* Interval order of a trace's transitions by counting sort (ingest/derive.py).
 *
 * order_intervals(res, rid, ts, last_ts, order, end, first, last) -> bool
 *
 * Sorts the transitions by (resource, id), keeping their order within one
 * resource (a stable sort), and fills the four outputs that derive.Ordered
 * holds: order (int32 row numbers), end (int64: the next row's ts within the
 * same resource, else last_ts, never before the row's own ts), first and last
 * (bool: the row begins / ends its resource's run). Ids are dense small
 * numbers (goroutine and proc ids), so one counting pass replaces numpy's
 * comparison sort. Returns False, touching nothing, when the ids do not fit
 * that scheme (a negative id, a resource code other than 0 or 1, or ids so
 * sparse that the count table would outgrow the trace); the caller sorts then.
 */
#include "buffers.h"
#include <stdint.h>
#include <stdlib.h>

/* 0: done; 1: ids out of the scheme; -1: out of memory. */
static int run(const int8_t *res, const int32_t *rid, const int64_t *ts, int64_t last_ts,
               Py_ssize_t n, int32_t *order, int64_t *end, uint8_t *first, uint8_t *last)
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
    for (Py_ssize_t k = 0; k < n; k++) {
        if (k + 16 < n)
            __builtin_prefetch(&ts[order[k + 16]]); /* a cache miss each */
        int64_t t = ts[order[k]];
        int64_t e = last[k] ? last_ts : ts[order[k + 1]];
        end[k] = e > t ? e : t;
    }
    return 0;
}

static PyObject *order_intervals(PyObject *self, PyObject *args)
{
    PyObject *o[7];
    long long last_ts;
    if (!PyArg_ParseTuple(args, "OOOLOOOO:order_intervals", &o[0], &o[1], &o[2], &last_ts,
                          &o[3], &o[4], &o[5], &o[6]))
        return NULL;
    static const char *names[7] = {"res", "rid", "ts", "order", "end", "first", "last"};
    static const char *formats[7] = {"b", "i", "lq", "i", "lq", "?", "?"};
    static const Py_ssize_t sizes[7] = {1, 4, 8, 4, 8, 1, 1};
    Buf b[7];
    if (buf_get_all(o, b, 7, 3, names, formats, sizes) < 0)
        return NULL;
    Py_ssize_t n = buf_same_items(b, 7, names, "order_intervals");
    if (n < 0)
        return NULL;
    if (n >= INT32_MAX) {
        buf_release(b, 7);
        Py_RETURN_FALSE;
    }
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = run(b[0].b.buf, b[1].b.buf, b[2].b.buf, (int64_t)last_ts, n, b[3].b.buf, b[4].b.buf,
            b[5].b.buf, b[6].b.buf);
    Py_END_ALLOW_THREADS
    buf_release(b, 7);
    if (r < 0)
        return PyErr_NoMemory();
    return PyBool_FromLong(r == 0);
}

static PyMethodDef methods[] = {
    {"order_intervals", order_intervals, METH_VARARGS,
     "order_intervals(res, rid, ts, last_ts, order, end, first, last) -> bool\n\n"
     "Counting sort of transitions into interval order; False when the ids do not fit."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_intervalorder",
    "Interval order of transitions by counting sort (see ingest/derive.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__intervalorder(void)
{
    return PyModule_Create(&module);
}
