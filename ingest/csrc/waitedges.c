/* The goroutine state graph's edges into and out of Waiting, split by wait
 * category, in one pass over a part of the goroutine rows
 * (ingest/views/states_frames.py's _waiting_edges; the rules are its).
 *
 * waiting_edges(kind, rid, ts, skip, tables, carry, nnames, base, waiting,
 *               other, code, dwell) -> (edges, carry)
 *     The rows are goroutine interval rows in lane order; row skip - 1 (skip
 *     is 0 or 1) is the row before the part, read only as the one before.
 *     tables is five int16 arrays by kind code, concatenated, ntables items
 *     each: from state, to state, wait category (-1: none), inherits (1: a
 *     Waiting -> Waiting row without a reason, which takes the category of
 *     the row before it in its lane) and touches (1: from or to Waiting).
 *     For each row touching Waiting, in order: its edge code (from * nnames
 *     + to, a Waiting node being base + its category, a lane's first row
 *     from Waiting coming from base + other) and its dwell (ts since the
 *     lane's row before it, -1 for a lane's first row); carry is the
 *     category of the row before the part, returned for the next part.
 *     The outputs (int16 code, int64 dwell) hold at least as many items as
 *     the rows.
 *
 * Why: numpy's form took ~0.6 s of the whole-trace state graph of the 200 MB
 * benchmark trace (built as it is ingested), in masks and gathers of the
 * rows' length; here it is one pass without the GIL.
 */
#include "buffers.h"
#include <stdint.h>

static PyObject *waiting_edges(PyObject *self, PyObject *args)
{
    PyObject *o[6];
    Py_ssize_t skip;
    int carry, nnames, base, waiting, other;
    if (!PyArg_ParseTuple(args, "OOOnOiiiiiOO:waiting_edges", &o[0], &o[1], &o[2], &skip,
                          &o[3], &carry, &nnames, &base, &waiting, &other, &o[4], &o[5]))
        return NULL;
    static const char *names[6] = {"kind", "rid", "ts", "tables", "code", "dwell"};
    static const char *formats[6] = {"h", "ilq", "lq", "h", "h", "lq"};
    static const Py_ssize_t sizes[6] = {2, 0, 8, 2, 2, 8};
    Buf b[6];
    memset(b, 0, sizeof b);
    for (int i = 0; i < 6; i++) {
        if ((i == 1 ? buf_get_widths(o[i], &b[i], 0, formats[i], 4 | 8, names[i])
                    : buf_get(o[i], &b[i], i >= 4, formats[i], sizes[i], names[i])) < 0) {
            buf_release(b, 6);
            return NULL;
        }
    }
    Py_ssize_t n = buf_items(&b[0]), ntables = buf_items(&b[3]) / 5;
    if (buf_items(&b[1]) != n || buf_items(&b[2]) != n || (skip != 0 && skip != 1) ||
        n <= skip || buf_items(&b[3]) != 5 * ntables || buf_items(&b[4]) < n ||
        buf_items(&b[5]) < n || nnames <= 0 || (Py_ssize_t)nnames * nnames > INT16_MAX) {
        PyErr_SetString(PyExc_ValueError,
                        "waiting_edges: kind, rid and ts as long and longer than skip (0 or 1), "
                        "five tables alike, outputs no shorter, codes within int16");
        buf_release(b, 6);
        return NULL;
    }
    const int16_t *kind = b[0].b.buf, *tables = b[3].b.buf;
    const int16_t *frm = tables, *to = tables + ntables, *cat_of = tables + 2 * ntables,
                  *inherit = tables + 3 * ntables, *touch = tables + 4 * ntables;
    if (buf_check_codes(&b[0], 0, ntables, "waiting_edges", "kind") < 0) {
        buf_release(b, 6);
        return NULL;
    }
    const int64_t *ts = b[2].b.buf;
    int16_t *code = b[4].b.buf;
    int64_t *dwell = b[5].b.buf;
    Py_ssize_t out = 0;
    int filled = carry; /* the category of the last row read that needed one */
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = skip; i < n; i++) {
        int k = kind[i];
        /* A row is read when it touches Waiting, when the next row leaves a
         * wait (it reads this one's category), and the part's last (its
         * category is carried to the next part). */
        int next_from_w = i + 1 < n && frm[kind[i + 1]] == waiting;
        if (!touch[k] && !next_from_w && i + 1 < n)
            continue;
        int first = i == 0 || buf_int(&b[1], i) != buf_int(&b[1], i - 1);
        int cat = inherit[k] && !first ? filled : cat_of[k];
        int prev = filled;
        filled = cat;
        if (!touch[k])
            continue;
        int src = frm[k], dst = cat >= 0 ? base + cat : to[k];
        if (src == waiting) {
            if (first)
                src = base + other;
            else if (prev >= 0)
                src = base + prev;
        }
        code[out] = (int16_t)(src * nnames + dst);
        dwell[out++] = first ? -1 : ts[i] - ts[i - 1];
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 6);
    return Py_BuildValue("ni", out, filled);
}

static PyMethodDef methods[] = {
    {"waiting_edges", waiting_edges, METH_VARARGS,
     "waiting_edges(kind, rid, ts, skip, tables, carry, nnames, base, waiting, other, code, "
     "dwell) -> (edges, carry): the edge code and dwell of each row touching Waiting."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_waitedges",
    "The state graph's Waiting edges split by category in one pass.", -1, methods,
};

PyMODINIT_FUNC PyInit__waitedges(void)
{
    return PyModule_Create(&module);
}
