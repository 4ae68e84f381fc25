/* ingest.store._intervalfiles: a trace's intervals, and other tables of
 * millions of rows, read by SQL straight from the column files they are kept
 * in (ingest/store/interval_files.py, ingest/store/coded_files.py).
 *
 *   register()        every SQLite connection opened from now on, in this
 *                     process, gets the eponymous virtual tables of
 *                     filetables.h
 *
 * gmpscope_intervals (the intervals), gmpscope_proc_run_index (proc_run_index's
 * rows kept as the frames' proc_runs.row.npy, each run's interval id its row
 * there plus the trace's first interval id) and gmpscope_syscall_outcomes
 * (syscall_outcomes' rows kept as the frames' syscalls.*.npy) are ranged:
 * one set of files per trace, row r the id first_id + r. gmpscope_metric_rows,
 * gmpscope_log_rows and gmpscope_region_rows (the coded tables' rows kept in
 * files, coded_files) are keyed: a set per part of a trace, its key (seq, id)
 * a file of its own.
 *
 * Why: on SQLite a trace's intervals (19.5 M rows for a 200 MB trace) were
 * kept twice, as SQL rows (815 MB) and as the views' memory-mapped column
 * files. Now the files are their home; this table shows them to SQL with the
 * columns of the old table, and the view ``intervals`` is the rows still kept
 * in ``interval_rows`` UNION ALL this table. The coded tables' millions of
 * rows cost the load more as b-tree inserts than as files.
 *
 * Which files: a listing table of the same database (interval_files,
 * coded_files, ...), one row per set: (trace_id, first key, last key, base,
 * directory, rows, file prefix). ``directory`` holds one NumPy ``.npy`` file per
 * column (<prefix><column>.npy: little-endian signed integers of 1, 2, 4 or 8
 * bytes, one dimension) and is relative to the database file's directory
 * unless absolute. A statement reads the list when
 * it first filters the table (it sees one snapshot of the database); each
 * column's file is mapped read-only when first read (a point lookup of one
 * column maps one file). The connection keeps the list and its mappings for
 * its next statements while the database is unchanged (see take_list): a
 * point lookup then costs no SQL, open or mmap of its own (the bisection of a
 * goroutine's window runs ~40 of them; 5.7 -> 0.5 ms on the 25 MB trace). A
 * statement that visited many rows hands the pages it brought in back to the
 * page cache when it ends; the mappings of a changed listing go with it.
 *
 * Constraints used: the key (=, <, <=, >, >=) and trace_id (=); the rows come
 * in key order (a keyed table's within a trace), so ORDER BY the key costs
 * nothing. Every constraint is checked again by SQLite (none is omitted): ours
 * only narrows the rows visited.
 *
 * Reached through SQLite's public API only: register() adds an automatic
 * extension (sqlite3_auto_extension) to the SQLite library this module links,
 * libsqlite3.so.0, the one Python's _sqlite3 links too (as _sqlitebulk does). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sqlite3.h>

#include "filetables.h"

/* idxNum bits: which constraints xFilter gets, in this order in argv. */
enum { F_TRACE = 1, F_ID_EQ = 2, F_ID_LO = 4, F_ID_HI = 8 };

typedef struct {
    void *map;
    size_t map_len;
    const unsigned char *data;
    int width; /* bytes per value: 1, 2, 4 or 8 */
} Column;

typedef struct {
    sqlite3_int64 trace_id, first_id, last_id, base;
    sqlite3_int64 rows;
    sqlite3_int64 row0; /* rows of the sets before it: its rowids start there */
    char *dir;          /* resolved, with the files' prefix */
    int mapped;
    Column cols[MAX_COLS];
} Set;

/* The traces kept in files as one snapshot of the listing table, shared by
 * the cursors that read it (each holds a reference). */
typedef struct {
    int refs;
    int nsets;
    Set *sets;
} SetList;

typedef struct {
    sqlite3_vtab base;
    sqlite3 *db;
    const TableDesc *desc;
    /* The listing read last, with its files mapped as they were read, kept
     * for the connection's next statements while the database's data
     * version (SQLITE_FCNTL_DATA_VERSION: any change, by this connection or
     * another) is the one it was read at. */
    SetList *list;
    unsigned int version;
    sqlite3_int64 changes;
} FilesVtab;

typedef struct {
    sqlite3_vtab_cursor base;
    SetList *list;
    Set *sets;                  /* list->sets */
    int nsets;
    sqlite3_int64 visited;      /* rows this cursor visited */
    int cur;                    /* the set being read */
    sqlite3_int64 row, end;     /* its current row; the row after the last wanted */
    sqlite3_int64 lo, hi;       /* the keys wanted */
    int has_trace;
    sqlite3_int64 trace_id;
} FilesCursor;

static void unref_list(SetList *l);

static int files_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                         sqlite3_vtab **out, char **err) {
    const TableDesc *desc = aux;
    int rc = sqlite3_declare_vtab(db, desc->schema);
    if (rc != SQLITE_OK) return rc;
#ifdef SQLITE_VTAB_INNOCUOUS
    /* Read-only and without side effects: usable from the schema's views
     * even where trusted_schema is off. */
    sqlite3_vtab_config(db, SQLITE_VTAB_INNOCUOUS);
#endif
    FilesVtab *vt = sqlite3_malloc(sizeof *vt);
    if (!vt) return SQLITE_NOMEM;
    memset(vt, 0, sizeof *vt);
    vt->db = db;
    vt->desc = desc;
    *out = &vt->base;
    return SQLITE_OK;
}

static int files_disconnect(sqlite3_vtab *vt) {
    unref_list(((FilesVtab *)vt)->list);
    sqlite3_free(vt);
    return SQLITE_OK;
}

static int files_best_index(sqlite3_vtab *vt, sqlite3_index_info *info) {
    int use[4] = {-1, -1, -1, -1}; /* constraint index per F_* bit position */
    for (int i = 0; i < info->nConstraint; i++) {
        const struct sqlite3_index_constraint *c = &info->aConstraint[i];
        if (!c->usable) continue;
        if (c->iColumn == C_TRACE && c->op == SQLITE_INDEX_CONSTRAINT_EQ) {
            if (use[0] < 0) use[0] = i;
        } else if (c->iColumn == C_ID || (c->iColumn == -1 && !KEYED(((FilesVtab *)vt)->desc))) {
            if (c->op == SQLITE_INDEX_CONSTRAINT_EQ) {
                if (use[1] < 0) use[1] = i;
            } else if (c->op == SQLITE_INDEX_CONSTRAINT_GT || c->op == SQLITE_INDEX_CONSTRAINT_GE) {
                if (use[2] < 0) use[2] = i;
            } else if (c->op == SQLITE_INDEX_CONSTRAINT_LT || c->op == SQLITE_INDEX_CONSTRAINT_LE) {
                if (use[3] < 0) use[3] = i;
            }
        }
    }
    int idx = 0, arg = 0;
    char ops[5] = "----";
    for (int b = 0; b < 4; b++) {
        if (use[b] < 0) continue;
        idx |= 1 << b;
        info->aConstraintUsage[use[b]].argvIndex = ++arg;
        info->aConstraintUsage[use[b]].omit = 0; /* SQLite checks it again */
        ops[b] = (char)info->aConstraint[use[b]].op;
    }
    info->idxNum = idx;
    /* Whether each bound is strict, for xFilter. */
    info->idxStr = sqlite3_mprintf("%c%c", ops[2] == SQLITE_INDEX_CONSTRAINT_GT ? 'x' : 'i',
                                   ops[3] == SQLITE_INDEX_CONSTRAINT_LT ? 'x' : 'i');
    info->needToFreeIdxStr = 1;
    if (idx & F_ID_EQ) {
        info->estimatedCost = 1;
        info->estimatedRows = 1;
        info->idxFlags = SQLITE_INDEX_SCAN_UNIQUE;
    } else if ((idx & F_ID_LO) && (idx & F_ID_HI)) {
        info->estimatedCost = 1e3;
        info->estimatedRows = 1000;
    } else if (idx & (F_ID_LO | F_ID_HI)) {
        info->estimatedCost = 1e6;
        info->estimatedRows = 1000000;
    } else if (idx & F_TRACE) {
        info->estimatedCost = 2e6;
        info->estimatedRows = 2000000;
    } else {
        info->estimatedCost = 1e8;
        info->estimatedRows = 100000000;
    }
    /* Rows come in key order: over every trace in a ranged table, within one
     * trace in a keyed one. */
    if (info->nOrderBy == 1 && info->aOrderBy[0].iColumn == C_ID && !info->aOrderBy[0].desc &&
        (!KEYED(((FilesVtab *)vt)->desc) || (idx & F_TRACE)))
        info->orderByConsumed = 1;
    return SQLITE_OK;
}

static void unmap_set(Set *s) {
    for (int j = 0; j < MAX_COLS; j++) {
        if (s->cols[j].map) munmap(s->cols[j].map, s->cols[j].map_len);
        memset(&s->cols[j], 0, sizeof s->cols[j]);
    }
    s->mapped = 0;
}

static void unref_list(SetList *l) {
    if (!l || --l->refs > 0) return;
    for (int i = 0; i < l->nsets; i++) {
        unmap_set(&l->sets[i]);
        sqlite3_free(l->sets[i].dir);
    }
    sqlite3_free(l->sets);
    sqlite3_free(l);
}

/* After a cursor that visited many rows: the pages it brought into this
 * process go back to the page cache (the mappings stay), so that a scan does
 * not leave a server's worker holding hundreds of MB. */
#define KEEP_PAGES_ROWS 65536

static void give_back_pages(SetList *l) {
#ifdef MADV_DONTNEED
    for (int i = 0; i < l->nsets; i++)
        for (int j = 0; j < MAX_COLS; j++)
            if (l->sets[i].cols[j].map)
                madvise(l->sets[i].cols[j].map, l->sets[i].cols[j].map_len, MADV_DONTNEED);
#else
    (void)l;
#endif
}

static int files_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out) {
    FilesCursor *c = sqlite3_malloc(sizeof *c);
    if (!c) return SQLITE_NOMEM;
    memset(c, 0, sizeof *c);
    *out = &c->base;
    return SQLITE_OK;
}

static int files_close(sqlite3_vtab_cursor *cur) {
    FilesCursor *c = (FilesCursor *)cur;
    if (c->list && c->visited > KEEP_PAGES_ROWS) give_back_pages(c->list);
    unref_list(c->list);
    sqlite3_free(c);
    return SQLITE_OK;
}

/* The directory of the database file (with its slash), or "" in memory. */
static char *db_dir(sqlite3 *db) {
    const char *f = sqlite3_db_filename(db, "main");
    if (!f || !*f) return sqlite3_mprintf("");
    const char *slash = strrchr(f, '/');
    return slash ? sqlite3_mprintf("%.*s", (int)(slash - f + 1), f) : sqlite3_mprintf("");
}

/* Read the list of traces kept in files into a new SetList (one reference). */
static int read_list(FilesVtab *vt, SetList **out) {
    SetList *c = sqlite3_malloc(sizeof *c);
    if (!c) return SQLITE_NOMEM;
    memset(c, 0, sizeof *c);
    c->refs = 1;
    *out = c;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(vt->db, vt->desc->sets_sql, -1, &st, NULL) != SQLITE_OK) {
        /* No such table: a database made before interval files. */
        sqlite3_finalize(st);
        return SQLITE_OK;
    }
    char *base = db_dir(vt->db);
    if (!base) {
        sqlite3_finalize(st);
        return SQLITE_NOMEM;
    }
    int cap = 0, rc;
    sqlite3_int64 row0 = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (c->nsets == cap) {
            cap = cap ? 2 * cap : 8;
            Set *grown = sqlite3_realloc64(c->sets, (sqlite3_uint64)cap * sizeof *grown);
            if (!grown) {
                rc = SQLITE_NOMEM;
                break;
            }
            c->sets = grown;
        }
        Set *s = &c->sets[c->nsets];
        memset(s, 0, sizeof *s);
        s->trace_id = sqlite3_column_int64(st, 0);
        s->first_id = sqlite3_column_int64(st, 1);
        s->last_id = sqlite3_column_int64(st, 2);
        s->base = sqlite3_column_int64(st, 3);
        s->rows = sqlite3_column_int64(st, 5);
        s->row0 = row0;
        row0 += s->rows > 0 ? s->rows : 0;
        const char *d = (const char *)sqlite3_column_text(st, 4);
        const char *prefix = (const char *)sqlite3_column_text(st, 6);
        s->dir = sqlite3_mprintf("%s%s/%s", d && d[0] == '/' ? "" : base, d ? d : "",
                                 prefix ? prefix : "");
        if (!s->dir) {
            rc = SQLITE_NOMEM;
            break;
        }
        c->nsets++;
    }
    sqlite3_free(base);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return rc == SQLITE_ROW ? SQLITE_ERROR : rc;
    return SQLITE_OK;
}

/* The cursor's listing, read when its statement first filters it (a
 * statement sees one snapshot). Between statements the connection keeps the
 * listing last read, with its files' mappings, while the database is the
 * same: its data version (SQLITE_FCNTL_DATA_VERSION: another connection's
 * commit, or this one's) and this connection's count of changed rows (its
 * own writes not yet committed) unchanged. Inside a write transaction the
 * listing is read afresh and not kept: a rollback changes neither count. */
static int take_list(FilesCursor *c) {
    if (c->list) return SQLITE_OK;
    FilesVtab *vt = (FilesVtab *)c->base.pVtab;
    unsigned int version = 0;
    int keep = sqlite3_txn_state(vt->db, "main") != SQLITE_TXN_WRITE &&
               sqlite3_file_control(vt->db, "main", SQLITE_FCNTL_DATA_VERSION, &version)
               == SQLITE_OK;
    sqlite3_int64 changes = sqlite3_total_changes64(vt->db);
    if (keep && vt->list && vt->version == version && vt->changes == changes) {
        c->list = vt->list;
        c->list->refs++;
    } else {
        SetList *fresh = NULL;
        int rc = read_list(vt, &fresh);
        if (rc != SQLITE_OK) {
            unref_list(fresh);
            return rc;
        }
        if (keep) {
            unref_list(vt->list);
            vt->list = fresh; /* the connection's reference */
            fresh->refs++;
            vt->version = version;
            vt->changes = changes;
        }
        c->list = fresh;
    }
    c->sets = c->list->sets;
    c->nsets = c->list->nsets;
    return SQLITE_OK;
}

/* Map one column file; NULL on success, else why not. */
static const char *map_column(const char *path, sqlite3_int64 rows, Column *col) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return strerror(errno);
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size < 16) {
        close(fd);
        return "not a .npy file";
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return strerror(errno);
    col->map = map;
    col->map_len = (size_t)st.st_size;
    const unsigned char *b = map;
    if (memcmp(b, "\x93NUMPY", 6) != 0) return "not a .npy file";
    size_t hlen, start;
    if (b[6] == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        start = 10;
    } else if (b[6] == 2 || b[6] == 3) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        start = 12;
    } else {
        return "unknown .npy version";
    }
    if (start + hlen > col->map_len) return "truncated header";
    /* The header is a Python dict literal: {'descr': '<i4', 'fortran_order': False, 'shape': (N,), } */
    char head[512];
    size_t n = hlen < sizeof head - 1 ? hlen : sizeof head - 1;
    memcpy(head, b + start, n);
    head[n] = 0;
    const char *d = strstr(head, "'descr': '");
    if (!d) return "no descr";
    d += 10;
    if (!((d[0] == '<' || d[0] == '|') && d[1] == 'i' && (d[2] == '1' || d[2] == '2' ||
                                                        d[2] == '4' || d[2] == '8') && d[3] == '\''))
        return "not little-endian signed integers";
    col->width = d[2] - '0';
    if (!strstr(head, "'fortran_order': False")) return "Fortran order";
    const char *sh = strstr(head, "'shape': (");
    if (!sh) return "no shape";
    char *end;
    long long len = strtoll(sh + 10, &end, 10);
    if (end == sh + 10 || (*end != ',' && *end != ')') || (*end == ',' && end[1] != ')'))
        return "not one dimension";
    if (len != rows) return "wrong number of rows";
    if (start + hlen + (size_t)rows * (size_t)col->width > col->map_len) return "truncated data";
    col->data = b + start + hlen;
    return NULL;
}

/* Map set s's column j's file (when first read: a statement maps only the
 * columns it reads, a point lookup of one column one file). */
static int map_col(FilesCursor *c, Set *s, int j) {
    const TableDesc *desc = ((FilesVtab *)c->base.pVtab)->desc;
    char *path = sqlite3_mprintf("%s%s.npy", s->dir, desc->file[j]);
    if (!path) return SQLITE_NOMEM;
    const char *why = map_column(path, s->rows, &s->cols[j]);
    if (why) {
        char tid[32];
        snprintf(tid, sizeof tid, "%lld", (long long)s->trace_id);
        sqlite3_free(c->base.pVtab->zErrMsg);
        c->base.pVtab->zErrMsg = sqlite3_mprintf(
            "trace %s's %s cannot be read from %s: %s", tid, desc->label, path, why);
        sqlite3_free(path);
        if (s->cols[j].map) munmap(s->cols[j].map, s->cols[j].map_len);
        memset(&s->cols[j], 0, sizeof s->cols[j]);
        return SQLITE_ERROR;
    }
    sqlite3_free(path);
    return SQLITE_OK;
}

static sqlite3_int64 value_at(const Column *col, sqlite3_int64 r) {
    const unsigned char *p = col->data + (size_t)r * (size_t)col->width;
    switch (col->width) {
    case 1: return (int8_t)p[0];
    case 2: { int16_t v; memcpy(&v, p, 2); return v; }
    case 4: { int32_t v; memcpy(&v, p, 4); return v; }
    default: { int64_t v; memcpy(&v, p, 8); return v; }
    }
}

/* The first row of set s whose key is at least k (keyed tables: a bisection
 * of the key file, mapped first). */
static int first_row_from(FilesCursor *c, Set *s, sqlite3_int64 k, sqlite3_int64 *out) {
    if (!s->cols[C_ID].data) {
        int rc = map_col(c, s, C_ID);
        if (rc != SQLITE_OK) return rc;
    }
    sqlite3_int64 l = 0, h = s->rows;
    while (l < h) {
        sqlite3_int64 m = l + (h - l) / 2;
        if (value_at(&s->cols[C_ID], m) < k) l = m + 1;
        else h = m;
    }
    *out = l;
    return SQLITE_OK;
}

/* Move to the first wanted row of set c->cur or a later one. */
static int seek(FilesCursor *c) {
    const TableDesc *desc = ((FilesVtab *)c->base.pVtab)->desc;
    int keyed = KEYED(desc);
    for (; c->cur < c->nsets; c->cur++) {
        Set *s = &c->sets[c->cur];
        if (c->has_trace && s->trace_id != c->trace_id) {
            /* Keyed sets are in trace order: past the trace, none is left. */
            if (keyed && s->trace_id > c->trace_id) break;
            continue;
        }
        /* Ranged sets are in id order over every trace, keyed ones within a trace. */
        if (s->first_id > c->hi && (!keyed || c->has_trace)) break;
        if (s->rows <= 0 || s->last_id < c->lo || s->first_id > c->hi) continue;
        if (!keyed) {
            c->row = c->lo > s->first_id ? c->lo - s->first_id : 0;
            c->end = (c->hi < s->last_id ? c->hi - s->first_id : s->last_id - s->first_id) + 1;
        } else {
            int rc = first_row_from(c, s, c->lo, &c->row);
            if (rc == SQLITE_OK) {
                if (c->hi == INT64_MAX) c->end = s->rows;
                else rc = first_row_from(c, s, c->hi + 1, &c->end);
            }
            if (rc != SQLITE_OK) return rc;
        }
        if (c->row < c->end) return SQLITE_OK;
    }
    c->cur = c->nsets;
    return SQLITE_OK;
}

/* A bound from a constraint's value: *ok = 0 when it is not a number. */
static sqlite3_int64 bound(sqlite3_value *v, int lower, int strict, int *ok) {
    *ok = 1;
    int t = sqlite3_value_numeric_type(v);
    if (t == SQLITE_INTEGER) {
        sqlite3_int64 x = sqlite3_value_int64(v);
        if (!strict) return x;
        if (lower) return x == INT64_MAX ? x : x + 1;
        return x == INT64_MIN ? x : x - 1;
    }
    if (t == SQLITE_FLOAT) {
        double x = sqlite3_value_double(v);
        if (x != x) { *ok = 0; return 0; } /* NaN */
        if (x >= 9.2e18) return INT64_MAX;
        if (x <= -9.2e18) return INT64_MIN;
        sqlite3_int64 f = (sqlite3_int64)x;
        if ((double)f > x) f--; /* floor */
        if (lower) return (double)f == x ? (strict ? f + 1 : f) : f + 1;
        return (double)f == x ? (strict ? f - 1 : f) : f;
    }
    *ok = 0; /* text, blob, NULL: no narrowing (SQLite filters) */
    return 0;
}

static int files_filter(sqlite3_vtab_cursor *cur, int idx, const char *idx_str, int argc,
                        sqlite3_value **argv) {
    FilesCursor *c = (FilesCursor *)cur;
    int rc = take_list(c);
    if (rc != SQLITE_OK) return rc;
    sqlite3_int64 lo = INT64_MIN, hi = INT64_MAX;
    int a = 0, ok;
    c->has_trace = 0;
    if (idx & F_TRACE) {
        sqlite3_value *v = argv[a++];
        if (sqlite3_value_numeric_type(v) == SQLITE_INTEGER) {
            c->has_trace = 1;
            c->trace_id = sqlite3_value_int64(v);
        } else if (sqlite3_value_type(v) == SQLITE_NULL) {
            lo = 1, hi = 0; /* = NULL matches nothing */
        }
    }
    int strict_lo = idx_str && idx_str[0] == 'x', strict_hi = idx_str && idx_str[1] == 'x';
    if (idx & F_ID_EQ) {
        sqlite3_value *v = argv[a++];
        int t = sqlite3_value_numeric_type(v);
        if (t == SQLITE_INTEGER) {
            sqlite3_int64 x = sqlite3_value_int64(v);
            if (x > lo) lo = x;
            if (x < hi) hi = x;
        } else if (t == SQLITE_FLOAT) {
            double x = sqlite3_value_double(v);
            sqlite3_int64 f = (sqlite3_int64)x;
            if ((double)f != x) lo = 1, hi = 0; /* no integer id equals it */
            else {
                if (f > lo) lo = f;
                if (f < hi) hi = f;
            }
        } else if (sqlite3_value_type(v) == SQLITE_NULL) {
            lo = 1, hi = 0;
        }
    }
    if (idx & F_ID_LO) {
        sqlite3_int64 x = bound(argv[a++], 1, strict_lo, &ok);
        if (ok && x > lo) lo = x;
    }
    if (idx & F_ID_HI) {
        sqlite3_int64 x = bound(argv[a++], 0, strict_hi, &ok);
        if (ok && x < hi) hi = x;
    }
    c->lo = lo;
    c->hi = hi;
    c->cur = 0;
    if (lo > hi) {
        c->cur = c->nsets;
        return SQLITE_OK;
    }
    /* The first set that can hold a wanted row: ranged sets are in first_id
     * order (the first ending at lo or later), keyed ones in trace order. */
    int keyed = KEYED(((FilesVtab *)c->base.pVtab)->desc);
    if (!keyed || c->has_trace) {
        int l = 0, h = c->nsets;
        while (l < h) {
            int m = l + (h - l) / 2;
            const Set *s = &c->sets[m];
            if (keyed ? s->trace_id < c->trace_id : s->last_id < lo) l = m + 1;
            else h = m;
        }
        c->cur = l;
    }
    return seek(c);
}

static int files_eof(sqlite3_vtab_cursor *cur) {
    const FilesCursor *c = (const FilesCursor *)cur;
    return c->cur >= c->nsets;
}

static int files_next(sqlite3_vtab_cursor *cur) {
    FilesCursor *c = (FilesCursor *)cur;
    c->visited++;
    if (++c->row < c->end) return SQLITE_OK;
    c->cur++;
    return seek(c);
}

static int files_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int j) {
    FilesCursor *c = (FilesCursor *)cur;
    const TableDesc *desc = ((const FilesVtab *)cur->pVtab)->desc;
    Set *s = &c->sets[c->cur];
    if (j == C_TRACE) {
        sqlite3_result_int64(ctx, s->trace_id);
        return SQLITE_OK;
    }
    if (j < 0 || j >= desc->ncols) return SQLITE_OK;
    if (j == C_ID && !KEYED(desc)) {
        sqlite3_result_int64(ctx, s->first_id + c->row);
        return SQLITE_OK;
    }
    if (desc->how[j] == ALWAYS_NULL) {
        sqlite3_result_null(ctx);
        return SQLITE_OK;
    }
    if (!s->cols[j].data) {
        int rc = map_col(c, s, j);
        if (rc != SQLITE_OK) {
            sqlite3_result_error(ctx, cur->pVtab->zErrMsg ? cur->pVtab->zErrMsg : "", -1);
            return rc;
        }
    }
    const Column *col = &s->cols[j];
    sqlite3_int64 v = value_at(col, c->row);
    switch (desc->how[j]) {
    case PLUS_BASE: sqlite3_result_int64(ctx, v + s->base); break;
    case NULL_IF_NEG:
        if (v == -1) sqlite3_result_null(ctx);
        else sqlite3_result_int64(ctx, v);
        break;
    case NULL_IF_MIN:
        if (v == (col->width == 8 ? INT64_MIN : -((sqlite3_int64)1 << (8 * col->width - 1))))
            sqlite3_result_null(ctx);
        else
            sqlite3_result_int64(ctx, v);
        break;
    case TEXT_CODE:
        if (v >= 0 && v < desc->ntexts)
            sqlite3_result_text(ctx, desc->texts[v], -1, SQLITE_STATIC);
        else
            sqlite3_result_null(ctx);
        break;
    default: sqlite3_result_int64(ctx, v);
    }
    return SQLITE_OK;
}

/* Ranged tables: the id. Keyed ones: the row's place among every set's rows
 * (keys repeat from trace to trace; a rowid must not). */
static int files_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *rowid) {
    const FilesCursor *c = (const FilesCursor *)cur;
    const Set *s = &c->sets[c->cur];
    *rowid = KEYED(((const FilesVtab *)cur->pVtab)->desc) ? s->row0 + c->row
                                                         : s->first_id + c->row;
    return SQLITE_OK;
}

static sqlite3_module files_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only */
    .xConnect = files_connect,
    .xBestIndex = files_best_index,
    .xDisconnect = files_disconnect,
    .xDestroy = NULL,
    .xOpen = files_open,
    .xClose = files_close,
    .xFilter = files_filter,
    .xNext = files_next,
    .xEof = files_eof,
    .xColumn = files_column,
    .xRowid = files_rowid,
};

static int files_entry(sqlite3 *db, const char **errmsg, const void *api) {
    for (size_t i = 0; i < sizeof TABLES / sizeof TABLES[0]; i++)
        (void)sqlite3_create_module_v2(db, TABLES[i]->name, &files_module, (void *)TABLES[i],
                                       NULL);
    return SQLITE_OK;
}

static PyObject *register_entry(PyObject *self, PyObject *noargs) {
    int rc = sqlite3_auto_extension((void (*)(void))files_entry); /* no-op when registered */
    if (rc != SQLITE_OK) {
        PyErr_Format(PyExc_RuntimeError, "sqlite3_auto_extension: %s", sqlite3_errstr(rc));
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"register", register_entry, METH_NOARGS,
     "register(): every SQLite connection opened from now on gets gmpscope_intervals"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_intervalfiles",
    "Intervals read by SQL from their column files (see ingest/store/interval_files.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__intervalfiles(void) { return PyModule_Create(&module); }
