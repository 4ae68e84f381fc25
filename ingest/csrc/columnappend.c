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

static PyMethodDef methods[] = {
    {"narrow_into", narrow_into, METH_VARARGS,
     "narrow_into(src, dst) -> bool: int64 values into an int32/int64 array; False if one does "
     "not fit int32."},
    {"codes_into", codes_into, METH_VARARGS,
     "codes_into(idx, lut, dst): dst[i] = lut[idx[i]] (int32 indices, int8/int16 codes)."},
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
