/* Begin and end events paired per goroutine and name in one pass
 * (ingest/load/pairing.py's pair_by_goroutine).
 *
 * pair_by_goroutine(g, key, begin, row_event, end_event) -> rows or -1
 *     The events, in time order, are goroutine g[i] (0 or more), key[i] (a
 *     second key such as a region's name code) and begin[i] (a begin, else an
 *     end). Each end closes the latest begin still open with its goroutine
 *     and key; an end with nothing open makes a row of its own. The rows are
 *     the begins and those ends in event order: row_event[r] is the event
 *     that made row r and end_event[r] the end that closed it (-1: none).
 *     Both outputs hold at least as many items as the events (int32 or
 *     int64, alike); the first `rows` are written. Returns -1, with nothing
 *     meaningful written, when the ends have to look past too many open
 *     begins of other keys (the caller then pairs with numpy's sorts).
 *
 * Why: pairing 7.5 M region events with sorts took ~2 s of the main thread
 * on the 200 MB benchmark trace. Here each goroutine's open begins are a
 * stack threaded through end_event (an open row's item holds the row below
 * it), so the pass needs no memory beyond its outputs and one head per
 * goroutine id, and it runs without the GIL.
 */
#include "buffers.h"
#include <stdint.h>

/* Signed integers' struct formats (unsigned long: numpy's uint64 on some builds
 * reads as 'L'; ids here are never that large). */
#define INTS "bhilqL"

/* The pass, on typed outputs (T: int32_t or int64_t). */
#define PAIR_PASS(T)                                                                        \
    do {                                                                                    \
        T *rows_ev = b[3].b.buf, *ends = b[4].b.buf;                                        \
        const unsigned char *beg = b[2].b.buf;                                              \
        for (Py_ssize_t i = 0; i < n && rows >= 0; i++) {                                   \
            int64_t gi = buf_int(&b[0], i), ki = buf_int(&b[1], i);                         \
            if (beg[i]) {                                                                   \
                rows_ev[rows] = (T)i;                                                       \
                ends[rows] = (T)head[gi]; /* the row below, while open */                   \
                head[gi] = rows++;                                                          \
                continue;                                                                   \
            }                                                                               \
            int64_t prev = -1, cur = head[gi];                                              \
            while (cur >= 0 && buf_int(&b[1], (Py_ssize_t)rows_ev[cur]) != ki) {            \
                prev = cur;                                                                 \
                cur = (int64_t)ends[cur];                                                   \
                if (++steps > max_steps)                                                    \
                    break;                                                                  \
            }                                                                               \
            if (steps > max_steps) {                                                        \
                rows = -1;                                                                  \
                break;                                                                      \
            }                                                                               \
            if (cur < 0) { /* nothing open: began before the trace */                       \
                rows_ev[rows] = (T)i;                                                       \
                ends[rows++] = -1;                                                          \
                continue;                                                                   \
            }                                                                               \
            if (prev < 0)                                                                   \
                head[gi] = (int64_t)ends[cur];                                              \
            else                                                                            \
                ends[prev] = ends[cur];                                                     \
            ends[cur] = (T)i;                                                               \
        }                                                                                   \
        /* Rows still open at the end: their items hold links, made -1. */                 \
        for (int64_t g = 0; rows >= 0 && g <= top; g++) {                                   \
            for (int64_t cur = head[g], next; cur >= 0; cur = next) {                       \
                next = (int64_t)ends[cur];                                                  \
                ends[cur] = -1;                                                             \
            }                                                                               \
        }                                                                                   \
    } while (0)

static PyObject *pair_by_goroutine(PyObject *self, PyObject *args)
{
    PyObject *o[5];
    if (!PyArg_ParseTuple(args, "OOOOO", &o[0], &o[1], &o[2], &o[3], &o[4]))
        return NULL;
    Buf b[5];
    memset(b, 0, sizeof b);
    int64_t *head = NULL;
    if (buf_get_widths(o[0], &b[0], 0, INTS, 4 | 8, "g") < 0 ||
        buf_get_widths(o[1], &b[1], 0, INTS, 1 | 2 | 4 | 8, "key") < 0 ||
        buf_get(o[2], &b[2], 0, "?", 1, "begin") < 0 ||
        buf_get_widths(o[3], &b[3], 1, INTS, 4 | 8, "row_event") < 0 ||
        buf_get_widths(o[4], &b[4], 1, INTS, 4 | 8, "end_event") < 0)
        goto fail;
    Py_ssize_t n = buf_items(&b[0]);
    if (buf_items(&b[1]) != n || buf_items(&b[2]) != n || buf_items(&b[3]) < n ||
        buf_items(&b[4]) < n || b[3].b.itemsize != b[4].b.itemsize) {
        PyErr_SetString(PyExc_ValueError, "pair_by_goroutine: g, key and begin must be as long, "
                                          "row_event and end_event alike and no shorter");
        goto fail;
    }
    if (b[3].b.itemsize == 4 && n >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "pair_by_goroutine: too many events for int32 rows");
        goto fail;
    }
    int64_t top = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t gi = buf_int(&b[0], i);
        if (gi < 0) {
            PyErr_Format(PyExc_ValueError, "pair_by_goroutine: negative goroutine id %lld",
                         (long long)gi);
            goto fail;
        }
        if (gi > top)
            top = gi;
    }
    if (top > 4 * (int64_t)n + (1 << 20)) {
        buf_release(b, 5);
        return PyLong_FromLong(-1); /* ids too sparse for a head each */
    }
    head = malloc((size_t)(top + 1) * sizeof *head);
    if (head == NULL && top >= 0) {
        PyErr_NoMemory();
        goto fail;
    }
    for (int64_t g = 0; g <= top; g++)
        head[g] = -1;
    int64_t rows = 0, steps = 0, max_steps = 16 * (int64_t)n + (1 << 20);
    Py_BEGIN_ALLOW_THREADS
    if (b[3].b.itemsize == 4)
        PAIR_PASS(int32_t);
    else
        PAIR_PASS(int64_t);
    Py_END_ALLOW_THREADS
    free(head);
    buf_release(b, 5);
    return PyLong_FromLongLong(rows);
fail:
    free(head);
    buf_release(b, 5);
    return NULL;
}

static PyMethodDef methods[] = {
    {"pair_by_goroutine", pair_by_goroutine, METH_VARARGS,
     "pair_by_goroutine(g, key, begin, row_event, end_event) -> rows (-1: gave up): begins "
     "and ends paired per (g, key), last opened first closed."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_pairing",
    "Begin and end events paired per goroutine and key in one pass.", -1, methods,
};

PyMODINIT_FUNC PyInit__pairing(void)
{
    return PyModule_Create(&module);
}
