/* A waiting profile's waits in one pass over whole goroutines' rows
 * (ingest/views/pprof.py's _part_waits; the rules are its module's).
 *
 * lane_waits(kind, start_ts, end_ts, loff, flags, t1, t2, last_ts,
 *            lane, begin, last, value) -> waits
 *     The rows are goroutine lanes: lane i is rows loff[i] .. loff[i+1]-1,
 *     in time order. flags[kind[r]] says of row r's transition: bit 1 it
 *     enters the profile's state, 2 with a reason the profile takes, 4 it
 *     enters Running, 8 it ends the goroutine's life. A run of consecutive
 *     rows of a lane in the state makes one wait, begun by its first row the
 *     profile takes and ended by the run's last row's end, unless that row is
 *     the lane's last (the wait goes on at the trace's end); none without a
 *     row taken. The wait is clipped to the goroutine's life (from the start
 *     of its first row entering Running, to the start of its last row ending
 *     it, else last_ts) and to [t1, t2]; what is left empty is dropped. For
 *     each wait kept, in row order: its lane, its first and last rows and
 *     its clipped ns (kind int16; outputs int64, as many items as rows).
 *
 * Why: numpy's form (masks, searches and gathers the length of the rows)
 * took ~1 s of the flame page's first profile on the 200 MB benchmark trace,
 * built as the trace is ingested; here it is one pass without the GIL.
 */
#include "buffers.h"
#include <stdint.h>

enum { IN_STATE = 1, TAKES = 2, STARTS_RUN = 4, ENDS_LIFE = 8 };

static PyObject *lane_waits(PyObject *self, PyObject *args)
{
    PyObject *o[9];
    long long t1, t2, last_ts;
    if (!PyArg_ParseTuple(args, "OOOOOLLLOOOO:lane_waits", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &t1, &t2, &last_ts, &o[5], &o[6], &o[7], &o[8]))
        return NULL;
    Buf b[9];
    memset(b, 0, sizeof b);
    static const char *names[9] = {"kind",  "start_ts", "end_ts", "loff", "flags",
                                   "lane", "begin",    "last",   "value"};
    if (buf_get(o[0], &b[0], 0, "h", 2, names[0]) < 0)
        goto fail;
    for (int i = 1; i < 9; i++) {
        if (i == 4 ? buf_get(o[i], &b[i], 0, "Bb?", 1, names[i]) < 0
                   : buf_get(o[i], &b[i], i >= 5, "lq", 8, names[i]) < 0)
            goto fail;
    }
    Py_ssize_t n = buf_items(&b[0]), nlanes = buf_items(&b[3]) - 1, nflags = buf_items(&b[4]);
    const int64_t *loff = b[3].b.buf;
    if (buf_items(&b[1]) != n || buf_items(&b[2]) != n || nlanes < 0 || loff[0] != 0 ||
        loff[nlanes] != n) {
        PyErr_SetString(PyExc_ValueError, "lane_waits: kind, start_ts and end_ts must be as long, "
                                          "loff run from 0 to their length");
        goto fail;
    }
    for (int i = 5; i < 9; i++) {
        if (buf_items(&b[i]) < n) {
            PyErr_Format(PyExc_ValueError, "lane_waits: %s holds fewer items than the rows",
                         names[i]);
            goto fail;
        }
    }
    if (check_ascending(loff, nlanes + 1, "lane_waits", "loff") < 0 ||
        buf_check_codes(&b[0], 0, nflags, "lane_waits", "kind") < 0)
        goto fail;
    const int16_t *kind = b[0].b.buf;
    const uint8_t *flags = b[4].b.buf;
    const int64_t *start = b[1].b.buf, *end = b[2].b.buf;
    int64_t *lane = b[5].b.buf, *begin = b[6].b.buf, *last = b[7].b.buf, *value = b[8].b.buf;
    Py_ssize_t out = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < nlanes; i++) {
        Py_ssize_t lo = (Py_ssize_t)loff[i], hi = (Py_ssize_t)loff[i + 1];
        int64_t life_start = INT64_MIN, life_end = last_ts;
        int started = 0;
        for (Py_ssize_t r = lo; r < hi; r++) {
            uint8_t f = flags[kind[r]];
            if ((f & STARTS_RUN) && !started) {
                life_start = start[r];
                started = 1;
            }
            if (f & ENDS_LIFE)
                life_end = start[r];
        }
        Py_ssize_t taken = -1; /* the run's first row taken */
        for (Py_ssize_t r = lo; r < hi; r++) {
            uint8_t f = flags[kind[r]];
            if (!(f & IN_STATE))
                continue;
            if (r == lo || !(flags[kind[r - 1]] & IN_STATE))
                taken = -1; /* a run begins */
            if ((f & TAKES) && taken < 0)
                taken = r;
            int run_ends = r + 1 == hi || !(flags[kind[r + 1]] & IN_STATE);
            if (!run_ends || taken < 0 || r + 1 == hi)
                continue;
            int64_t s = start[taken] > life_start ? start[taken] : life_start;
            int64_t e = end[r] < life_end ? end[r] : life_end;
            s = s > t1 ? s : t1;
            e = e < t2 ? e : t2;
            if (e > s) {
                lane[out] = i;
                begin[out] = taken;
                last[out] = r;
                value[out++] = e - s;
            }
        }
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 9);
    return PyLong_FromSsize_t(out);
fail:
    buf_release(b, 9);
    return NULL;
}

static PyMethodDef methods[] = {
    {"lane_waits", lane_waits, METH_VARARGS,
     "lane_waits(kind, start_ts, end_ts, loff, flags, t1, t2, last_ts, lane, begin, last, "
     "value) -> waits: a waiting profile's waits of whole goroutine lanes, clipped."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_waits",
    "A waiting profile's waits in one pass over whole goroutines' rows.", -1, methods,
};

PyMODINIT_FUNC PyInit__waits(void)
{
    return PyModule_Create(&module);
}
