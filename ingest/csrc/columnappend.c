/* A decoded row group's columns copied into the loader's compact arrays
 * (ingest/load/transitions_builder.py), each in one call that keeps the GIL.
 *
 * narrow_into(src, dst) -> bool
 *     Copies the int64 values of src into dst (int32 or int64, as many
 *     items). With an int32 dst, returns False as soon as a value does not
 *     fit (dst is then partly written; the caller keeps the column wide).
 * codes_into(idx, lut, dst)
 *     dst[i] = lut[idx[i]]: dictionary indices (int32) to small codes
 *     (int8 or int16, lut and dst alike); ValueError for an index outside
 *     the table.
 * thread_spans(m, ts) -> (ids, first, last, low, high)
 *     For each thread id m >= 0 of a row group (int32 or int64; negative:
 *     no thread), in the order of its first row: the time of its first and
 *     of its last row, and its least and greatest time (ts int64). Lists:
 *     a row group holds a few dozen threads.
 *
 * Why C for so little work: the loader decodes on a thread while the main
 * thread imports and opens the database. numpy gives the GIL up around every
 * operation on a row group, and each time the decode thread wants it back it
 * waits for the main thread's switch interval (5 ms): the row groups' dozen
 * numpy calls each cost more waiting than working, and the decode took twice
 * as long beside the imports as alone. These calls hold the GIL throughout
 * (a row group's copy is a fraction of a millisecond).
 */
#include "buffers.h"
#include <stdint.h>

static PyObject *narrow_into(PyObject *self, PyObject *args)
{
    PyObject *o[2];
    if (!PyArg_ParseTuple(args, "OO", &o[0], &o[1]))
        return NULL;
    Buf b[2];
    memset(b, 0, sizeof b);
    if (buf_get(o[0], &b[0], 0, "qlL", 8, "src") < 0)
        goto fail;
    if (PyObject_GetBuffer(o[1], &b[1].b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0)
        goto fail;
    b[1].held = 1;
    Py_ssize_t n = buf_items(&b[0]);
    if (b[1].b.len / b[1].b.itemsize != n || (b[1].b.itemsize != 4 && b[1].b.itemsize != 8)) {
        PyErr_Format(PyExc_ValueError, "narrow_into: dst must hold %zd int32 or int64 items", n);
        goto fail;
    }
    const int64_t *src = b[0].b.buf;
    int fits = 1;
    if (b[1].b.itemsize == 8) {
        memcpy(b[1].b.buf, src, (size_t)n * 8);
    } else {
        int32_t *dst = b[1].b.buf;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (src[i] < INT32_MIN || src[i] > INT32_MAX) {
                fits = 0;
                break;
            }
            dst[i] = (int32_t)src[i];
        }
    }
    buf_release(b, 2);
    return PyBool_FromLong(fits);
fail:
    buf_release(b, 2);
    return NULL;
}

static PyObject *codes_into(PyObject *self, PyObject *args)
{
    PyObject *o[3];
    if (!PyArg_ParseTuple(args, "OOO", &o[0], &o[1], &o[2]))
        return NULL;
    Buf b[3];
    memset(b, 0, sizeof b);
    if (buf_get(o[0], &b[0], 0, "i", 4, "idx") < 0)
        goto fail;
    if (PyObject_GetBuffer(o[1], &b[1].b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        goto fail;
    b[1].held = 1;
    Py_ssize_t size = b[1].b.itemsize;
    if (size != 1 && size != 2) {
        PyErr_SetString(PyExc_TypeError, "codes_into: lut must hold int8 or int16 items");
        goto fail;
    }
    if (buf_get(o[2], &b[2], 1, size == 1 ? "b" : "h", size, "dst") < 0)
        goto fail;
    Py_ssize_t n = buf_items(&b[0]), top = buf_items(&b[1]);
    if (buf_items(&b[2]) != n) {
        PyErr_Format(PyExc_ValueError, "codes_into: dst has %zd items, idx %zd",
                     buf_items(&b[2]), n);
        goto fail;
    }
    const int32_t *idx = b[0].b.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (idx[i] < 0 || idx[i] >= top) {
            PyErr_Format(PyExc_ValueError, "codes_into: index %d outside a table of %zd",
                         (int)idx[i], top);
            goto fail;
        }
    }
    if (size == 1) {
        const int8_t *lut = b[1].b.buf;
        int8_t *dst = b[2].b.buf;
        for (Py_ssize_t i = 0; i < n; i++)
            dst[i] = lut[idx[i]];
    } else {
        const int16_t *lut = b[1].b.buf;
        int16_t *dst = b[2].b.buf;
        for (Py_ssize_t i = 0; i < n; i++)
            dst[i] = lut[idx[i]];
    }
    buf_release(b, 3);
    Py_RETURN_NONE;
fail:
    buf_release(b, 3);
    return NULL;
}

/* An open-addressing table of the thread ids met in one row group. */
typedef struct {
    int64_t id, first, last, low, high;
    Py_ssize_t order; /* -1: a free slot */
} Span;

static PyObject *thread_spans(PyObject *self, PyObject *args)
{
    PyObject *o[2];
    if (!PyArg_ParseTuple(args, "OO", &o[0], &o[1]))
        return NULL;
    Buf b[2];
    memset(b, 0, sizeof b);
    Span *tab = NULL;
    Py_ssize_t *slot_of = NULL;
    PyObject *out = NULL, *lists[5] = {NULL, NULL, NULL, NULL, NULL};
    if (buf_get_sizes(o[0], &b[0], 0, "ilqL", 4, 8, "m") < 0)
        goto done;
    if (buf_get(o[1], &b[1], 0, "qlL", 8, "ts") < 0)
        goto done;
    Py_ssize_t n = buf_items(&b[0]);
    if (buf_items(&b[1]) != n) {
        PyErr_Format(PyExc_ValueError, "thread_spans: ts has %zd items, m %zd",
                     buf_items(&b[1]), n);
        goto done;
    }
    size_t cap = 64; /* doubled as ids arrive */
    Py_ssize_t count = 0;
    tab = malloc(cap * sizeof *tab);
    slot_of = malloc(cap * sizeof *slot_of);
    if (!tab || !slot_of) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t k = 0; k < cap; k++)
        tab[k].order = -1;
    const int64_t *ts = b[1].b.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t id = buf_int(&b[0], i);
        if (id < 0)
            continue;
        size_t k = (size_t)((uint64_t)id * 0x9E3779B97F4A7C15ull >> 32) & (cap - 1);
        while (tab[k].order >= 0 && tab[k].id != id)
            k = (k + 1) & (cap - 1);
        int64_t t = ts[i];
        if (tab[k].order >= 0) {
            Span *s = &tab[k];
            s->last = t;
            if (t < s->low)
                s->low = t;
            if (t > s->high)
                s->high = t;
            continue;
        }
        tab[k] = (Span){id, t, t, t, t, count};
        slot_of[count++] = (Py_ssize_t)k;
        if ((size_t)count * 2 > cap) { /* keep the table at most half full */
            size_t ncap = cap * 2;
            Span *nt = malloc(ncap * sizeof *nt);
            Py_ssize_t *ns = malloc(ncap * sizeof *ns);
            if (!nt || !ns) {
                free(nt);
                free(ns);
                PyErr_NoMemory();
                goto done;
            }
            for (size_t j = 0; j < ncap; j++)
                nt[j].order = -1;
            for (Py_ssize_t c = 0; c < count; c++) {
                Span s = tab[slot_of[c]];
                size_t j = (size_t)((uint64_t)s.id * 0x9E3779B97F4A7C15ull >> 32) & (ncap - 1);
                while (nt[j].order >= 0)
                    j = (j + 1) & (ncap - 1);
                nt[j] = s;
                ns[c] = (Py_ssize_t)j;
            }
            free(tab);
            free(slot_of);
            tab = nt;
            slot_of = ns;
            cap = ncap;
        }
    }
    for (int j = 0; j < 5; j++) {
        lists[j] = PyList_New(count);
        if (!lists[j])
            goto lists_fail;
    }
    for (Py_ssize_t c = 0; c < count; c++) {
        const Span *s = &tab[slot_of[c]];
        int64_t v[5] = {s->id, s->first, s->last, s->low, s->high};
        for (int j = 0; j < 5; j++) {
            PyObject *x = PyLong_FromLongLong(v[j]);
            if (!x)
                goto lists_fail;
            PyList_SET_ITEM(lists[j], c, x);
        }
    }
    out = Py_BuildValue("(NNNNN)", lists[0], lists[1], lists[2], lists[3], lists[4]);
    goto done; /* the lists are out's now */
lists_fail:
    for (int j = 0; j < 5; j++)
        Py_XDECREF(lists[j]);
done:
    free(tab);
    free(slot_of);
    buf_release(b, 2);
    return out;
}

static PyMethodDef methods[] = {
    {"narrow_into", narrow_into, METH_VARARGS,
     "narrow_into(src, dst) -> bool: int64 values into an int32/int64 array; False if one does "
     "not fit int32."},
    {"codes_into", codes_into, METH_VARARGS,
     "codes_into(idx, lut, dst): dst[i] = lut[idx[i]] (int32 indices, int8/int16 codes)."},
    {"thread_spans", thread_spans, METH_VARARGS,
     "thread_spans(m, ts) -> (ids, first, last, low, high): per thread id >= 0, in order "
     "of its first row, the times of its first and last rows, its least and greatest."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_columnappend",
    "Row groups' columns into the loader's compact arrays, holding the GIL.", -1, methods,
};

PyMODINIT_FUNC PyInit__columnappend(void)
{
    return PyModule_Create(&module);
}
