/* ingest.store._sqlitebulk: insert columns of integers (and texts) straight
 * into SQLite, on the connection and inside the transaction that Python's
 * sqlite3 module holds, through SQLite's public API only.
 *
 *   register()                                   every later connection gets the SQL function
 *                                                and the table-valued function gmpscope_rows
 *   stage(sql, rows, columns) -> token           (with the GIL)
 *   SELECT gmpscope_bulk_insert(token)           -> rows inserted  (without the GIL)
 *   release(token)                               drops the staged references
 *   instance(), pending(), COLUMNS               the probe's answer; batches staged; columns
 *
 * Why: a loaded trace is millions of all-integer rows. Through Python every
 * value becomes an int object that the sqlite3 module binds with the GIL held
 * (about 0.7 us a row of 10 columns); here the values go from the numpy
 * columns (gathered through an index where the rows are a reordering) to
 * SQLite without the GIL, so the loader's numpy work runs meanwhile
 * (bench/sqlite_insert.py).
 *
 * How the binder reaches the connection without reading Python's objects:
 * register() adds an automatic extension (sqlite3_auto_extension) to the
 * SQLite library this module links, libsqlite3.so.0, the one Python's _sqlite3
 * links too. SQLite runs it on every connection it opens afterwards, and it
 * adds the SQL function gmpscope_bulk_insert(token) and the eponymous virtual
 * table gmpscope_rows there. Python stages a batch (buffer views of the
 * columns, texts copied to UTF-8, the statement INSERT OR FAIL INTO t (...)
 * SELECT c0, c1, ... FROM gmpscope_rows(?)) under a token, then runs SELECT
 * gmpscope_bulk_insert(?) on its connection: the sqlite3 module releases the
 * GIL around sqlite3_step, and the function, inside that step, prepares the
 * statement on its own connection (sqlite3_context_db_handle), binds the
 * batch as a pointer (sqlite3_bind_pointer: no SQL can name a batch) and
 * steps it once, in the open transaction; gmpscope_rows' cursor returns the
 * staged values (sqlite3_result_*), no value bound. That replaced multi-row
 * VALUES statements bound value by value (sqlite3_bind_int64 takes the
 * connection's mutex each time, and the VALUES co-routine copies each value):
 * bench/RESULTS.md has the A/B. A connection opened before register(), or by
 * another SQLite library, has neither function: the caller binds through
 * Python. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

/* One column of the rows to insert: row r's value is
 *   seq + r                       when there are no values (row ids),
 *   values[index[r]]              with an index (a gather),
 *   values[r]                     otherwise;
 * NULL where null[r] is nonzero. */
typedef struct {
    Py_buffer values, index, null;
    int have_values, have_index, have_null;
    char vkind, ikind; /* 's' signed, 'u' unsigned, 'b' bool */
    int64_t seq;
    int64_t imin, imax; /* the index's range over the rows (checked against values) */
    /* A text column: row r is text i = index[r] (i = r without an index),
     * bytes [toff[i], toff[i+1]) of tbuf, NULL where tnull[i]. Copied from
     * the str list while staging: the function runs without the GIL, when
     * the list's items may be gone. */
    int have_texts;
    Py_ssize_t ntexts;
    char *tbuf;
    int64_t *toff;
    uint8_t *tnull;
} Col;

static int64_t read_int(const void *buf, Py_ssize_t itemsize, char kind, Py_ssize_t i) {
    switch (itemsize) {
    case 1: return kind == 's' ? (int64_t)((const int8_t *)buf)[i]
                               : (int64_t)((const uint8_t *)buf)[i];
    case 2: return kind == 's' ? (int64_t)((const int16_t *)buf)[i]
                               : (int64_t)((const uint16_t *)buf)[i];
    case 4: return kind == 's' ? (int64_t)((const int32_t *)buf)[i]
                               : (int64_t)((const uint32_t *)buf)[i];
    default: return ((const int64_t *)buf)[i];
    }
}

static int col_value(const Col *c, Py_ssize_t r, int64_t *out) {
    if (c->have_null && ((const uint8_t *)c->null.buf)[r]) return 0;
    if (c->have_texts) { /* the row's item in texts */
        *out = c->have_index ? read_int(c->index.buf, c->index.itemsize, c->ikind, r) : r;
        return !c->tnull[*out];
    }
    if (!c->have_values) {
        *out = c->seq + r;
        return 1;
    }
    Py_ssize_t i = c->have_index ? (Py_ssize_t)read_int(c->index.buf, c->index.itemsize,
                                                        c->ikind, r) : r;
    *out = read_int(c->values.buf, c->values.itemsize, c->vkind, i);
    return 1;
}

/* Rows gathered column by column before binding: a tight loop per column
 * keeps many cache misses in flight, where fetching each value while binding
 * waits for every miss in turn (a gather from a reordered trace is mostly
 * misses: 3x slower measured). */
#define BATCH_ROWS 4096

/* gmpscope_rows' columns c0..c63: the widest batch (a table has 29 at most). */
#define ROWS_COLUMNS 64

typedef struct {
    int64_t *vals; /* BATCH_ROWS x k, column-major */
    uint8_t *nulls;
} Batch;

/* A batch's buffers for k columns: 0, or -1 out of memory (nothing held). */
static int batch_alloc(Batch *b, int k) {
    b->vals = malloc((size_t)k * BATCH_ROWS * sizeof(int64_t));
    b->nulls = malloc((size_t)k * BATCH_ROWS);
    if (b->vals && b->nulls) return 0;
    free(b->vals);
    free(b->nulls);
    return -1;
}

static void batch_free(Batch *b) {
    free(b->vals);
    free(b->nulls);
}

/* Rows fetched ahead in a gather (the index is read in order, the values
 * at random: prefetching them keeps more misses in flight). */
#define AHEAD 16

/* values[index[r]] for an int32 index and signed values of type VT, no
 * NULLs: the common gather (the intervals' columns), without a per-value
 * switch on the types. */
#define GATHER_I32(VT)                                                                   \
    do {                                                                                 \
        const int32_t *ix = (const int32_t *)c->index.buf + row;                         \
        const VT *v = (const VT *)c->values.buf;                                         \
        Py_ssize_t ahead = nrows - AHEAD;                                                \
        for (Py_ssize_t r = 0; r < nrows; r++) {                                         \
            if (r < ahead) __builtin_prefetch(v + ix[r + AHEAD]);                        \
            out[r] = (int64_t)v[ix[r]];                                                  \
        }                                                                                \
        memset(nul, 0, (size_t)nrows);                                                   \
    } while (0)

/* Whether GATHER_I32 applies to column c (and then fills out/nul). */
static int gather_fast(const Col *c, Py_ssize_t row, Py_ssize_t nrows, int64_t *out,
                       uint8_t *nul) {
    if (!c->have_values || !c->have_index || c->have_texts || c->have_null ||
        c->index.itemsize != 4 || c->ikind != 's' || c->vkind != 's')
        return 0;
    switch (c->values.itemsize) {
    case 1: GATHER_I32(int8_t); return 1;
    case 2: GATHER_I32(int16_t); return 1;
    case 4: GATHER_I32(int32_t); return 1;
    case 8: GATHER_I32(int64_t); return 1;
    default: return 0;
    }
}

/* values[row + r] of a plain column of type VT (no index, no NULLs). */
#define COPY_PLAIN(VT)                                                                   \
    do {                                                                                 \
        const VT *v = (const VT *)c->values.buf + row;                                   \
        for (Py_ssize_t r = 0; r < nrows; r++) out[r] = (int64_t)v[r];                   \
        memset(nul, 0, (size_t)nrows);                                                   \
    } while (0)

/* Whether COPY_PLAIN applies to column c (and then fills out/nul). */
static int copy_plain(const Col *c, Py_ssize_t row, Py_ssize_t nrows, int64_t *out,
                      uint8_t *nul) {
    if (!c->have_values || c->have_index || c->have_texts || c->have_null) return 0;
    int is_signed = c->vkind == 's';
    switch (c->values.itemsize) {
    case 1: if (is_signed) COPY_PLAIN(int8_t); else COPY_PLAIN(uint8_t); return 1;
    case 2: if (is_signed) COPY_PLAIN(int16_t); else COPY_PLAIN(uint16_t); return 1;
    case 4: if (is_signed) COPY_PLAIN(int32_t); else COPY_PLAIN(uint32_t); return 1;
    case 8: if (is_signed) { COPY_PLAIN(int64_t); return 1; } return 0;
    default: return 0;
    }
}

static void fill_batch(const Col *cols, int k, Py_ssize_t row, Py_ssize_t nrows, Batch *b) {
    for (int j = 0; j < k; j++) {
        const Col *c = &cols[j];
        int64_t *out = b->vals + (size_t)j * BATCH_ROWS;
        uint8_t *nul = b->nulls + (size_t)j * BATCH_ROWS;
        if (gather_fast(c, row, nrows, out, nul)) continue;
        if (copy_plain(c, row, nrows, out, nul)) continue;
        if (c->have_values && c->have_index && !c->have_texts) {
            Py_ssize_t end = row + nrows, n_index = c->index.len / c->index.itemsize;
            Py_ssize_t n_values = c->values.len / c->values.itemsize;
            for (Py_ssize_t r = 0; r < nrows; r++) {
                Py_ssize_t a = row + r + AHEAD;
                if (a < end && a < n_index) {
                    Py_ssize_t i = (Py_ssize_t)read_int(c->index.buf, c->index.itemsize,
                                                        c->ikind, a);
                    if (i >= 0 && i < n_values)
                        __builtin_prefetch((const char *)c->values.buf + i * c->values.itemsize);
                }
                nul[r] = !col_value(c, row + r, &out[r]);
            }
            continue;
        }
        for (Py_ssize_t r = 0; r < nrows; r++) nul[r] = !col_value(c, row + r, &out[r]);
    }
}

/* The kind of an integer buffer format, or 0 when it is not one. */
static char int_kind(const char *fmt, Py_ssize_t itemsize) {
    if (!fmt) return 0;
    if (*fmt == '<' || *fmt == '=' || *fmt == '@') fmt++;
    if (strlen(fmt) != 1 || itemsize > 8) return 0;
    if (strchr("bhilq", *fmt)) return 's';
    if (strchr("BHILQ", *fmt)) return 'u';
    if (*fmt == '?') return 'b';
    return 0;
}

static int get_int_buffer(PyObject *obj, Py_buffer *view, char *kind, Py_ssize_t need,
                          const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    *kind = int_kind(view->format, view->itemsize);
    if (!*kind || view->len / view->itemsize < need) {
        PyErr_Format(PyExc_TypeError, "%s: a contiguous integer buffer of at least %zd items "
                     "expected", what, need);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}
static void release_cols(Col *cols, int k) {
    for (int j = 0; j < k; j++) {
        if (cols[j].have_values) PyBuffer_Release(&cols[j].values);
        if (cols[j].have_index) PyBuffer_Release(&cols[j].index);
        if (cols[j].have_null) PyBuffer_Release(&cols[j].null);
        PyMem_Free(cols[j].tbuf);
        PyMem_Free(cols[j].toff);
        PyMem_Free(cols[j].tnull);
    }
    PyMem_Free(cols);
}

/* Copy a text column's items (str or None) into one UTF-8 buffer with
 * offsets; -1 on error (an item neither str nor None, say). */
static int take_texts(Col *c, PyObject *texts, PyObject *values) {
    if (!PyList_Check(texts) || values != Py_None) {
        PyErr_SetString(PyExc_TypeError, "texts: a list, and no values, expected");
        return -1;
    }
    Py_ssize_t m = PyList_GET_SIZE(texts);
    c->have_texts = 1;
    c->ntexts = m;
    c->toff = PyMem_Malloc((size_t)(m + 1) * sizeof *c->toff);
    c->tnull = PyMem_Calloc((size_t)(m ? m : 1), 1);
    const char **utf8 = PyMem_Calloc((size_t)(m ? m : 1), sizeof *utf8);
    if (!c->toff || !c->tnull || !utf8) {
        PyMem_Free(utf8);
        PyErr_NoMemory();
        return -1;
    }
    /* The items' UTF-8 (cached in each str, as sqlite3's own binding does),
     * borrowed while the GIL is held and the list holds them. */
    c->toff[0] = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *item = PyList_GET_ITEM(texts, i);
        Py_ssize_t len = 0;
        if (item == Py_None) {
            c->tnull[i] = 1;
        } else if (!PyUnicode_Check(item)) {
            PyErr_Format(PyExc_TypeError, "texts: str or None expected, not %.80s",
                         Py_TYPE(item)->tp_name);
            break;
        } else if (!(utf8[i] = PyUnicode_AsUTF8AndSize(item, &len))) {
            break;
        } else if (len > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "texts: a string too long for SQLite");
            break;
        }
        c->toff[i + 1] = c->toff[i] + len;
    }
    /* One byte more: a NULL pointer would bind NULL, not an empty text. */
    if (!PyErr_Occurred() && !(c->tbuf = PyMem_Malloc((size_t)c->toff[m] + 1)))
        PyErr_NoMemory();
    if (PyErr_Occurred()) {
        PyMem_Free(utf8);
        return -1;
    }
    for (Py_ssize_t i = 0; i < m; i++)
        if (utf8[i]) memcpy(c->tbuf + c->toff[i], utf8[i], (size_t)(c->toff[i + 1] - c->toff[i]));
    PyMem_Free(utf8);
    return 0;
}


/* cols[j]'s smallest and largest index over n rows: taken from an earlier
 * column gathered through the same index (the intervals' eight columns
 * share one), else found in one pass. */
static void index_range(Col *cols, int j, Py_ssize_t n) {
    Col *c = &cols[j];
    for (int e = 0; e < j; e++) {
        const Col *d = &cols[e];
        if (d->have_index && d->index.buf == c->index.buf &&
            d->index.itemsize == c->index.itemsize && d->ikind == c->ikind) {
            c->imin = d->imin;
            c->imax = d->imax;
            return;
        }
    }
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    if (c->index.itemsize == 4 && c->ikind == 's') {
        const int32_t *ix = c->index.buf;
        for (Py_ssize_t r = 0; r < n; r++) {
            lo = ix[r] < lo ? ix[r] : lo;
            hi = ix[r] > hi ? ix[r] : hi;
        }
    } else {
        for (Py_ssize_t r = 0; r < n; r++) {
            int64_t i = read_int(c->index.buf, c->index.itemsize, c->ikind, r);
            lo = i < lo ? i : lo;
            hi = i > hi ? i : hi;
        }
    }
    c->imin = lo;
    c->imax = hi;
}

/* Parse (values, index, null, seq[, texts]) specs into cols; -1 on error (cols freed). */
static int parse_cols(PyObject *specs, Py_ssize_t n, Col **out, int *kout) {
    PyObject *seq = PySequence_Fast(specs, "columns must be a sequence");
    if (!seq) return -1;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
    Col *cols = k > 0 && k < 32767 ? PyMem_Calloc((size_t)k, sizeof(Col)) : NULL;
    if (!cols) {
        Py_DECREF(seq);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "1 to 32766 columns expected");
        return -1;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *values, *index, *null, *texts = Py_None;
        long long start;
        Col *c = &cols[j];
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, j), "OOOL|O;column (values, index, "
                              "null, seq[, texts]) expected", &values, &index, &null, &start,
                              &texts))
            goto fail;
        c->seq = start;
        if (texts != Py_None && take_texts(c, texts, values) < 0) goto fail;
        Py_ssize_t rows_needed = n;
        if (index != Py_None) {
            if (get_int_buffer(index, &c->index, &c->ikind, n, "index") < 0) goto fail;
            c->have_index = 1;
            if (c->ikind == 'b') {
                PyErr_SetString(PyExc_TypeError, "index: integers expected");
                goto fail;
            }
            rows_needed = 0; /* checked per value below */
        }
        if (c->have_texts && !c->have_index && c->ntexts < n) {
            PyErr_SetString(PyExc_ValueError, "fewer texts than rows");
            goto fail;
        }
        if (values != Py_None) {
            if (get_int_buffer(values, &c->values, &c->vkind, rows_needed, "values") < 0)
                goto fail;
            c->have_values = 1;
        } else if (c->have_index && !c->have_texts) {
            PyErr_SetString(PyExc_ValueError, "an index needs values");
            goto fail;
        }
        if (null != Py_None) {
            if (get_int_buffer(null, &c->null, &(char){0}, n, "null") < 0) goto fail;
            c->have_null = 1;
            if (c->null.itemsize != 1) {
                PyErr_SetString(PyExc_TypeError, "null: a bool buffer expected");
                goto fail;
            }
        }
        if (c->have_index) { /* every index must point into values (or texts) */
            Py_ssize_t len = c->have_texts ? c->ntexts : c->values.len / c->values.itemsize;
            index_range(cols, (int)j, n);
            if (n && (c->imin < 0 || c->imax >= len)) {
                PyErr_Format(PyExc_IndexError, "index %lld out of range (%zd values)",
                             (long long)(c->imin < 0 ? c->imin : c->imax), len);
                goto fail;
            }
        }
    }
    Py_DECREF(seq);
    *out = cols;
    *kout = (int)k;
    return 0;
fail:
    Py_DECREF(seq);
    release_cols(cols, (int)k);
    return -1;
}

/* ------------------------------------------------------------------------
 * Staged batches: made and freed with the GIL (stage, release), inserted
 * without it (the SQL function). The list is shared by every connection and
 * thread, hence the mutex; it is held only to find or mark a batch, never
 * while inserting, and never while waiting for the GIL. */

typedef struct Staged {
    struct Staged *next;
    sqlite3_int64 token;
    char *sql; /* INSERT ... SELECT ... FROM gmpscope_rows(?): prepared by the function */
    int k;
    Py_ssize_t n;
    Col *cols;
    int busy; /* the function is inserting it: release() refuses */
    int used; /* inserted (or failed): a token inserts once */
} Staged;

static pthread_mutex_t staged_mu = PTHREAD_MUTEX_INITIALIZER;
static Staged *staged_list;
static sqlite3_int64 next_token = 1;

/* What gmpscope_bulk_insert(NULL) answers: this module instance, so that a
 * caller knows the function on a connection is the one holding its batches
 * (not another copy of this module that registered it last). */
static sqlite3_int64 instance_id(void) { return (sqlite3_int64)(intptr_t)&staged_mu; }

static char *copy_str(const char *s) {
    size_t len = strlen(s) + 1;
    char *out = PyMem_Malloc(len);
    if (out) memcpy(out, s, len);
    return out;
}

static void free_staged(Staged *s) {
    if (s->cols) release_cols(s->cols, s->k);
    PyMem_Free(s->sql);
    PyMem_Free(s);
}

static PyObject *stage(PyObject *self, PyObject *args) {
    const char *sql;
    Py_ssize_t n;
    PyObject *specs;
    if (!PyArg_ParseTuple(args, "snO", &sql, &n, &specs)) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "rows must not be negative");
        return NULL;
    }
    Staged *s = PyMem_Calloc(1, sizeof *s);
    if (!s) return PyErr_NoMemory();
    s->n = n;
    if (!(s->sql = copy_str(sql))) {
        free_staged(s);
        return PyErr_NoMemory();
    }
    if (parse_cols(specs, n, &s->cols, &s->k) < 0) {
        s->cols = NULL; /* freed by parse_cols */
        free_staged(s);
        return NULL;
    }
    if (s->k > ROWS_COLUMNS) {
        PyErr_Format(PyExc_ValueError, "at most %d columns (gmpscope_rows' c0..c%d)",
                     ROWS_COLUMNS, ROWS_COLUMNS - 1);
        free_staged(s);
        return NULL;
    }
    pthread_mutex_lock(&staged_mu);
    s->token = next_token++;
    s->next = staged_list;
    staged_list = s;
    pthread_mutex_unlock(&staged_mu);
    return PyLong_FromLongLong(s->token);
}

static PyObject *release(PyObject *self, PyObject *arg) {
    long long token = PyLong_AsLongLong(arg);
    if (token == -1 && PyErr_Occurred()) return NULL;
    pthread_mutex_lock(&staged_mu);
    Staged **at = &staged_list;
    while (*at && (*at)->token != token) at = &(*at)->next;
    Staged *s = *at;
    int busy = s && s->busy;
    if (s && !busy) *at = s->next;
    pthread_mutex_unlock(&staged_mu);
    if (busy) {
        PyErr_SetString(PyExc_RuntimeError, "the batch is being inserted");
        return NULL;
    }
    if (s) free_staged(s);
    return PyBool_FromLong(s != NULL);
}

static PyObject *pending(PyObject *self, PyObject *noargs) {
    Py_ssize_t count = 0;
    pthread_mutex_lock(&staged_mu);
    for (Staged *s = staged_list; s; s = s->next) count++;
    pthread_mutex_unlock(&staged_mu);
    return PyLong_FromSsize_t(count);
}

static PyObject *instance(PyObject *self, PyObject *noargs) {
    return PyLong_FromLongLong(instance_id());
}

/* ------------------------------------------------------------------------
 * gmpscope_rows(batch): the staged batch as a table, an eponymous-only
 * virtual table (a table-valued function) with columns c0..c63 (column j of
 * the batch, NULL past its k columns) and the hidden argument column batch.
 * The argument is a pointer (sqlite3_bind_pointer, type ROWS_POINTER), which
 * only C code can bind: SQL cannot name a batch, so only
 * gmpscope_bulk_insert's own INSERT ... SELECT reads one. The cursor
 * gathers the rows BATCH_ROWS at a time column by column (fill_batch) and
 * xColumn returns them with sqlite3_result_*: no bind (each takes the
 * connection's mutex) and no VALUES co-routine copying each value. */

#define ROWS_POINTER "gmpscope_staged_batch"

/* "CREATE TABLE x(c0,c1,...,c63,batch HIDDEN)": no types, no affinity, so a
 * value reaches the INSERT as xColumn gave it (as a bound one does). */
static const char *rows_schema(void) {
    static char schema[16 + ROWS_COLUMNS * 5 + 16];
    if (!schema[0]) {
        size_t at = (size_t)snprintf(schema, sizeof schema, "CREATE TABLE x(");
        for (int j = 0; j < ROWS_COLUMNS; j++)
            at += (size_t)snprintf(schema + at, sizeof schema - at, "c%d,", j);
        snprintf(schema + at, sizeof schema - at, "batch HIDDEN)");
    }
    return schema;
}

typedef struct {
    sqlite3_vtab_cursor base;
    const Staged *s;
    Batch b;
    int have_b;
    Py_ssize_t row;   /* the current row */
    Py_ssize_t first; /* the rows in b: [first, end) */
    Py_ssize_t end;
} RowsCursor;

static int rows_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                        sqlite3_vtab **out, char **err) {
    int rc = sqlite3_declare_vtab(db, rows_schema());
    if (rc != SQLITE_OK) return rc;
#ifdef SQLITE_VTAB_DIRECTONLY /* SQLite 3.31: a view or trigger cannot use it */
    sqlite3_vtab_config(db, SQLITE_VTAB_DIRECTONLY);
#endif
    sqlite3_vtab *vt = sqlite3_malloc(sizeof *vt);
    if (!vt) return SQLITE_NOMEM;
    memset(vt, 0, sizeof *vt);
    *out = vt;
    return SQLITE_OK;
}

static int rows_disconnect(sqlite3_vtab *vt) {
    sqlite3_free(vt);
    return SQLITE_OK;
}

static int rows_error(sqlite3_vtab *vt, const char *msg) {
    sqlite3_free(vt->zErrMsg);
    vt->zErrMsg = sqlite3_mprintf("%s", msg);
    return SQLITE_ERROR;
}

/* The only plan: batch = ?, required. Unusable where the argument is not
 * known yet (SQLITE_CONSTRAINT: SQLite tries another order), an error where
 * there is none. */
static int rows_best_index(sqlite3_vtab *vt, sqlite3_index_info *info) {
    int arg = -1, unusable = 0;
    for (int i = 0; i < info->nConstraint; i++) {
        const struct sqlite3_index_constraint *c = &info->aConstraint[i];
        if (c->iColumn != ROWS_COLUMNS || c->op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
        if (!c->usable) {
            unusable = 1;
            continue;
        }
        arg = i;
        break;
    }
    if (arg < 0) {
        if (unusable) return SQLITE_CONSTRAINT;
        return rows_error(vt, "gmpscope_rows: a batch argument expected");
    }
    info->aConstraintUsage[arg].argvIndex = 1;
    info->aConstraintUsage[arg].omit = 1;
    info->idxNum = 1;
    info->estimatedCost = 1.0;
    info->estimatedRows = BATCH_ROWS;
    return SQLITE_OK;
}

static int rows_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out) {
    RowsCursor *c = sqlite3_malloc(sizeof *c);
    if (!c) return SQLITE_NOMEM;
    memset(c, 0, sizeof *c);
    *out = &c->base;
    return SQLITE_OK;
}

static int rows_close(sqlite3_vtab_cursor *cur) {
    RowsCursor *c = (RowsCursor *)cur;
    if (c->have_b) batch_free(&c->b);
    sqlite3_free(c);
    return SQLITE_OK;
}

/* Gather the rows from c->row on into the cursor's batch. */
static void rows_fill(RowsCursor *c) {
    Py_ssize_t m = c->s->n - c->row < BATCH_ROWS ? c->s->n - c->row : BATCH_ROWS;
    fill_batch(c->s->cols, c->s->k, c->row, m, &c->b);
    c->first = c->row;
    c->end = c->row + m;
}

static int rows_filter(sqlite3_vtab_cursor *cur, int idx_num, const char *idx_str, int argc,
                       sqlite3_value **argv) {
    RowsCursor *c = (RowsCursor *)cur;
    const Staged *s = argc == 1 ? sqlite3_value_pointer(argv[0], ROWS_POINTER) : NULL;
    if (!s) return rows_error(cur->pVtab, "gmpscope_rows: only gmpscope_bulk_insert reads a batch");
    if (c->have_b && c->s->k != s->k) {
        batch_free(&c->b);
        c->have_b = 0;
    }
    if (!c->have_b) {
        if (batch_alloc(&c->b, s->k) < 0) return SQLITE_NOMEM;
        c->have_b = 1;
    }
    c->s = s;
    c->row = c->first = c->end = 0;
    if (s->n) rows_fill(c);
    return SQLITE_OK;
}

static int rows_next(sqlite3_vtab_cursor *cur) {
    RowsCursor *c = (RowsCursor *)cur;
    if (++c->row >= c->end && c->row < c->s->n) rows_fill(c);
    return SQLITE_OK;
}

static int rows_eof(sqlite3_vtab_cursor *cur) {
    const RowsCursor *c = (const RowsCursor *)cur;
    return !c->s || c->row >= c->s->n;
}

static int rows_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int j) {
    const RowsCursor *c = (const RowsCursor *)cur;
    if (j >= c->s->k) return SQLITE_OK; /* NULL */
    size_t at = (size_t)j * BATCH_ROWS + (size_t)(c->row - c->first);
    const Col *col = &c->s->cols[j];
    int64_t v = c->b.vals[at];
    if (c->b.nulls[at])
        sqlite3_result_null(ctx);
    else if (col->have_texts) /* the staged copy outlives the statement */
        sqlite3_result_text(ctx, col->tbuf + col->toff[v], (int)(col->toff[v + 1] - col->toff[v]),
                            SQLITE_STATIC);
    else
        sqlite3_result_int64(ctx, v);
    return SQLITE_OK;
}

static int rows_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *rowid) {
    *rowid = ((const RowsCursor *)cur)->row;
    return SQLITE_OK;
}

static sqlite3_module rows_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only: no CREATE VIRTUAL TABLE ... USING gmpscope_rows */
    .xConnect = rows_connect,
    .xBestIndex = rows_best_index,
    .xDisconnect = rows_disconnect,
    .xDestroy = NULL,
    .xOpen = rows_open,
    .xClose = rows_close,
    .xFilter = rows_filter,
    .xNext = rows_next,
    .xEof = rows_eof,
    .xColumn = rows_column,
    .xRowid = rows_rowid,
};

/* Insert s's rows on db: SQLITE_DONE, else an SQLite error code with its
 * message in err. No Python here: the GIL is not held. One statement,
 * s->sql, whose one parameter is the batch (read by gmpscope_rows). */
static int insert_staged(sqlite3 *db, const Staged *s, char *err, size_t errsize) {
    if (sqlite3_get_autocommit(db)) {
        /* The statement would commit on its own (its rows, not the load's). */
        snprintf(err, errsize, "gmpscope_bulk_insert: no transaction open");
        return SQLITE_ERROR;
    }
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2(db, s->sql, -1, &stmt, NULL);
    if (rc == SQLITE_OK && sqlite3_bind_parameter_count(stmt) != 1) {
        rc = SQLITE_ERROR;
        snprintf(err, errsize, "gmpscope_bulk_insert: the statement must take one parameter, "
                 "the batch");
    } else if (rc == SQLITE_OK) {
        rc = sqlite3_bind_pointer(stmt, 1, (void *)s, ROWS_POINTER, NULL);
        if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
        if (rc == SQLITE_DONE && s->n <= INT_MAX && sqlite3_changes(db) != (int)s->n) {
            rc = SQLITE_ERROR;
            snprintf(err, errsize, "gmpscope_bulk_insert: %d rows inserted of %zd",
                     sqlite3_changes(db), s->n);
        }
    }
    if (rc != SQLITE_DONE && !err[0]) {
        /* SQLite's own error (a duplicate key, a full disk): its extended
         * code and message, which the caller's sqlite3 module maps as it
         * would the INSERT's own (IntegrityError, OperationalError, ...). */
        rc = sqlite3_extended_errcode(db);
        snprintf(err, errsize, "%s", sqlite3_errmsg(db));
    }
    sqlite3_finalize(stmt);
    return rc;
}

/* gmpscope_bulk_insert(token): insert the batch staged under token, on this
 * connection, in its transaction; the number of rows. gmpscope_bulk_insert(NULL):
 * instance_id(), the probe. */
static void bulk_insert_sql(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) {
        sqlite3_result_int64(ctx, instance_id());
        return;
    }
    if (sqlite3_value_type(argv[0]) != SQLITE_INTEGER) {
        sqlite3_result_error(ctx, "gmpscope_bulk_insert: a token expected", -1);
        return;
    }
    sqlite3_int64 token = sqlite3_value_int64(argv[0]);
    pthread_mutex_lock(&staged_mu);
    Staged *s = staged_list;
    while (s && s->token != token) s = s->next;
    const char *why = !s ? "no batch staged under this token"
                      : s->busy ? "the batch is being inserted"
                      : s->used ? "the batch was inserted already" : NULL;
    if (!why) s->busy = 1;
    pthread_mutex_unlock(&staged_mu);
    if (why) {
        char msg[128];
        snprintf(msg, sizeof msg, "gmpscope_bulk_insert: %s", why);
        sqlite3_result_error(ctx, msg, -1);
        return;
    }
    char err[512] = "";
    int rc = insert_staged(sqlite3_context_db_handle(ctx), s, err, sizeof err);
    sqlite3_int64 n = s->n;
    pthread_mutex_lock(&staged_mu);
    s->busy = 0;
    s->used = 1;
    pthread_mutex_unlock(&staged_mu);
    if (rc != SQLITE_DONE) {
        sqlite3_result_error(ctx, err, -1);
        sqlite3_result_error_code(ctx, rc); /* after: result_error resets it to SQLITE_ERROR */
        return;
    }
    sqlite3_result_int64(ctx, n);
}

#ifndef SQLITE_DIRECTONLY /* before SQLite 3.30 */
#define SQLITE_DIRECTONLY 0
#endif

/* Run by SQLite on every connection it opens after register(). Direct only:
 * the function is callable from top-level SQL, never from a trigger, view or
 * schema of a database file. Never fails: an error here would fail the
 * connection's open; without the function the caller binds through Python. */
static int bulk_entry(sqlite3 *db, const char **errmsg, const void *api) {
    (void)sqlite3_create_module_v2(db, "gmpscope_rows", &rows_module, NULL, NULL);
    (void)sqlite3_create_function_v2(db, "gmpscope_bulk_insert", 1,
                                     SQLITE_UTF8 | SQLITE_DIRECTONLY, NULL, bulk_insert_sql,
                                     NULL, NULL, NULL);
    return SQLITE_OK;
}

static PyObject *register_entry(PyObject *self, PyObject *noargs) {
    /* A no-op when the entry point is registered already. */
    int rc = sqlite3_auto_extension((void (*)(void))bulk_entry);
    if (rc != SQLITE_OK) {
        PyErr_Format(PyExc_RuntimeError, "sqlite3_auto_extension: %s", sqlite3_errstr(rc));
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"register", register_entry, METH_NOARGS,
     "register(): every SQLite connection opened from now on gets gmpscope_bulk_insert()"},
    {"stage", stage, METH_VARARGS,
     "stage(sql, rows, [(values, index, null, seq[, texts])]) -> token"},
    {"release", release, METH_O,
     "release(token): drop the batch staged under token; whether there was one"},
    {"pending", pending, METH_NOARGS, "pending(): batches staged and not released"},
    {"instance", instance, METH_NOARGS, "instance(): what gmpscope_bulk_insert(NULL) answers"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_sqlitebulk",
    "Integer rows bound straight into SQLite (see ingest/store/sqlite_fast.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__sqlitebulk(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "COLUMNS", ROWS_COLUMNS) < 0) Py_CLEAR(m);
    return m;
}
