/* ingest.derive._lanesets: the rows of the timeline's P lane set
 * (ingest/derive/lanesets.py p_lanes) in one pass over the frames, in (proc,
 * start) order, instead of numpy's concatenations, sort and gathers.
 *
 * p_lane_rows(run_p, run_start, run_end, rid, start, end, state, first_proc_row, codes)
 *     -> None, or (ids, lo, hi, start, end, cat, ref) as bytearrays (int64
 *     but cat, int8): lane by lane (ids: the procs, ascending; lane k's rows
 *     lo[k] .. hi[k]-1), each proc's runs (SRC_RUN, from the proc runs,
 *     ordered by (p, start)) merged with its Idle intervals (SRC_INTERVAL,
 *     the proc rows from first_proc_row on, ordered by (proc, start)); ref is
 *     row * ref_sources + source. None when an input is not in that order or
 *     the ids spread over more than 2**20: the caller sorts instead.
 *     codes = bytes(idle, cat_running, cat_idle, ref_sources, src_run,
 *     src_interval).
 *
 * m_lane_rows(state, m, seq, goroutine_rows, codes) -> None, or (ids, lo, hi,
 *     rows): the M lane set's rows (goroutine rows below goroutine_rows whose
 *     state is Running or Syscall and whose m is known) grouped by thread
 *     (ids ascending; lane k's rows lo[k] .. hi[k]-1) and in Go's order (their
 *     seq) within each; rows as int32 (int64 for lo, hi and ids). Placed by
 *     their seq, then counted into their thread's place: no sort. None when
 *     two rows share a seq, a seq or thread id is out of reach (negative seq,
 *     threads spread over more than 2**20) or the rows need more than int32.
 *     codes = bytes(running, syscall).
 * m_lane_columns(rows, lo, hi, state, start, end, codes) -> None, or (start,
 *     end, cat, ref): the rows' columns (ref = row * ref_sources +
 *     src_interval, int32 or int64 as codes say); None when a lane's starts do
 *     not ascend (the caller sorts them by time instead). codes =
 *     bytes(syscall, cat_syscall, cat_running, ref_sources, src_interval,
 *     ref_bytes).
 *
 * block_index(start, end, cat, lo, block) -> None, or (block_max, cats, cum)
 *     as bytearrays of int64: build_index's LaneSetIndex in one pass (the
 *     largest duration of each block of rows, the categories present, and
 *     per block boundary the ns of each category before it); None when two
 *     consecutive rows of a lane (lanes begin at lo) overlap.
 *
 * The M lane set's two calls read different columns, so that the caller lets
 * each group's mapped pages go before the next is read: one pass over
 * everything held ~130 MB of mapped frames at once and raised the load's
 * peak memory by ~10 MiB.
 */
#include "buffers.h"
#include <stdint.h>
#include <stdlib.h>

#define MAX_SPAN (1 << 20)

typedef struct {
    PyObject *ids, *lo, *hi, *start, *end, *cat, *ref;
} Out;

static void out_clear(Out *o)
{
    Py_CLEAR(o->ids);
    Py_CLEAR(o->lo);
    Py_CLEAR(o->hi);
    Py_CLEAR(o->start);
    Py_CLEAR(o->end);
    Py_CLEAR(o->cat);
    Py_CLEAR(o->ref);
}

static int out_alloc(Out *o, Py_ssize_t lanes, Py_ssize_t rows)
{
    o->ids = PyByteArray_FromStringAndSize(NULL, lanes * 8);
    o->lo = PyByteArray_FromStringAndSize(NULL, lanes * 8);
    o->hi = PyByteArray_FromStringAndSize(NULL, lanes * 8);
    o->start = PyByteArray_FromStringAndSize(NULL, rows * 8);
    o->end = PyByteArray_FromStringAndSize(NULL, rows * 8);
    o->cat = PyByteArray_FromStringAndSize(NULL, rows);
    o->ref = PyByteArray_FromStringAndSize(NULL, rows * 8);
    if (!o->ids || !o->lo || !o->hi || !o->start || !o->end || !o->cat || !o->ref) {
        out_clear(o);
        return -1;
    }
    return 0;
}

static PyObject *out_tuple(Out *o)
{
    PyObject *t = PyTuple_Pack(7, o->ids, o->lo, o->hi, o->start, o->end, o->cat, o->ref);
    out_clear(o);
    return t;
}

#define I64(o) ((int64_t *)PyByteArray_AS_STRING(o))

/* An integer item of a 4- or 8-byte buffer. */
static inline int64_t item(const Buf *b, Py_ssize_t i)
{
    return b->b.itemsize == 4 ? (int64_t)((const int32_t *)b->b.buf)[i]
                              : ((const int64_t *)b->b.buf)[i];
}

/* Lane codes: present ids ascending, and each id's lane (-1: none). */
static Py_ssize_t lanes_of(const Py_ssize_t *count, Py_ssize_t span, Py_ssize_t *lane)
{
    Py_ssize_t lanes = 0;
    for (Py_ssize_t c = 0; c < span; c++)
        lane[c] = count[c] ? lanes++ : -1;
    return lanes;
}

/* ------------------------------------------------------------ P lanes */

static PyObject *p_lane_rows(PyObject *self, PyObject *args)
{
    PyObject *o[7];
    Py_ssize_t first_proc;
    const char *codes;
    Py_ssize_t ncodes;
    if (!PyArg_ParseTuple(args, "OOOOOOOny#:p_lane_rows", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6], &first_proc, &codes, &ncodes))
        return NULL;
    if (ncodes != 6) {
        PyErr_SetString(PyExc_ValueError, "p_lane_rows: 6 codes expected");
        return NULL;
    }
    static const char *names[7] = {"run_p", "run_start", "run_end", "rid", "start", "end",
                                   "state"};
    static const char *formats[7] = {"ilq", "lq", "lq", "ilq", "lq", "lq", "b"};
    /* Procs in 4 or 8 bytes; times 8; states 1. */
    static const Py_ssize_t small[7] = {4, 8, 8, 4, 8, 8, 1};
    static const Py_ssize_t large[7] = {8, 8, 8, 8, 8, 8, 1};
    Buf b[7];
    if (buf_get_all_sizes(o, b, 7, names, formats, small, large) < 0)
        return NULL;
    Py_ssize_t nruns = buf_same_items(b, 3, names, "p_lane_rows");
    if (nruns < 0) {
        buf_release(b, 7);
        return NULL;
    }
    Py_ssize_t n = buf_same_items(b + 3, 4, names + 3, "p_lane_rows");
    if (n < 0) {
        buf_release(b, 7);
        return NULL;
    }
    if (first_proc < 0 || first_proc > n) {
        buf_release(b, 7);
        PyErr_SetString(PyExc_ValueError, "p_lane_rows: first_proc_row out of range");
        return NULL;
    }
    const int64_t *rstart = b[1].b.buf, *rend = b[2].b.buf;
    const int64_t *start = b[4].b.buf, *end = b[5].b.buf;
    const int8_t *state = b[6].b.buf;
    int8_t idle = codes[0], cat_running = codes[1], cat_idle = codes[2];
    int64_t ref_sources = codes[3], src_run = codes[4], src_interval = codes[5];
    PyObject *result = NULL;
    Py_ssize_t *count = NULL, *lane = NULL;
    Out out = {0};
    int ok = 1;
    int64_t pmin = INT64_MAX, pmax = INT64_MIN;
    Py_ssize_t rows = 0, lanes = 0, span = 0;

    Py_BEGIN_ALLOW_THREADS
    /* Both inputs ordered by (proc, start), and the ids' spread. */
    for (Py_ssize_t r = 0; ok && r < nruns; r++) {
        int64_t p = item(&b[0], r);
        if (r && (p < item(&b[0], r - 1) || (p == item(&b[0], r - 1) && rstart[r] < rstart[r - 1])))
            ok = 0;
        pmin = p < pmin ? p : pmin;
        pmax = p > pmax ? p : pmax;
        rows++;
    }
    int64_t prev_p = INT64_MIN, prev_start = INT64_MIN;
    for (Py_ssize_t i = first_proc; ok && i < n; i++) {
        if (state[i] != idle)
            continue;
        int64_t p = item(&b[3], i);
        if (p < prev_p || (p == prev_p && start[i] < prev_start))
            ok = 0;
        prev_p = p;
        prev_start = start[i];
        pmin = p < pmin ? p : pmin;
        pmax = p > pmax ? p : pmax;
        rows++;
    }
    span = rows ? (Py_ssize_t)(pmax - pmin + 1) : 0;
    if (ok && (span < 0 || span > MAX_SPAN))
        ok = 0;
    if (ok) {
        count = calloc((size_t)(span ? span : 1), sizeof *count);
        lane = calloc((size_t)(span ? span : 1), sizeof *lane);
        ok = count && lane;
    }
    for (Py_ssize_t r = 0; ok && r < nruns; r++)
        count[item(&b[0], r) - pmin]++;
    for (Py_ssize_t i = first_proc; ok && i < n; i++)
        if (state[i] == idle)
            count[item(&b[3], i) - pmin]++;
    if (ok)
        lanes = lanes_of(count, span, lane);
    Py_END_ALLOW_THREADS

    if (ok && out_alloc(&out, lanes, rows) == 0) {
        int64_t *ids = I64(out.ids), *lo = I64(out.lo), *hi = I64(out.hi);
        int64_t *ostart = I64(out.start), *oend = I64(out.end), *oref = I64(out.ref);
        int8_t *ocat = (int8_t *)PyByteArray_AS_STRING(out.cat);
        Py_BEGIN_ALLOW_THREADS
        Py_ssize_t at = 0;
        for (Py_ssize_t c = 0; c < span; c++) {
            if (lane[c] < 0)
                continue;
            ids[lane[c]] = pmin + c;
            lo[lane[c]] = at;
            at += count[c];
            hi[lane[c]] = at;
        }
        /* Merge, proc by proc (both inputs ascend by proc): a run before an
         * Idle interval starting at the same time. */
        Py_ssize_t r = 0, i = first_proc, k = 0;
        while (i < n && state[i] != idle)
            i++;
        while (r < nruns || i < n) {
            int take_run;
            if (r >= nruns) {
                take_run = 0;
            } else if (i >= n) {
                take_run = 1;
            } else {
                int64_t pr = item(&b[0], r), pi = item(&b[3], i);
                take_run = pr < pi || (pr == pi && rstart[r] <= start[i]);
            }
            if (take_run) {
                ostart[k] = rstart[r];
                oend[k] = rend[r];
                ocat[k] = cat_running;
                oref[k] = (int64_t)r * ref_sources + src_run;
                r++;
            } else {
                ostart[k] = start[i];
                oend[k] = end[i];
                ocat[k] = cat_idle;
                oref[k] = (int64_t)i * ref_sources + src_interval;
                i++;
                while (i < n && state[i] != idle)
                    i++;
            }
            k++;
        }
        Py_END_ALLOW_THREADS
        result = out_tuple(&out);
    } else if (ok) {
        ok = -1;
    }
    free(count);
    free(lane);
    buf_release(b, 7);
    if (result)
        return result;
    if (ok == -1 || PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------ M lanes */

static PyObject *m_lane_rows(PyObject *self, PyObject *args)
{
    PyObject *o[3];
    Py_ssize_t ng;
    const char *codes;
    Py_ssize_t ncodes;
    if (!PyArg_ParseTuple(args, "OOOny#:m_lane_rows", &o[0], &o[1], &o[2], &ng, &codes,
                          &ncodes))
        return NULL;
    if (ncodes != 2) {
        PyErr_SetString(PyExc_ValueError, "m_lane_rows: 2 codes expected");
        return NULL;
    }
    static const char *names[3] = {"state", "m", "seq"};
    static const char *formats[3] = {"b", "ilq", "ilq"};
    static const Py_ssize_t small[3] = {1, 4, 4};
    static const Py_ssize_t large[3] = {1, 8, 8};
    Buf b[3];
    if (buf_get_all_sizes(o, b, 3, names, formats, small, large) < 0)
        return NULL;
    Py_ssize_t n = buf_same_items(b, 3, names, "m_lane_rows");
    if (n < 0) {
        buf_release(b, 3);
        return NULL;
    }
    if (ng < 0 || ng > n) {
        buf_release(b, 3);
        PyErr_SetString(PyExc_ValueError, "m_lane_rows: goroutine_rows out of range");
        return NULL;
    }
    const int8_t *state = b[0].b.buf;
    int8_t running = codes[0], syscall = codes[1];
    PyObject *result = NULL;
    int32_t *slot = NULL;
    Py_ssize_t *count = NULL, *lane = NULL;
    Out out = {0};
    int ok = n < INT32_MAX;
    int64_t mmin = INT64_MAX, mmax = INT64_MIN, smax = -1;
    Py_ssize_t rows = 0, lanes = 0, span = 0;

    Py_BEGIN_ALLOW_THREADS
    /* The rows taken, their threads' spread and the seqs' reach. */
    for (Py_ssize_t r = 0; ok && r < ng; r++) {
        if (state[r] != running && state[r] != syscall)
            continue;
        int64_t m = item(&b[1], r);
        if (m < 0)
            continue;
        int64_t q = item(&b[2], r);
        if (q < 0 || q >= INT32_MAX)
            ok = 0;
        mmin = m < mmin ? m : mmin;
        mmax = m > mmax ? m : mmax;
        smax = q > smax ? q : smax;
        rows++;
    }
    span = rows ? (Py_ssize_t)(mmax - mmin + 1) : 0;
    if (ok && (span < 0 || span > MAX_SPAN))
        ok = 0;
    if (ok) {
        count = calloc((size_t)(span ? span : 1), sizeof *count);
        lane = calloc((size_t)(span ? span : 1), sizeof *lane);
        slot = malloc((size_t)(smax + 1 > 0 ? smax + 1 : 1) * sizeof *slot);
        ok = count && lane && slot;
    }
    if (ok) {
        memset(slot, 0xff, (size_t)(smax + 1 > 0 ? smax + 1 : 1) * sizeof *slot); /* -1 */
        for (Py_ssize_t r = 0; ok && r < ng; r++) {
            if ((state[r] != running && state[r] != syscall) || item(&b[1], r) < 0)
                continue;
            int64_t q = item(&b[2], r);
            if (slot[q] >= 0)
                ok = 0; /* a seq given twice: no single Go order */
            slot[q] = (int32_t)r;
            count[item(&b[1], r) - mmin]++;
        }
    }
    if (ok)
        lanes = lanes_of(count, span, lane);
    Py_END_ALLOW_THREADS

    PyObject *placed = NULL;
    if (ok && (out.ids = PyByteArray_FromStringAndSize(NULL, lanes * 8)) &&
        (out.lo = PyByteArray_FromStringAndSize(NULL, lanes * 8)) &&
        (out.hi = PyByteArray_FromStringAndSize(NULL, lanes * 8)) &&
        (placed = PyByteArray_FromStringAndSize(NULL, rows * 4))) {
        int64_t *ids = I64(out.ids), *lo = I64(out.lo), *hi = I64(out.hi);
        int32_t *dst = (int32_t *)PyByteArray_AS_STRING(placed);
        Py_BEGIN_ALLOW_THREADS
        Py_ssize_t at = 0;
        for (Py_ssize_t c = 0; c < span; c++) {
            if (lane[c] < 0)
                continue;
            ids[lane[c]] = mmin + c;
            lo[lane[c]] = at;
            at += count[c];
            hi[lane[c]] = at;
            count[c] = lo[lane[c]]; /* from here on: the thread's next place */
        }
        for (int64_t q = 0; q <= smax; q++) {
            int32_t r = slot[q];
            if (r >= 0)
                dst[count[item(&b[1], r) - mmin]++] = r;
        }
        Py_END_ALLOW_THREADS
        result = PyTuple_Pack(4, out.ids, out.lo, out.hi, placed);
    } else if (ok) {
        ok = -1;
    }
    Py_XDECREF(placed);
    out_clear(&out);
    free(slot);
    free(count);
    free(lane);
    buf_release(b, 3);
    if (result)
        return result;
    if (ok == -1 || PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *m_lane_columns(PyObject *self, PyObject *args)
{
    PyObject *o[6];
    const char *codes;
    Py_ssize_t ncodes;
    if (!PyArg_ParseTuple(args, "OOOOOOy#:m_lane_columns", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &codes, &ncodes))
        return NULL;
    if (ncodes != 6 || (codes[5] != 4 && codes[5] != 8)) {
        PyErr_SetString(PyExc_ValueError, "m_lane_columns: 6 codes expected");
        return NULL;
    }
    static const char *names[6] = {"rows", "lo", "hi", "state", "start", "end"};
    static const char *formats[6] = {"i", "lq", "lq", "b", "lq", "lq"};
    static const Py_ssize_t sizes[6] = {4, 8, 8, 1, 8, 8};
    Buf b[6];
    if (buf_get_all(o, b, 6, 6, names, formats, sizes) < 0)
        return NULL;
    Py_ssize_t rows = buf_items(&b[0]), lanes = buf_items(&b[1]);
    Py_ssize_t n = buf_same_items(b + 3, 3, names + 3, "m_lane_columns");
    if (n < 0 || buf_items(&b[2]) != lanes) {
        if (n >= 0)
            PyErr_SetString(PyExc_ValueError, "m_lane_columns: lo and hi differ in length");
        buf_release(b, 6);
        return NULL;
    }
    const int32_t *src = b[0].b.buf;
    const int64_t *lo = b[1].b.buf, *hi = b[2].b.buf;
    const int8_t *state = b[3].b.buf;
    const int64_t *start = b[4].b.buf, *end = b[5].b.buf;
    int8_t syscall = codes[0], cat_syscall = codes[1], cat_running = codes[2];
    int64_t ref_sources = codes[3], src_interval = codes[4];
    int wide = codes[5] == 8;
    for (Py_ssize_t k = 0; k < lanes; k++) {
        if (lo[k] < 0 || hi[k] < lo[k] || hi[k] > rows) {
            buf_release(b, 6);
            PyErr_SetString(PyExc_ValueError, "m_lane_columns: a lane outside the rows");
            return NULL;
        }
    }
    PyObject *ostart = PyByteArray_FromStringAndSize(NULL, rows * 8);
    PyObject *oend = PyByteArray_FromStringAndSize(NULL, rows * 8);
    PyObject *ocat = PyByteArray_FromStringAndSize(NULL, rows);
    PyObject *oref = PyByteArray_FromStringAndSize(NULL, rows * (wide ? 8 : 4));
    PyObject *result = NULL;
    int ok = 1, bad_row = 0;
    if (ostart && oend && ocat && oref) {
        int64_t *st = I64(ostart), *en = I64(oend);
        int8_t *cat = (int8_t *)PyByteArray_AS_STRING(ocat);
        char *ref = PyByteArray_AS_STRING(oref);
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < rows; i++) {
            if (src[i] < 0 || src[i] >= n) {
                bad_row = 1;
                break;
            }
        }
        for (Py_ssize_t k = 0; !bad_row && k < lanes; k++) {
            for (Py_ssize_t i = lo[k]; i < hi[k]; i++) {
                if (i + 16 < hi[k]) {
                    __builtin_prefetch(&start[src[i + 16]]);
                    __builtin_prefetch(&end[src[i + 16]]);
                    __builtin_prefetch(&state[src[i + 16]]);
                }
                int64_t r = src[i];
                st[i] = start[r];
                en[i] = end[r];
                cat[i] = state[r] == syscall ? cat_syscall : cat_running;
                int64_t v = r * ref_sources + src_interval;
                if (wide)
                    ((int64_t *)ref)[i] = v;
                else
                    ((int32_t *)ref)[i] = (int32_t)v;
                if (i > lo[k] && st[i] < st[i - 1])
                    ok = 0; /* not in time order: keep going, the caller sorts */
            }
        }
        Py_END_ALLOW_THREADS
        if (bad_row)
            PyErr_SetString(PyExc_ValueError, "m_lane_columns: a row outside the columns");
        else if (ok)
            result = PyTuple_Pack(4, ostart, oend, ocat, oref);
    }
    Py_XDECREF(ostart);
    Py_XDECREF(oend);
    Py_XDECREF(ocat);
    Py_XDECREF(oref);
    buf_release(b, 6);
    if (result || PyErr_Occurred())
        return result;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------ block index */

static PyObject *block_index(PyObject *self, PyObject *args)
{
    PyObject *o[4];
    Py_ssize_t block;
    if (!PyArg_ParseTuple(args, "OOOOn:block_index", &o[0], &o[1], &o[2], &o[3], &block))
        return NULL;
    if (block < 1) {
        PyErr_SetString(PyExc_ValueError, "block_index: block must be positive");
        return NULL;
    }
    static const char *names[4] = {"start", "end", "cat", "lo"};
    static const char *formats[4] = {"lq", "lq", "b", "lq"};
    static const Py_ssize_t sizes[4] = {8, 8, 1, 8};
    Buf b[4];
    if (buf_get_all(o, b, 4, 4, names, formats, sizes) < 0)
        return NULL;
    Py_ssize_t n = buf_same_items(b, 3, names, "block_index");
    if (n < 0) {
        buf_release(b, 4);
        return NULL;
    }
    const int64_t *start = b[0].b.buf, *end = b[1].b.buf, *lo = b[3].b.buf;
    const int8_t *cat = b[2].b.buf;
    Py_ssize_t lanes = buf_items(&b[3]);
    for (Py_ssize_t k = 0; k < lanes; k++) {
        if (lo[k] < 0 || lo[k] > n) {
            buf_release(b, 4);
            PyErr_SetString(PyExc_ValueError, "block_index: a lane outside the rows");
            return NULL;
        }
    }
    Py_ssize_t nblocks = (n + block - 1) / block;
    unsigned char *first = calloc((size_t)(n ? n : 1), 1); /* rows that begin a lane */
    int overlap = 0, ncats = 0, bad_cat = 0;
    int code_of[128];
    int64_t cats[128];
    PyObject *bmax = NULL, *ocats = NULL, *cum = NULL, *result = NULL;
    if (!first) {
        buf_release(b, 4);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 1; k < lanes; k++)
        if (lo[k] > 0)
            first[lo[k]] = 1;
    for (Py_ssize_t i = 0; i + 1 < n && !overlap; i++)
        if (!first[i + 1] && end[i] > start[i + 1])
            overlap = 1; /* rows of one lane overlap: no index (reduced row by row) */
    if (!overlap) {
        unsigned char seen[128] = {0};
        for (Py_ssize_t i = 0; i < n; i++) {
            if (cat[i] < 0) {
                bad_cat = 1;
                break;
            }
            seen[cat[i]] = 1;
        }
        for (int c = 0; c < 128; c++) {
            code_of[c] = seen[c] ? ncats : -1;
            if (seen[c])
                cats[ncats++] = c;
        }
    }
    Py_END_ALLOW_THREADS
    free(first);
    if (bad_cat) {
        buf_release(b, 4);
        PyErr_SetString(PyExc_ValueError, "block_index: a negative category");
        return NULL;
    }
    if (overlap) {
        buf_release(b, 4);
        Py_RETURN_NONE;
    }
    bmax = PyByteArray_FromStringAndSize(NULL, nblocks * 8);
    ocats = PyByteArray_FromStringAndSize(NULL, ncats * 8);
    cum = PyByteArray_FromStringAndSize(NULL, (nblocks + 1) * ncats * 8);
    if (bmax && ocats && cum) {
        int64_t *mx = I64(bmax), *cs = I64(cum);
        memcpy(PyByteArray_AS_STRING(ocats), cats, (size_t)ncats * 8);
        Py_BEGIN_ALLOW_THREADS
        for (int c = 0; c < ncats; c++)
            cs[c] = 0;
        for (Py_ssize_t j = 0; j < nblocks; j++) {
            int64_t *row = cs + (j + 1) * ncats, *prev = cs + j * ncats;
            for (int c = 0; c < ncats; c++)
                row[c] = prev[c];
            int64_t m = 0; /* durations are positive: build_index dropped empty rows */
            Py_ssize_t a = j * block, z = a + block < n ? a + block : n;
            for (Py_ssize_t i = a; i < z; i++) {
                int64_t d = end[i] - start[i];
                m = d > m ? d : m;
                row[code_of[cat[i]]] += d;
            }
            mx[j] = m;
        }
        Py_END_ALLOW_THREADS
        result = PyTuple_Pack(3, bmax, ocats, cum);
    }
    Py_XDECREF(bmax);
    Py_XDECREF(ocats);
    Py_XDECREF(cum);
    buf_release(b, 4);
    return result;
}

static PyMethodDef methods[] = {
    {"p_lane_rows", p_lane_rows, METH_VARARGS,
     "p_lane_rows(run_p, run_start, run_end, rid, start, end, state, first_proc_row, codes)"
     " -> lane rows or None"},
    {"m_lane_rows", m_lane_rows, METH_VARARGS,
     "m_lane_rows(state, m, seq, goroutine_rows, codes) -> (ids, lo, hi, rows) or None"},
    {"m_lane_columns", m_lane_columns, METH_VARARGS,
     "m_lane_columns(rows, lo, hi, state, start, end, codes) -> (start, end, cat, ref) or None"},
    {"block_index", block_index, METH_VARARGS,
     "block_index(start, end, cat, lo, block) -> (block_max, cats, cum) or None (rows of a "
     "lane overlap)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_lanesets",
    "The timeline's P and M lane sets' rows in C (see ingest/derive/lanesets.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__lanesets(void) { return PyModule_Create(&module); }
