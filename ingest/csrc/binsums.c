/* The overview's per-bin sums of interval rows in one pass
 * (ingest/views/overview_series.py's state_ns).
 *
 * bin_sums(start, end, code, edges, count, total)
 *     For each row i with code[i] >= 0, its interval [start[i], end[i])
 *     clipped to [edges[0], edges[-1]] (rows left empty are skipped) adds to
 *     its code's bins: at the bin j its start falls in (edges[j] <= s <
 *     edges[j+1]; the last edge: a dummy last bin) count[code * nb + j] += 1
 *     and total[...] += edges[min(j + 1, nb - 1)] - s; at its end's bin the
 *     same subtracted. nb = len(edges); count and total (int64, at least
 *     (max code + 1) * nb items) are added to. The caller turns the counts'
 *     running sums and the totals into exact ns per bin.
 *
 * series_codes(...): each row's series code, the waits' categories carried
 *     along each lane (below).
 *
 * Why: the numpy form (a searchsorted, a bincount of counts and one of
 * weights per end, the clips and masks) took ~1 s of the 200 MB benchmark
 * trace's ingest, its temporaries each a column of the trace's length; here
 * it is one pass over the mapped columns, without the GIL.
 */
#include "buffers.h"
#include <stdint.h>

/* The bin of p (edges[0] <= p <= edges[nb-1]): the last j with edges[j] <= p.
 * The overview's edges are about even, so the guess from p's place in their
 * span is nearly always right or next to it (a binary search's unpredictable
 * branches made the pass 3x slower); uneven edges fall back to the search. */
static inline Py_ssize_t bin_of(const int64_t *edges, Py_ssize_t nb, int64_t p, double scale)
{
    Py_ssize_t j = (Py_ssize_t)((double)(p - edges[0]) * scale);
    j = j < 0 ? 0 : j > nb - 1 ? nb - 1 : j;
    for (int step = 0; step < 2; step++) {
        if (edges[j] > p)
            j--;
        else if (j + 1 < nb && edges[j + 1] <= p)
            j++;
        else
            return j;
    }
    if (edges[j] <= p && (j + 1 == nb || edges[j + 1] > p))
        return j;
    Py_ssize_t lo = 0, hi = nb; /* edges[lo] <= p < edges[hi] (hi = nb: none) */
    while (hi - lo > 1) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (edges[mid] <= p)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static PyObject *bin_sums(PyObject *self, PyObject *args)
{
    PyObject *o[6];
    if (!PyArg_ParseTuple(args, "OOOOOO:bin_sums", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5]))
        return NULL;
    static const char *names[6] = {"start", "end", "code", "edges", "count", "total"};
    static const char *formats[6] = {"lq", "lq", "b", "lq", "lq", "lq"};
    static const Py_ssize_t sizes[6] = {8, 8, 1, 8, 8, 8};
    Buf b[6];
    if (buf_get_all(o, b, 6, 4, names, formats, sizes) < 0)
        return NULL;
    Py_ssize_t n = buf_same_items(b, 3, names, "bin_sums");
    if (n < 0)
        return NULL;
    Py_ssize_t nb = buf_items(&b[3]), cells = buf_items(&b[4]);
    if (nb < 2 || buf_items(&b[5]) != cells) {
        PyErr_SetString(PyExc_ValueError,
                        "bin_sums: edges need 2 or more items, count and total as many");
        buf_release(b, 6);
        return NULL;
    }
    const int64_t *start = b[0].b.buf, *end = b[1].b.buf, *edges = b[3].b.buf;
    const int8_t *code = b[2].b.buf;
    int64_t *count = b[4].b.buf, *total = b[5].b.buf;
    int64_t first = edges[0], last = edges[nb - 1];
    if (check_ascending(edges, nb, "bin_sums", "edges") < 0) {
        buf_release(b, 6);
        return NULL;
    }
    double scale = last > first ? (double)(nb - 1) / (double)(last - first) : 0.0;
    int8_t top = -1;
    for (Py_ssize_t i = 0; i < n; i++)
        top = code[i] > top ? code[i] : top;
    if ((Py_ssize_t)(top + 1) * nb > cells) {
        PyErr_Format(PyExc_ValueError, "bin_sums: code %d needs %zd items of count and total, "
                     "got %zd", (int)top, (Py_ssize_t)(top + 1) * nb, cells);
        buf_release(b, 6);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        if (code[i] < 0)
            continue;
        int64_t s = start[i] < first ? first : start[i] > last ? last : start[i];
        int64_t e = end[i] < first ? first : end[i] > last ? last : end[i];
        if (e <= s)
            continue;
        Py_ssize_t row = (Py_ssize_t)code[i] * nb;
        Py_ssize_t js = bin_of(edges, nb, s, scale),
                   je = bin_of(edges, nb, e, scale);
        /* Sums wrap like numpy's int64 arithmetic (done unsigned). */
        count[row + js] += 1;
        total[row + js] = (int64_t)((uint64_t)total[row + js] +
                                    (uint64_t)(edges[js + 1 < nb ? js + 1 : nb - 1] - s));
        count[row + je] -= 1;
        total[row + je] = (int64_t)((uint64_t)total[row + je] -
                                    (uint64_t)(edges[je + 1 < nb ? je + 1 : nb - 1] - e));
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 6);
    Py_RETURN_NONE;
}

/* series_codes(kind, rid, m, state, skip, tables, waiting, wait0, carry, code) -> carry
 *     The overview series code (int8) of each row from skip on; row skip - 1
 *     (skip 0 or 1) is the row before, read for its lane only. tables holds
 *     four int8 arrays of ntables items, concatenated: by state code the
 *     series code (-1: in no series) and what a row on no thread (m == -1)
 *     adds to it; by kind code the wait category (-1: none) and whether the
 *     row inherits the category of the row before it in its lane (a Waiting
 *     -> Waiting row without a reason). A Waiting row's code is wait0 plus its
 *     category. carry: the category of the row before row skip (-1: none);
 *     returns that of the last row, for the next part. */
static PyObject *series_codes(PyObject *self, PyObject *args)
{
    PyObject *o[6];
    Py_ssize_t skip;
    int waiting, wait0, carry;
    if (!PyArg_ParseTuple(args, "OOOOnOiiiO:series_codes", &o[0], &o[1], &o[2], &o[3], &skip,
                          &o[4], &waiting, &wait0, &carry, &o[5]))
        return NULL;
    static const char *names[6] = {"kind", "rid", "m", "state", "tables", "code"};
    Buf b[6];
    memset(b, 0, sizeof b);
    if (buf_get(o[0], &b[0], 0, "h", 2, names[0]) < 0 ||
        buf_get_widths(o[1], &b[1], 0, "ilq", 4 | 8, names[1]) < 0 ||
        buf_get_widths(o[2], &b[2], 0, "hilq", 2 | 4 | 8, names[2]) < 0 ||
        buf_get(o[3], &b[3], 0, "b", 1, names[3]) < 0 ||
        buf_get(o[4], &b[4], 0, "b", 1, names[4]) < 0 ||
        buf_get(o[5], &b[5], 1, "b", 1, names[5]) < 0)
        goto fail;
    Py_ssize_t n = buf_items(&b[0]), ntables = buf_items(&b[4]) / 4;
    if (buf_items(&b[1]) != n || buf_items(&b[2]) != n || buf_items(&b[3]) != n ||
        (skip != 0 && skip != 1) || n < skip || buf_items(&b[4]) != 4 * ntables ||
        buf_items(&b[5]) < n - skip) {
        PyErr_SetString(PyExc_ValueError, "series_codes: kind, rid, m and state as long, skip 0 "
                                          "or 1, four tables alike, code no shorter than the rows");
        goto fail;
    }
    const int16_t *kind = b[0].b.buf;
    const int8_t *state = b[3].b.buf, *tables = b[4].b.buf;
    const int8_t *lut = tables, *no_m = tables + ntables, *cat_of = tables + 2 * ntables,
                 *inherit = tables + 3 * ntables;
    if (buf_check_codes(&b[0], skip, ntables, "series_codes", "kind") < 0 ||
        buf_check_codes(&b[3], skip, ntables, "series_codes", "state") < 0)
        goto fail;
    int8_t *code = b[5].b.buf;
    int filled = carry;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = skip; i < n; i++) {
        int k = kind[i], st = state[i];
        int first = i == 0 || buf_int(&b[1], i) != buf_int(&b[1], i - 1);
        int cat = inherit[k] && !first ? filled : cat_of[k];
        filled = cat;
        int c = lut[st];
        if (c >= 0 && buf_int(&b[2], i) == -1)
            c += no_m[st];
        if (st == waiting)
            c = wait0 + cat;
        code[i - skip] = (int8_t)c;
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 6);
    return PyLong_FromLong(filled);
fail:
    buf_release(b, 6);
    return NULL;
}

static PyMethodDef methods[] = {
    {"bin_sums", bin_sums, METH_VARARGS,
     "bin_sums(start, end, code, edges, count, total): each coded row's clipped interval "
     "added to its bins' counts and offset totals (its end subtracted)."},
    {"series_codes", series_codes, METH_VARARGS,
     "series_codes(kind, rid, m, state, skip, tables, waiting, wait0, carry, code) -> carry: "
     "each row's overview series code, Waiting rows by their wait category."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_binsums",
    "The overview's per-bin sums of interval rows in one pass.", -1, methods,
};

PyMODINIT_FUNC PyInit__binsums(void)
{
    return PyModule_Create(&module);
}
