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
    for (Py_ssize_t j = 1; j < nb; j++) {
        if (edges[j] < edges[j - 1]) {
            PyErr_SetString(PyExc_ValueError, "bin_sums: edges must not decrease");
            buf_release(b, 6);
            return NULL;
        }
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

static PyMethodDef methods[] = {
    {"bin_sums", bin_sums, METH_VARARGS,
     "bin_sums(start, end, code, edges, count, total): each coded row's clipped interval "
     "added to its bins' counts and offset totals (its end subtracted)."},
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
