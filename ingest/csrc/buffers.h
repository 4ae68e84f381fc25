/* Typed access to numpy arrays (or any buffer) from the ingest's C helpers. */
#ifndef GMPSCOPE_BUFFERS_H
#define GMPSCOPE_BUFFERS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

typedef struct {
    Py_buffer b;
    int held;
} Buf;

/* Get a C-contiguous buffer of items of `itemsize` bytes whose struct format
 * is one of `formats`; TypeError naming `what` otherwise. */
static inline int buf_get(PyObject *o, Buf *buf, int writable, const char *formats,
                          Py_ssize_t itemsize, const char *what)
{
    if (PyObject_GetBuffer(o, &buf->b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT |
                                           (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    buf->held = 1;
    const char *f = buf->b.format ? buf->b.format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    if (buf->b.itemsize != itemsize || strlen(f) != 1 || !strchr(formats, *f)) {
        PyErr_Format(PyExc_TypeError, "%s: expected items of %zd bytes (%s), got '%s'", what,
                     itemsize, formats, buf->b.format ? buf->b.format : "B");
        return -1;
    }
    return 0;
}

static inline void buf_release(Buf *bufs, int n)
{
    for (int i = 0; i < n; i++)
        if (bufs[i].held)
            PyBuffer_Release(&bufs[i].b);
}

/* Items in a buffer got by buf_get. */
static inline Py_ssize_t buf_items(const Buf *buf)
{
    return buf->b.len / buf->b.itemsize;
}

#endif
