/* Each goroutine's time per category in one pass over its rows
 * (ingest/views/goroutines.py's category times).
 *
 * lane_sums(off, start, end, kind, cat_of, times)
 *     Lane i is rows off[i] .. off[i+1]-1 (off from 0 to the rows' count);
 *     each row adds end - start to times[i * ncats + cat_of[kind]] where that
 *     category is below ncats (a higher one, such as the time after a
 *     goroutine's end, is not kept). times: int64, lanes x ncats items, added to.
 *
 * Why: numpy's form (a key per row, a weighted count, a chunk of whole lanes
 * at a time) took 0.26-0.41 s of the 200 MB benchmark trace's findings, built
 * as it is ingested; here it is one pass without the GIL, the sums exact.
 */
#include "buffers.h"
#include <stdint.h>

static PyObject *lane_sums(PyObject *self, PyObject *args)
{
    PyObject *o[6];
    if (!PyArg_ParseTuple(args, "OOOOOO:lane_sums", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5]))
        return NULL;
    static const char *names[6] = {"off", "start", "end", "kind", "cat_of", "times"};
    static const char *formats[6] = {"lq", "lq", "lq", "h", "b", "lq"};
    static const Py_ssize_t sizes[6] = {8, 8, 8, 2, 1, 8};
    Buf b[6];
    if (buf_get_all(o, b, 6, 5, names, formats, sizes) < 0)
        return NULL;
    const int64_t *off = b[0].b.buf, *start = b[1].b.buf, *end = b[2].b.buf;
    const int16_t *kind = b[3].b.buf;
    const int8_t *cat_of = b[4].b.buf;
    int64_t *times = b[5].b.buf;
    Py_ssize_t lanes = buf_items(&b[0]) - 1, n = buf_items(&b[1]), ncat_of = buf_items(&b[4]);
    Py_ssize_t ncats = lanes > 0 ? buf_items(&b[5]) / lanes : 0;
    if (lanes < 0 || buf_items(&b[2]) != n || buf_items(&b[3]) != n ||
        (lanes > 0 && (off[0] != 0 || off[lanes] != n || buf_items(&b[5]) != lanes * ncats))) {
        PyErr_SetString(PyExc_ValueError, "lane_sums: start, end and kind as long, off from 0 "
                                          "to their length, times lanes x categories");
        buf_release(b, 6);
        return NULL;
    }
    if (check_ascending(off, lanes + 1, "lane_sums", "off") < 0 ||
        buf_check_codes(&b[3], 0, ncat_of, "lane_sums", "kind") < 0) {
        buf_release(b, 6);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < lanes; i++) {
        int64_t *row = times + i * ncats;
        for (Py_ssize_t r = (Py_ssize_t)off[i]; r < (Py_ssize_t)off[i + 1]; r++) {
            int c = cat_of[kind[r]];
            if (c >= 0 && c < ncats) /* wraps like numpy's int64 (done unsigned) */
                row[c] = (int64_t)((uint64_t)row[c] + (uint64_t)end[r] - (uint64_t)start[r]);
        }
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 6);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"lane_sums", lane_sums, METH_VARARGS,
     "lane_sums(off, start, end, kind, cat_of, times): each lane's end - start summed by "
     "category into times."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_lanesums", "Each goroutine's time per category in one pass.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__lanesums(void)
{
    return PyModule_Create(&module);
}
