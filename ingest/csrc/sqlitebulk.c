/* ingest.store._sqlitebulk: bind columns of integers (and texts) straight into
 * SQLite, on the connection and inside the transaction that Python's sqlite3
 * module holds.
 *
 *   handle_ok(conn, sqlite3_module_path, filename)  -> bool
 *   insert_columns(conn, sql_many, rows_many, sql_one, rows, columns)
 *
 * Why: a loaded trace is millions of all-integer rows. Through Python every
 * value becomes an int object that the sqlite3 module binds with the GIL held
 * (about 0.7 us a row of 10 columns); here the values go from the numpy
 * columns (gathered through an index where the rows are a reordering) to
 * sqlite3_bind_int64 without the GIL (about 0.45-0.55 us a row, most of it
 * SQLite's own b-tree work: bench/sqlite_insert.py), so the loader's numpy
 * work runs meanwhile.
 *
 * The sqlite3 handle is read from the connection object: CPython's
 * pysqlite_Connection starts with the sqlite3 pointer right after the object
 * header (3.8 through 3.13). handle_ok() checks, before anything touches the
 * handle, that the object is a sqlite3.Connection, that Python's sqlite3
 * module uses this very SQLite library (the same address for sqlite3_step),
 * that the handle's main database is the expected file, and that a
 * transaction is open. Callers use insert_columns only after handle_ok said
 * yes; otherwise they bind through Python. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

typedef struct {
    PyObject_HEAD
    sqlite3 *db;
} ConnPrefix;

static PyObject *connection_type(void) {
    PyObject *mod = PyImport_ImportModule("sqlite3");
    if (!mod) return NULL;
    PyObject *t = PyObject_GetAttrString(mod, "Connection");
    Py_DECREF(mod);
    return t;
}

/* 1 when conn's handle can be used here, 0 when not, -1 on a Python error. */
static int check_handle(PyObject *conn, const char *module_path, const char *filename) {
    PyObject *t = connection_type();
    if (!t) return -1;
    int is_conn = PyObject_TypeCheck(conn, (PyTypeObject *)t);
    Py_DECREF(t);
    if (!is_conn) return 0;
    void *lib = dlopen(module_path, RTLD_NOW | RTLD_NOLOAD);
    if (!lib) return 0;
    void *theirs = dlsym(lib, "sqlite3_step");
    dlclose(lib);
    if (theirs != (void *)&sqlite3_step) return 0;
    sqlite3 *db = ((ConnPrefix *)conn)->db;
    if (!db) return 0;
    const char *main_file = sqlite3_db_filename(db, "main");
    if (!main_file || strcmp(main_file, filename) != 0) return 0;
    if (sqlite3_get_autocommit(db)) return 0; /* no transaction open */
    return 1;
}

static PyObject *handle_ok(PyObject *self, PyObject *args) {
    PyObject *conn;
    const char *module_path, *filename;
    if (!PyArg_ParseTuple(args, "Oss", &conn, &module_path, &filename)) return NULL;
    int ok = check_handle(conn, module_path, filename);
    if (ok < 0) return NULL;
    return PyBool_FromLong(ok);
}

static void raise_sqlite(sqlite3 *db, int rc, const char *msg) {
    PyObject *mod = PyImport_ImportModule("sqlite3");
    if (!mod) return;
    int primary = rc & 0xff;
    const char *name = primary == SQLITE_CONSTRAINT ? "IntegrityError"
                       : primary == SQLITE_MISUSE ? "InterfaceError"
                       : "OperationalError";
    PyObject *exc = PyObject_GetAttrString(mod, name);
    Py_DECREF(mod);
    if (!exc) return;
    PyErr_SetString(exc, msg);
    Py_DECREF(exc);
}

/* One column of the rows to insert (see take_texts for text columns): row r's value is
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
    /* A text column: row r is texts[index[r]] (texts[r] without an index),
     * NULL for None; UTF-8 pointers taken with the GIL, valid while the
     * list holds its strings. */
    PyObject *texts;
    const char **txt;
    Py_ssize_t *txtlen;
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
    if (c->texts) { /* the row's item in texts */
        *out = c->have_index ? read_int(c->index.buf, c->index.itemsize, c->ikind, r) : r;
        return c->txt[*out] != NULL;
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
    if (!c->have_values || !c->have_index || c->texts || c->have_null ||
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
    if (!c->have_values || c->have_index || c->texts || c->have_null) return 0;
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
        if (c->have_values && c->have_index && !c->texts) {
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

/* Bind batch rows [first, first+nrows) and step stmt once; SQLITE_DONE on success. */
static int run_rows(sqlite3_stmt *stmt, const Batch *b, const Col *cols, int k,
                    Py_ssize_t first, int nrows, int ints_only) {
    int param = 1;
    if (ints_only) { /* no NULL and no text in any column: integers alone */
        for (int r = 0; r < nrows; r++) {
            for (int j = 0; j < k; j++, param++) {
                int rc = sqlite3_bind_int64(stmt, param,
                                            b->vals[(size_t)j * BATCH_ROWS + (size_t)(first + r)]);
                if (rc != SQLITE_OK) return rc;
            }
        }
        int rc = sqlite3_step(stmt);
        sqlite3_reset(stmt);
        return rc;
    }
    for (int r = 0; r < nrows; r++) {
        for (int j = 0; j < k; j++, param++) {
            size_t at = (size_t)j * BATCH_ROWS + (size_t)(first + r);
            int64_t v = b->vals[at];
            int rc = b->nulls[at] ? sqlite3_bind_null(stmt, param)
                     : cols[j].texts ? sqlite3_bind_text(stmt, param, cols[j].txt[v],
                                                         (int)cols[j].txtlen[v], SQLITE_STATIC)
                     : sqlite3_bind_int64(stmt, param, v);
            if (rc != SQLITE_OK) return rc;
        }
    }
    int rc = sqlite3_step(stmt);
    sqlite3_reset(stmt);
    return rc;
}

/* Insert rows [0, n): whole statements of `per` rows, then one at a time. */
static int insert_rows(sqlite3_stmt *many, sqlite3_stmt *one, int per, const Col *cols, int k,
                       Py_ssize_t n, Batch *b) {
    int rc = SQLITE_DONE, ints_only = 1;
    for (int j = 0; j < k; j++)
        if (cols[j].texts || cols[j].have_null) ints_only = 0;
    Py_ssize_t batch_rows = (BATCH_ROWS / per) * per; /* whole statements per batch */
    for (Py_ssize_t row = 0; rc == SQLITE_DONE && row < n; row += batch_rows) {
        Py_ssize_t m = n - row < batch_rows ? n - row : batch_rows;
        fill_batch(cols, k, row, m, b);
        Py_ssize_t r = 0;
        for (; rc == SQLITE_DONE && r + per <= m; r += per)
            rc = run_rows(many, b, cols, k, r, per, ints_only);
        for (; rc == SQLITE_DONE && r < m; r++) rc = run_rows(one, b, cols, k, r, 1, ints_only);
    }
    return rc;
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
        Py_XDECREF(cols[j].texts);
        PyMem_Free(cols[j].txt);
        PyMem_Free(cols[j].txtlen);
    }
    PyMem_Free(cols);
}

/* Keep a text column's list and its items' UTF-8; -1 on error (an item
 * neither str nor None, say). */
static int take_texts(Col *c, PyObject *texts, PyObject *values) {
    if (!PyList_Check(texts) || values != Py_None) {
        PyErr_SetString(PyExc_TypeError, "texts: a list, and no values, expected");
        return -1;
    }
    Py_ssize_t m = PyList_GET_SIZE(texts);
    c->txt = PyMem_Calloc((size_t)(m ? m : 1), sizeof *c->txt);
    c->txtlen = PyMem_Calloc((size_t)(m ? m : 1), sizeof *c->txtlen);
    if (!c->txt || !c->txtlen) {
        PyErr_NoMemory();
        return -1;
    }
    Py_INCREF(texts);
    c->texts = texts;
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *item = PyList_GET_ITEM(texts, i);
        if (item == Py_None) continue;
        if (!PyUnicode_Check(item)) {
            PyErr_Format(PyExc_TypeError, "texts: str or None expected, not %.80s",
                         Py_TYPE(item)->tp_name);
            return -1;
        }
        c->txt[i] = PyUnicode_AsUTF8AndSize(item, &c->txtlen[i]);
        if (!c->txt[i]) return -1;
        if (c->txtlen[i] > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "texts: a string too long for SQLite");
            return -1;
        }
    }
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
        if (c->texts && !c->have_index && PyList_GET_SIZE(c->texts) < n) {
            PyErr_SetString(PyExc_ValueError, "fewer texts than rows");
            goto fail;
        }
        if (values != Py_None) {
            if (get_int_buffer(values, &c->values, &c->vkind, rows_needed, "values") < 0)
                goto fail;
            c->have_values = 1;
        } else if (c->have_index && !c->texts) {
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
            Py_ssize_t len = c->texts ? PyList_GET_SIZE(c->texts)
                                      : c->values.len / c->values.itemsize;
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

/* The open sqlite3 handle of conn (a sqlite3.Connection that handle_ok()
 * vouched for), or NULL with a Python error: anything that is not one at all
 * is refused rather than a pointer read out of it. */
static sqlite3 *conn_db(PyObject *conn) {
    PyObject *t = connection_type();
    if (!t) return NULL;
    int is_conn = PyObject_TypeCheck(conn, (PyTypeObject *)t);
    Py_DECREF(t);
    if (!is_conn || !((ConnPrefix *)conn)->db) {
        PyErr_SetString(PyExc_TypeError, "an open sqlite3.Connection expected");
        return NULL;
    }
    return ((ConnPrefix *)conn)->db;
}

static PyObject *insert_columns(PyObject *self, PyObject *args) {
    PyObject *conn, *specs;
    const char *sql_many, *sql_one;
    int per, k;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OsisnO", &conn, &sql_many, &per, &sql_one, &n, &specs))
        return NULL;
    if (per < 1 || per > BATCH_ROWS || n < 0) {
        PyErr_SetString(PyExc_ValueError, "rows per statement must be positive, rows not negative");
        return NULL;
    }
    sqlite3 *db = conn_db(conn);
    if (!db) return NULL;
    Col *cols;
    if (parse_cols(specs, n, &cols, &k) < 0) return NULL;
    sqlite3_stmt *many = NULL, *one = NULL;
    int rc = SQLITE_OK;
    char err[512] = "";
    Py_BEGIN_ALLOW_THREADS
    /* Held for the whole insert: every sqlite3_bind_* takes the connection's
     * (recursive) mutex, and taking it afresh ~9 times a row cost ~10% of a
     * load's CPU; re-entering a mutex this thread holds is a counter. */
    sqlite3_mutex *mu = sqlite3_db_mutex(db);
    sqlite3_mutex_enter(mu);
    if (n >= per) rc = sqlite3_prepare_v2(db, sql_many, -1, &many, NULL);
    if (rc == SQLITE_OK && n % per) rc = sqlite3_prepare_v2(db, sql_one, -1, &one, NULL);
    if (rc == SQLITE_OK && ((many && sqlite3_bind_parameter_count(many) != per * k)
                            || (one && sqlite3_bind_parameter_count(one) != k))) {
        rc = SQLITE_MISUSE;
        snprintf(err, sizeof err, "the statements do not take %d values a row", k);
    }
    if (rc == SQLITE_OK) {
        Batch b;
        if (batch_alloc(&b, k) == 0) {
            rc = insert_rows(many, one, per, cols, k, n, &b);
            batch_free(&b);
        } else {
            rc = SQLITE_NOMEM;
            snprintf(err, sizeof err, "out of memory");
        }
    }
    if (rc != SQLITE_DONE && !err[0]) snprintf(err, sizeof err, "%s", sqlite3_errmsg(db));
    sqlite3_finalize(many);
    sqlite3_finalize(one);
    sqlite3_mutex_leave(mu);
    Py_END_ALLOW_THREADS

    release_cols(cols, k);
    if (rc != SQLITE_DONE) {
        raise_sqlite(db, rc, err);
        return NULL;
    }
    return PyLong_FromSsize_t(n);
}

/* gmpscope's appender (ingest/csrc/sqlite_append.c), present only in
 * gmpscope's own SQLite library: found at run time, and used only when it
 * lives in the very library this module's sqlite3_step comes from. */
typedef struct gmpscope_appender gmpscope_appender;
_Static_assert(sizeof(Py_ssize_t) == sizeof(sqlite3_int64), "text lengths are passed as int64");
typedef int (*appender_open_fn)(sqlite3 *, const char *, int, const char *const *, const int *,
                                int, const char *const *, const sqlite3_int64 *,
                                gmpscope_appender **, char *, int);
typedef int (*appender_rows_fn)(gmpscope_appender *, int, int, const sqlite3_int64 *,
                                const unsigned char *, const char *const *const *,
                                const sqlite3_int64 *const *, int *);
typedef int (*appender_version_fn)(void);
/* The appender's interface this binder speaks, and its "stopped" answer. */
#define APPENDER_VERSION 2
#define APPEND_STOPPED 1000
typedef void (*appender_close_fn)(gmpscope_appender *);

static struct {
    int looked;
    appender_open_fn open;
    appender_rows_fn rows;
    appender_close_fn close;
} appender;

static int same_library(void *a, void *b) {
    Dl_info ia, ib;
    return dladdr(a, &ia) && dladdr(b, &ib) && ia.dli_fbase == ib.dli_fbase;
}

static int find_appender(void) {
    if (!appender.looked) {
        appender.looked = 1;
        void *o = dlsym(RTLD_DEFAULT, "gmpscope_appender_open");
        void *r = dlsym(RTLD_DEFAULT, "gmpscope_appender_rows");
        void *c = dlsym(RTLD_DEFAULT, "gmpscope_appender_close");
        void *v = dlsym(RTLD_DEFAULT, "gmpscope_appender_version");
        if (o && r && c && v && same_library(o, (void *)&sqlite3_step) &&
            same_library(r, o) && same_library(c, o) && same_library(v, o) &&
            ((appender_version_fn)v)() == APPENDER_VERSION) {
            appender.open = (appender_open_fn)o;
            appender.rows = (appender_rows_fn)r;
            appender.close = (appender_close_fn)c;
        }
    }
    return appender.open != NULL;
}

static PyObject *has_appender(PyObject *self, PyObject *args) {
    return PyBool_FromLong(find_appender());
}

/* UTF-8 pointers of a list of str (borrowed from the list's items). */
static const char **utf8_names(PyObject *list, Py_ssize_t *count) {
    if (!PyList_Check(list)) {
        PyErr_SetString(PyExc_TypeError, "names: a list of str expected");
        return NULL;
    }
    Py_ssize_t m = PyList_GET_SIZE(list);
    const char **out = PyMem_Calloc((size_t)(m ? m : 1), sizeof *out);
    if (!out) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        out[i] = PyUnicode_Check(PyList_GET_ITEM(list, i))
                     ? PyUnicode_AsUTF8(PyList_GET_ITEM(list, i)) : NULL;
        if (!out[i]) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "names: str expected");
            PyMem_Free(out);
            return NULL;
        }
    }
    *count = m;
    return out;
}

/* append_columns(conn, table, names, literal_names, literal_values, rows, columns):
 * the rows appended by gmpscope's appender; returns the number of rows
 * appended (fewer than given when a row's index entry would not sort after
 * the last: the caller inserts it and the rest through statements), or a
 * str saying why the appender cannot take this table (then nothing was
 * written and the caller inserts through statements). */
static PyObject *append_columns(PyObject *self, PyObject *args) {
    PyObject *conn, *names_obj, *lit_names_obj, *lit_values_obj, *specs;
    const char *table;
    Py_ssize_t n, nnames = 0, nlit = 0;
    int k;
    if (!PyArg_ParseTuple(args, "OsOOOnO", &conn, &table, &names_obj, &lit_names_obj,
                          &lit_values_obj, &n, &specs))
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "rows must not be negative");
        return NULL;
    }
    if (!find_appender()) return PyUnicode_FromString("this SQLite library has no appender");
    sqlite3 *db = conn_db(conn);
    if (!db) return NULL;
    const char **names = utf8_names(names_obj, &nnames);
    if (!names) return NULL;
    const char **lit_names = utf8_names(lit_names_obj, &nlit);
    if (!lit_names) {
        PyMem_Free(names);
        return NULL;
    }
    sqlite3_int64 *lit_values = PyMem_Calloc((size_t)(nlit ? nlit : 1), sizeof *lit_values);
    Col *cols = NULL;
    int *is_text = NULL;
    const char *const **texts = NULL;
    const sqlite3_int64 **lengths = NULL;
    PyObject *result = NULL;
    if (!lit_values) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < nlit; i++) {
        PyObject *v = PySequence_GetItem(lit_values_obj, i);
        if (!v) goto out;
        lit_values[i] = PyLong_AsLongLong(v);
        Py_DECREF(v);
        if (PyErr_Occurred()) goto out;
    }
    if (parse_cols(specs, n, &cols, &k) < 0) goto out;
    if (k != nnames) {
        PyErr_SetString(PyExc_ValueError, "one name per column expected");
        goto out;
    }
    is_text = PyMem_Calloc((size_t)k, sizeof *is_text);
    texts = PyMem_Calloc((size_t)k, sizeof *texts);
    lengths = PyMem_Calloc((size_t)k, sizeof *lengths);
    if (!is_text || !texts || !lengths) {
        PyErr_NoMemory();
        goto out;
    }
    for (int j = 0; j < k; j++) {
        is_text[j] = cols[j].texts != NULL;
        texts[j] = (const char *const *)cols[j].txt;
        lengths[j] = (const sqlite3_int64 *)cols[j].txtlen; /* Py_ssize_t: 64 bits here */
    }
    int rc;
    char err[512] = "";
    int refused = 0;
    Py_ssize_t appended = 0;
    Py_BEGIN_ALLOW_THREADS
    sqlite3_mutex *mu = sqlite3_db_mutex(db);
    sqlite3_mutex_enter(mu);
    gmpscope_appender *app = NULL;
    rc = appender.open(db, table, k, names, is_text, (int)nlit, lit_names, lit_values, &app,
                       err, (int)sizeof err);
    if (rc == SQLITE_MISUSE) {
        refused = 1;
    } else if (rc == SQLITE_OK) {
        Batch b;
        if (batch_alloc(&b, k) == 0) {
            for (Py_ssize_t row = 0; rc == SQLITE_OK && row < n; row += BATCH_ROWS) {
                int m = (int)(n - row < BATCH_ROWS ? n - row : BATCH_ROWS), done = 0;
                fill_batch(cols, k, row, m, &b);
                rc = appender.rows(app, m, BATCH_ROWS, (const sqlite3_int64 *)b.vals, b.nulls,
                                   texts, lengths, &done);
                appended = row + done;
            }
            if (rc == APPEND_STOPPED) rc = SQLITE_OK;
            batch_free(&b);
        } else {
            rc = SQLITE_NOMEM;
        }
        appender.close(app);
    }
    if (rc != SQLITE_OK && !refused) snprintf(err, sizeof err, "%s", sqlite3_errmsg(db));
    sqlite3_mutex_leave(mu);
    Py_END_ALLOW_THREADS
    if (refused)
        result = PyUnicode_FromString(err);
    else if (rc != SQLITE_OK)
        raise_sqlite(db, rc, err);
    else
        result = PyLong_FromSsize_t(appended);
out:
    if (cols) release_cols(cols, k);
    PyMem_Free(names);
    PyMem_Free(lit_names);
    PyMem_Free(lit_values);
    PyMem_Free(is_text);
    PyMem_Free((void *)texts);
    PyMem_Free((void *)lengths);
    return result;
}

static PyMethodDef methods[] = {
    {"handle_ok", handle_ok, METH_VARARGS,
     "handle_ok(conn, sqlite3_module_path, filename): can insert_block use conn?"},
    {"insert_columns", insert_columns, METH_VARARGS,
     "insert_columns(conn, sql_many, rows_many, sql_one, rows, [(values, index, null, seq)])"},
    {"has_appender", has_appender, METH_NOARGS,
     "has_appender(): whether this SQLite library has gmpscope's appender"},
    {"append_columns", append_columns, METH_VARARGS,
     "append_columns(conn, table, names, literal_names, literal_values, rows, columns): "
     "rows appended by gmpscope's appender, or a str saying why it cannot"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_sqlitebulk",
    "Integer rows bound straight into SQLite (see ingest/store/sqlite_fast.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__sqlitebulk(void) { return PyModule_Create(&module); }
