/* Typed access to numpy arrays (or any buffer) from the ingest's C helpers. */
#ifndef GMPSCOPE_BUFFERS_H
#define GMPSCOPE_BUFFERS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    Py_buffer b;
    int held;
} Buf;

/* Get a C-contiguous buffer whose struct format is one of `formats` and whose
 * items are 1, 2, 4 or 8 bytes wide, as the bits of `widths` allow (the bit of
 * value k: k bytes); TypeError naming `what` otherwise. */
static inline int buf_get_widths(PyObject *o, Buf *buf, int writable, const char *formats,
                                 unsigned widths, const char *what)
{
    buf->held = 0; /* so that buf_release skips it if the buffer is not got */
    if (PyObject_GetBuffer(o, &buf->b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT |
                                           (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    buf->held = 1;
    const char *f = buf->b.format ? buf->b.format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    Py_ssize_t size = buf->b.itemsize;
    int size_ok = (size == 1 || size == 2 || size == 4 || size == 8) &&
                  (widths & (unsigned)size);
    if (!size_ok || strlen(f) != 1 || !strchr(formats, *f)) {
        char sizes[32] = "";
        int n = 0, count = 0, total = 0;
        for (unsigned w = 1; w <= 8; w <<= 1)
            total += (widths & w) != 0;
        for (unsigned w = 1; w <= 8; w <<= 1) {
            if (!(widths & w))
                continue;
            count++;
            n += snprintf(sizes + n, sizeof sizes - (size_t)n, "%s%u",
                          count == 1 ? "" : count == total ? " or " : ", ", w);
        }
        PyErr_Format(PyExc_TypeError, "%s: expected items of %s bytes (%s), got '%s'", what,
                     sizes, formats, buf->b.format ? buf->b.format : "B");
        return -1;
    }
    return 0;
}

/* buf_get_widths for items of `size_a` or `size_b` bytes (each 1, 2, 4 or 8). */
static inline int buf_get_sizes(PyObject *o, Buf *buf, int writable, const char *formats,
                                Py_ssize_t size_a, Py_ssize_t size_b, const char *what)
{
    return buf_get_widths(o, buf, writable, formats, (unsigned)(size_a | size_b), what);
}

/* buf_get_sizes for items of `itemsize` bytes (0: 2 or 4 bytes). */
static inline int buf_get(PyObject *o, Buf *buf, int writable, const char *formats,
                          Py_ssize_t itemsize, const char *what)
{
    return itemsize ? buf_get_sizes(o, buf, writable, formats, itemsize, itemsize, what)
                    : buf_get_sizes(o, buf, writable, formats, 2, 4, what);
}

/* Release the buffers held (each once: a released one is marked so). */
static inline void buf_release(Buf *bufs, int n)
{
    for (int i = 0; i < n; i++) {
        if (bufs[i].held)
            PyBuffer_Release(&bufs[i].b);
        bufs[i].held = 0;
    }
}

/* Signed integer item i of a buffer of 1-, 2-, 4- or 8-byte items. */
static inline int64_t buf_int(const Buf *b, Py_ssize_t i)
{
    switch (b->b.itemsize) {
    case 1:
        return ((const int8_t *)b->b.buf)[i];
    case 2:
        return ((const int16_t *)b->b.buf)[i];
    case 4:
        return ((const int32_t *)b->b.buf)[i];
    default:
        return ((const int64_t *)b->b.buf)[i];
    }
}
/* ValueError "fn: what <value> is not a code below top" (and -1) unless every
 * item of the integer buffer from `from` on lies in 0 .. top - 1 (codes that
 * index a table); 0 otherwise. */
static inline int buf_check_codes(const Buf *b, Py_ssize_t from, int64_t top, const char *fn,
                                  const char *what)
{
    Py_ssize_t n = b->b.len / b->b.itemsize;
    for (Py_ssize_t i = from; i < n; i++) {
        int64_t v = buf_int(b, i);
        if (v < 0 || v >= top) {
            PyErr_Format(PyExc_ValueError, "%s: %s %lld is not a code below %lld", fn, what,
                         (long long)v, (long long)top);
            return -1;
        }
    }
    return 0;
}
/* ValueError "fn: what must not decrease" (and -1) unless the n int64
 * values do not decrease; 0 otherwise. */
static inline int check_ascending(const int64_t *v, Py_ssize_t n, const char *fn,
                                  const char *what)
{
    for (Py_ssize_t i = 1; i < n; i++) {
        if (v[i] < v[i - 1]) {
            PyErr_Format(PyExc_ValueError, "%s: %s must not decrease", fn, what);
            return -1;
        }
    }
    return 0;
}
/* Items in a buffer got by buf_get. */
static inline Py_ssize_t buf_items(const Buf *buf)
{
    return buf->b.len / buf->b.itemsize;
}

/* buf_get for each of the n objects o[i] (writable from index writable_from
 * on), with names, formats and item sizes by index; on failure every buffer
 * got so far is released and -1 returned with the error set. */
static inline int buf_get_all(PyObject *const *o, Buf *bufs, int n, int writable_from,
                              const char *const *names, const char *const *formats,
                              const Py_ssize_t *sizes)
{
    memset(bufs, 0, (size_t)n * sizeof *bufs);
    for (int i = 0; i < n; i++) {
        if (buf_get(o[i], &bufs[i], i >= writable_from, formats[i], sizes[i], names[i]) < 0) {
            buf_release(bufs, n);
            return -1;
        }
    }
    return 0;
}

/* buf_get_all for read-only buffers whose items may take either of two
 * sizes (small[i] or large[i] bytes, as buf_get_sizes; each a bit of
 * buf_get_widths', so small[i] may be 2 | 4: either). */
static inline int buf_get_all_sizes(PyObject *const *o, Buf *bufs, int n,
                                    const char *const *names, const char *const *formats,
                                    const Py_ssize_t *small, const Py_ssize_t *large)
{
    memset(bufs, 0, (size_t)n * sizeof *bufs);
    for (int i = 0; i < n; i++) {
        if (buf_get_sizes(o[i], &bufs[i], 0, formats[i], small[i], large[i], names[i]) < 0) {
            buf_release(bufs, n);
            return -1;
        }
    }
    return 0;
}

/* ValueError (in function fn), with every buffer released, unless all n
 * buffers hold as many items as the first; its item count otherwise. */
static inline Py_ssize_t buf_same_items(Buf *bufs, int n, const char *const *names,
                                        const char *fn)
{
    Py_ssize_t items = buf_items(&bufs[0]);
    for (int i = 1; i < n; i++) {
        if (buf_items(&bufs[i]) != items) {
            PyErr_Format(PyExc_ValueError, "%s: %s has %zd items, %s %zd", fn, names[i],
                         buf_items(&bufs[i]), names[0], items);
            buf_release(bufs, n);
            return -1;
        }
    }
    return items;
}

#endif
