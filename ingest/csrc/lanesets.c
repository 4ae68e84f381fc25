/* ingest.derive._lanesets: the timeline's P and M lane sets
 * (ingest/derive/proc_thread_lanes.py) as they are kept (RowLanes: lanes, each
 * row's ref and the LaneSetIndex), made as the rows come in one pass over
 * the frames, never holding the rows' times or categories: on the 1 GB
 * benchmark trace those columns were 1-1.4 GB a set, and the whole mapped
 * columns read for them as much again.
 *
 * Each pass takes `release` (a callable, or None) and calls it every `stride`
 * rows: the caller hands back the pages of the memory-mapped columns read so
 * far (lane_index.h), so that no more than a stride's pages stay counted in
 * the process.
 *
 * p_lane_refs(run_row, run_p, run_start, run_end, rid, start, end, state,
 *     first_proc_row, codes, out, block, release, stride)
 *     -> None, or (ids, lo, hi, kept, index): each proc's runs (SRC_RUN,
 *     ordered by (p, start)) merged with its Idle intervals (SRC_INTERVAL,
 *     the proc rows from first_proc_row on, ordered by (proc, start)), a run
 *     before an Idle interval starting at the same time; procs ascending
 *     (ids; lane k's kept rows lo[k] .. hi[k]-1, int64). A run's p, start
 *     and end are run_p/run_start/run_end at run_row[run] (intervals
 *     columns), or at the run itself when run_row is None. The kept rows'
 *     refs (row * ref_sources + source) go into out[0:kept] (int32 or
 *     int64); index is block_index's (block_max, cats, cum) of the kept rows,
 *     or None. None when an input is not in that order: the caller sorts.
 *     codes = bytes(idle, cat_running, cat_idle, ref_sources, src_run,
 *     src_interval).
 *
 * m_lane_rows(state, m, seq, goroutine_rows, codes, window, release, stride)
 *     -> None, or (ids, lo, hi, rows): the M lane set's rows (goroutine rows
 *     below goroutine_rows whose state is Running or Syscall and whose m is
 *     known) grouped by thread (ids ascending; lane k's rows lo[k] .. hi[k]-1)
 *     and in Go's order (their seq) within each; rows as int32 (int64 for lo,
 *     hi and ids). Placed by their seq, `window` seqs a pass (a slot of 4
 *     bytes each), then counted into their thread's place: no sort. None when
 *     two rows share a seq, a seq or thread id is out of reach (negative seq,
 *     threads spread over more than 2**20) or the rows need more than int32.
 *     codes = bytes(running, syscall).
 * m_lane_refs(rows, lo, hi, state, start, end, codes, out, block, release,
 *     stride) -> None, or (lo, hi, kept, index): those rows kept (lasting
 *     some time), lanes as given, their refs (row * ref_sources +
 *     src_interval) into out[0:kept] (out may be rows itself: a ref is
 *     written where its row was read or before), index as p_lane_refs'.
 *     None when a lane's starts do not ascend (the caller sorts them by time
 *     instead). codes = bytes(syscall, cat_syscall, cat_running, ref_sources,
 *     src_interval).
 *
 * block_index(start, end, cat, lo, block) -> None, or (block_max, cats, cum)
 *     as bytearrays of int64: build_index's LaneSetIndex in one pass (the
 *     largest duration of each block of rows, the categories present, and
 *     per block boundary the ns of each category before it); None when two
 *     consecutive rows of a lane (lanes begin at lo) overlap.
 */
#include "buffers.h"
#include "lane_index.h"
#include <stdint.h>
#include <stdlib.h>

#define MAX_SPAN (1 << 20)

/* An integer item of a 2-, 4- or 8-byte buffer. */
static inline int64_t item(const Buf *b, Py_ssize_t i)
{
    return b->b.itemsize == 4   ? (int64_t)((const int32_t *)b->b.buf)[i]
           : b->b.itemsize == 2 ? (int64_t)((const int16_t *)b->b.buf)[i]
                                : ((const int64_t *)b->b.buf)[i];
}

/* The out buffer of the refs: writable, int32 or int64, room for `rows`. */
static int get_out(PyObject *o, Buf *b, Py_ssize_t rows, const char *fn)
{
    if (buf_get_sizes(o, b, 1, "ilq", 4, 8, "out") < 0)
        return -1;
    if (buf_items(b) < rows) {
        PyErr_Format(PyExc_ValueError, "%s: out holds %zd items, %zd needed", fn,
                     buf_items(b), rows);
        buf_release(b, 1);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ P lanes */

typedef struct {
    int64_t p, start, end;
} Run;

static PyObject *p_lane_refs(PyObject *self, PyObject *args)
{
    PyObject *o[8], *oout, *ofn;
    Py_ssize_t first_proc, block, stride;
    const char *codes;
    Py_ssize_t ncodes;
    if (!PyArg_ParseTuple(args, "OOOOOOOOny#OnOn:p_lane_refs", &o[0], &o[1], &o[2], &o[3],
                          &o[4], &o[5], &o[6], &o[7], &first_proc, &codes, &ncodes, &oout,
                          &block, &ofn, &stride))
        return NULL;
    if (ncodes != 6 || block < 1) {
        PyErr_SetString(PyExc_ValueError, "p_lane_refs: 6 codes and a positive block expected");
        return NULL;
    }
    Release rel;
    if (release_init(&rel, ofn, stride) < 0)
        return NULL;
    int by_row = o[0] != Py_None;
    static const char *names[8] = {"run_row", "run_p", "run_start", "run_end", "rid", "start",
                                   "end", "state"};
    static const char *formats[8] = {"ilq", "hilq", "lq", "lq", "ilq", "lq", "lq", "b"};
    static const Py_ssize_t small[8] = {4, 2 | 4, 8, 8, 4, 8, 8, 1};
    static const Py_ssize_t large[8] = {8, 8, 8, 8, 8, 8, 8, 1};
    Buf b[9];
    if (!by_row)
        o[0] = o[1]; /* a stand-in, not read */
    if (buf_get_all_sizes(o, b, 8, names, formats, small, large) < 0)
        return NULL;
    b[8].held = 0;
    Py_ssize_t nsrc = buf_same_items(b + 1, 3, names + 1, "p_lane_refs");
    Py_ssize_t n = nsrc < 0 ? -1 : buf_same_items(b + 4, 4, names + 4, "p_lane_refs");
    if (nsrc < 0 || n < 0) {
        buf_release(b, 8);
        return NULL;
    }
    Py_ssize_t nruns = by_row ? buf_items(&b[0]) : nsrc;
    if (first_proc < 0 || first_proc > n) {
        buf_release(b, 8);
        PyErr_SetString(PyExc_ValueError, "p_lane_refs: first_proc_row out of range");
        return NULL;
    }
    const int64_t *rstart = b[2].b.buf, *rend = b[3].b.buf;
    const int64_t *start = b[5].b.buf, *end = b[6].b.buf;
    const int8_t *state = b[7].b.buf;
    int8_t idle = codes[0], cat_running = codes[1], cat_idle = codes[2];
    int64_t ref_sources = codes[3], src_run = codes[4], src_interval = codes[5];
    Py_ssize_t nidle = 0;
    for (Py_ssize_t i = first_proc; i < n; i++)
        nidle += state[i] == idle;
    if (get_out(oout, &b[8], nruns + nidle, "p_lane_refs") < 0) {
        buf_release(b, 8);
        return NULL;
    }
    Acc acc;
    Lanes lanes = {0};
    if (acc_init(&acc, nruns + nidle, block, cat_running, cat_idle, b[8].b.buf,
                 b[8].b.itemsize == 8) < 0) {
        buf_release(b, 9);
        return NULL;
    }
    int ok = 1, bad_row = 0, failed = 0;
    release_unlock(&rel);
    Py_ssize_t r = 0, i = first_proc;
    Run run = {0}, prev_run = {INT64_MIN, INT64_MIN, 0};
    int64_t prev_ip = INT64_MIN, prev_is = INT64_MIN;
    while (i < n && state[i] != idle)
        i++;
    /* The run at r (its interval's row when by_row), checked against the one before. */
#define LOAD_RUN()                                                                         \
    do {                                                                                   \
        Py_ssize_t at = r;                                                                 \
        if (by_row) {                                                                      \
            at = (Py_ssize_t)item(&b[0], r);                                               \
            if (at < 0 || at >= nsrc) {                                                    \
                bad_row = 1;                                                               \
                break;                                                                     \
            }                                                                              \
        }                                                                                  \
        run.p = item(&b[1], at);                                                           \
        run.start = rstart[at];                                                            \
        run.end = rend[at];                                                                \
        if (run.p < prev_run.p || (run.p == prev_run.p && run.start < prev_run.start))     \
            ok = 0;                                                                        \
        prev_run = run;                                                                    \
    } while (0)
    if (r < nruns)
        LOAD_RUN();
    while (ok && !bad_row && !failed && (r < nruns || i < n)) {
        int take_run;
        if (r >= nruns) {
            take_run = 0;
        } else if (i >= n) {
            take_run = 1;
        } else {
            int64_t pi = item(&b[4], i);
            take_run = run.p < pi || (run.p == pi && run.start <= start[i]);
        }
        int64_t p, s, e, v;
        int8_t cat;
        if (take_run) {
            p = run.p, s = run.start, e = run.end, cat = cat_running;
            v = (int64_t)r * ref_sources + src_run;
            if (++r < nruns)
                LOAD_RUN();
        } else {
            p = item(&b[4], i), s = start[i], e = end[i], cat = cat_idle;
            if (p < prev_ip || (p == prev_ip && s < prev_is)) {
                ok = 0;
                break;
            }
            prev_ip = p;
            prev_is = s;
            v = (int64_t)i * ref_sources + src_interval;
            i++;
            while (i < n && state[i] != idle)
                i++;
        }
        if (!lanes.n || lanes.ids[lanes.n - 1] != p) {
            if (lanes_push(&lanes, p, acc.kept) < 0) {
                failed = 2;
                break;
            }
        }
        acc_add(&acc, lanes.n - 1, s, e, cat, v);
        lanes.hi[lanes.n - 1] = acc.kept;
        if (release_tick(&rel) < 0)
            failed = 1;
    }
#undef LOAD_RUN
    release_lock(&rel);
    PyObject *result = NULL;
    if (failed == 2)
        PyErr_NoMemory();
    else if (bad_row)
        PyErr_SetString(PyExc_ValueError, "p_lane_refs: a run's row outside the columns");
    if (!PyErr_Occurred() && ok) {
        PyObject *ids = bytes_of(lanes.ids, lanes.n), *lo = bytes_of(lanes.lo, lanes.n);
        PyObject *hi = bytes_of(lanes.hi, lanes.n), *index = ids && lo && hi ? acc_index(&acc)
                                                                             : NULL;
        if (index)
            result = Py_BuildValue("(OOOnO)", ids, lo, hi, acc.kept, index);
        Py_XDECREF(ids);
        Py_XDECREF(lo);
        Py_XDECREF(hi);
        Py_XDECREF(index);
    }
    acc_clear(&acc);
    lanes_free(&lanes);
    buf_release(b, 9);
    if (result || PyErr_Occurred())
        return result;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------ M lanes */

static PyObject *m_lane_rows(PyObject *self, PyObject *args)
{
    PyObject *o[3], *ofn;
    Py_ssize_t ng, window, stride;
    const char *codes;
    Py_ssize_t ncodes;
    if (!PyArg_ParseTuple(args, "OOOny#nOn:m_lane_rows", &o[0], &o[1], &o[2], &ng, &codes,
                          &ncodes, &window, &ofn, &stride))
        return NULL;
    if (ncodes != 2 || window < 1) {
        PyErr_SetString(PyExc_ValueError, "m_lane_rows: 2 codes and a positive window expected");
        return NULL;
    }
    Release rel;
    if (release_init(&rel, ofn, stride) < 0)
        return NULL;
    static const char *names[3] = {"state", "m", "seq"};
    static const char *formats[3] = {"b", "hilq", "ilq"};
    static const Py_ssize_t small[3] = {1, 2 | 4, 4};
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
    PyObject *result = NULL, *placed = NULL, *oids = NULL, *olo = NULL, *ohi = NULL;
    int32_t *slot = NULL;
    Py_ssize_t *count = NULL, *lane = NULL;
    int ok = n < INT32_MAX, failed = 0;
    int64_t mmin = INT64_MAX, mmax = INT64_MIN, smax = -1, m0 = 0;
    Py_ssize_t rows = 0, lanes = 0, span = 0;
    /* Counted around the first thread id seen: ids further than MAX_SPAN from it
     * spread over more than MAX_SPAN anyway (the pages never touched cost nothing). */
    Py_ssize_t *around = calloc(2 * (size_t)MAX_SPAN + 1, sizeof *around);
    if (!around) {
        buf_release(b, 3);
        return PyErr_NoMemory();
    }

    release_unlock(&rel);
    /* The rows taken, their threads' spread and count, and the seqs' reach. */
    for (Py_ssize_t r = 0; ok && !failed && r < ng; r++) {
        if (release_tick(&rel) < 0)
            failed = 1;
        if (state[r] != running && state[r] != syscall)
            continue;
        int64_t m = item(&b[1], r);
        if (m < 0)
            continue;
        int64_t q = item(&b[2], r);
        if (!rows)
            m0 = m;
        if (q < 0 || q >= INT32_MAX || m - m0 > MAX_SPAN || m0 - m > MAX_SPAN) {
            ok = 0;
            break;
        }
        around[m - m0 + MAX_SPAN]++;
        mmin = m < mmin ? m : mmin;
        mmax = m > mmax ? m : mmax;
        smax = q > smax ? q : smax;
        rows++;
    }
    span = rows ? (Py_ssize_t)(mmax - mmin + 1) : 0;
    if (ok && (span < 0 || span > MAX_SPAN))
        ok = 0;
    Py_ssize_t win = smax + 1 < window ? smax + 1 : window;
    if (ok && !failed) {
        lane = calloc((size_t)(span ? span : 1), sizeof *lane);
        slot = malloc((size_t)(win > 0 ? win : 1) * sizeof *slot);
        count = rows ? around + (mmin - m0 + MAX_SPAN) : around; /* count[m - mmin] */
        ok = lane && slot;
        if (!ok)
            failed = 2;
    }
    if (ok && !failed) {
        for (Py_ssize_t c = 0; c < span; c++)
            lane[c] = count[c] ? lanes++ : -1;
    }
    release_lock(&rel);

    if (ok && !failed && (oids = PyByteArray_FromStringAndSize(NULL, lanes * 8)) &&
        (olo = PyByteArray_FromStringAndSize(NULL, lanes * 8)) &&
        (ohi = PyByteArray_FromStringAndSize(NULL, lanes * 8)) &&
        (placed = PyByteArray_FromStringAndSize(NULL, rows * 4))) {
        int64_t *ids = I64(oids), *lo = I64(olo), *hi = I64(ohi);
        int32_t *dst = (int32_t *)PyByteArray_AS_STRING(placed);
        release_unlock(&rel);
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
        /* A window of seqs at a time: each row put in its seq's slot, then the
         * slots read in seq order into their thread's places. */
        for (int64_t s0 = 0; ok && !failed && s0 <= smax; s0 += win) {
            int64_t s1 = s0 + win;
            memset(slot, 0xff, (size_t)win * sizeof *slot); /* -1 */
            for (Py_ssize_t r = 0; ok && !failed && r < ng; r++) {
                if (release_tick(&rel) < 0)
                    failed = 1;
                if ((state[r] != running && state[r] != syscall) || item(&b[1], r) < 0)
                    continue;
                int64_t q = item(&b[2], r);
                if (q < s0 || q >= s1)
                    continue;
                if (slot[q - s0] >= 0)
                    ok = 0; /* a seq given twice: no single Go order */
                slot[q - s0] = (int32_t)r;
            }
            for (int64_t q = 0; ok && !failed && q < win && s0 + q <= smax; q++) {
                int32_t r = slot[q];
                if (r < 0)
                    continue;
                dst[count[item(&b[1], r) - mmin]++] = r;
                if (release_tick(&rel) < 0)
                    failed = 1;
            }
        }
        release_lock(&rel);
        if (ok && !failed)
            result = PyTuple_Pack(4, oids, olo, ohi, placed);
    } else if (failed == 2) {
        PyErr_NoMemory();
    }
    Py_XDECREF(placed);
    Py_XDECREF(oids);
    Py_XDECREF(olo);
    Py_XDECREF(ohi);
    free(slot);
    free(around);
    free(lane);
    buf_release(b, 3);
    if (result || PyErr_Occurred())
        return result;
    Py_RETURN_NONE;
}

static PyObject *m_lane_refs(PyObject *self, PyObject *args)
{
    PyObject *o[6], *oout, *ofn;
    Py_ssize_t block, stride;
    const char *codes;
    Py_ssize_t ncodes;
    if (!PyArg_ParseTuple(args, "OOOOOOy#OnOn:m_lane_refs", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &codes, &ncodes, &oout, &block, &ofn, &stride))
        return NULL;
    if (ncodes != 5 || block < 1) {
        PyErr_SetString(PyExc_ValueError, "m_lane_refs: 5 codes and a positive block expected");
        return NULL;
    }
    Release rel;
    if (release_init(&rel, ofn, stride) < 0)
        return NULL;
    static const char *names[6] = {"rows", "lo", "hi", "state", "start", "end"};
    static const char *formats[6] = {"i", "lq", "lq", "b", "lq", "lq"};
    static const Py_ssize_t sizes[6] = {4, 8, 8, 1, 8, 8};
    Buf b[7];
    if (buf_get_all(o, b, 6, 6, names, formats, sizes) < 0)
        return NULL;
    b[6].held = 0;
    Py_ssize_t rows = buf_items(&b[0]), nl = buf_items(&b[1]);
    Py_ssize_t n = buf_same_items(b + 3, 3, names + 3, "m_lane_refs");
    if (n < 0 || buf_items(&b[2]) != nl) {
        if (n >= 0)
            PyErr_SetString(PyExc_ValueError, "m_lane_refs: lo and hi differ in length");
        buf_release(b, 6);
        return NULL;
    }
    const int32_t *src = b[0].b.buf;
    const int64_t *lo = b[1].b.buf, *hi = b[2].b.buf;
    const int8_t *state = b[3].b.buf;
    const int64_t *start = b[4].b.buf, *end = b[5].b.buf;
    int8_t syscall = codes[0], cat_syscall = codes[1], cat_running = codes[2];
    int64_t ref_sources = codes[3], src_interval = codes[4];
    for (Py_ssize_t k = 0; k < nl; k++) {
        if (lo[k] < 0 || hi[k] < lo[k] || hi[k] > rows || (k && lo[k] < hi[k - 1])) {
            buf_release(b, 6);
            PyErr_SetString(PyExc_ValueError, "m_lane_refs: a lane outside the rows");
            return NULL;
        }
    }
    if (get_out(oout, &b[6], rows, "m_lane_refs") < 0) {
        buf_release(b, 6);
        return NULL;
    }
    PyObject *olo = PyByteArray_FromStringAndSize(NULL, nl * 8);
    PyObject *ohi = PyByteArray_FromStringAndSize(NULL, nl * 8);
    Acc acc;
    if (!olo || !ohi || acc_init(&acc, rows, block, cat_syscall, cat_running, b[6].b.buf,
                                 b[6].b.itemsize == 8) < 0) {
        Py_XDECREF(olo);
        Py_XDECREF(ohi);
        buf_release(b, 7);
        return NULL;
    }
    int64_t *klo = I64(olo), *khi = I64(ohi);
    int ok = 1, bad_row = 0, failed = 0;
    release_unlock(&rel);
    for (Py_ssize_t k = 0; ok && !bad_row && !failed && k < nl; k++) {
        klo[k] = acc.kept;
        int64_t prev = INT64_MIN;
        for (Py_ssize_t i = lo[k]; i < hi[k]; i++) {
            if (i + 16 < hi[k]) {
                __builtin_prefetch(&start[src[i + 16]]);
                __builtin_prefetch(&end[src[i + 16]]);
                __builtin_prefetch(&state[src[i + 16]]);
            }
            int64_t r = src[i];
            if (r < 0 || r >= n) {
                bad_row = 1;
                break;
            }
            int64_t s = start[r];
            if (s < prev) {
                ok = 0; /* not in time order: the caller sorts */
                break;
            }
            prev = s;
            acc_add(&acc, k, s, end[r], state[r] == syscall ? cat_syscall : cat_running,
                    r * ref_sources + src_interval);
            if (release_tick(&rel) < 0) {
                failed = 1;
                break;
            }
        }
        khi[k] = acc.kept;
    }
    release_lock(&rel);
    PyObject *result = NULL;
    if (bad_row)
        PyErr_SetString(PyExc_ValueError, "m_lane_refs: a row outside the columns");
    if (!PyErr_Occurred() && ok) {
        PyObject *index = acc_index(&acc);
        if (index)
            result = Py_BuildValue("(OOnO)", olo, ohi, acc.kept, index);
        Py_XDECREF(index);
    }
    Py_DECREF(olo);
    Py_DECREF(ohi);
    acc_clear(&acc);
    buf_release(b, 7);
    if (result || PyErr_Occurred())
        return result;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"p_lane_refs", p_lane_refs, METH_VARARGS,
     "p_lane_refs(run_row, run_p, run_start, run_end, rid, start, end, state, first_proc_row,"
     " codes, out, block, release, stride) -> (ids, lo, hi, kept, index) or None"},
    {"m_lane_rows", m_lane_rows, METH_VARARGS,
     "m_lane_rows(state, m, seq, goroutine_rows, codes, window, release, stride)"
     " -> (ids, lo, hi, rows) or None"},
    {"m_lane_refs", m_lane_refs, METH_VARARGS,
     "m_lane_refs(rows, lo, hi, state, start, end, codes, out, block, release, stride)"
     " -> (lo, hi, kept, index) or None"},
    {"block_index", block_index, METH_VARARGS,
     "block_index(start, end, cat, lo, block) -> (block_max, cats, cum) or None (rows of a "
     "lane overlap)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_lanesets",
    "The timeline's P and M lane sets as kept, in C (see ingest/derive/proc_thread_lanes.py).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__lanesets(void) { return PyModule_Create(&module); }
