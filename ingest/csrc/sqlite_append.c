/* gmpscope's appender: rows appended to a rowid table straight through
 * SQLite's b-tree layer, compiled into gmpscope's own SQLite library
 * (tools/sqlite_lib.py builds this file, which includes the amalgamation,
 * so the b-tree functions it calls are SQLite's own static ones).
 *
 *   gmpscope_appender_open(db, table, ncol, names, nlit, lit_names, lit_values, &app, err, nerr)
 *   gmpscope_appender_rows(app, nrow, stride, values, nulls, texts, text_lengths)
 *   gmpscope_appender_close(app)
 *
 * Why: a trace load appends millions of small all-integer rows. Through a
 * prepared INSERT each row runs ~25 byte-code instructions (bind, copy, NOT
 * NULL checks, MakeRecord, NewRowid, Insert) before SQLite's b-tree insert;
 * here the record is made in one loop and handed to sqlite3BtreeInsert, as
 * OP_NewRowid and OP_Insert would (the cursor at the table's last row, an
 * append). 2 M interval rows: 0.13-0.17 us a row against 0.61-0.78, and the
 * database file is byte for byte the one the INSERT makes (docs/ingest.md).
 *
 * It is used only where it does exactly what the INSERT would: an ordinary
 * rowid table in "main" with no index, CHECK constraint, trigger, generated
 * column, AUTOINCREMENT or STRICT typing, no foreign key to check, no update
 * or pre-update hook and no authorizer, every column given except the rowid
 * alias (whose values SQLite assigns: last rowid + 1), integer values only
 * in INTEGER or NUMERIC columns and texts only in TEXT or BLOB ones (so no
 * affinity converts a value), a UTF-8 database, inside a write transaction,
 * with the schema the connection has read. A NULL in a NOT NULL column fails
 * as INSERT OR FAIL's does (whatever the column's own conflict clause: the
 * statement's overrides it), keeping the rows before it. Otherwise open()
 * answers SQLITE_MISUSE with the reason, and the caller binds through an
 * INSERT OR FAIL. */
#include "sqlite3.c"

/* An index the rows' entries are appended to: its key columns are integers
 * (caller columns or literals) in ascending order, so the entries of rows
 * whose keys grow sort after each other. */
#define MAX_INDEXES 8
#define MAX_KEY 16

typedef struct {
    Index *idx;
    BtCursor *cur;
    KeyInfo *key;
    int nkey;            /* key columns */
    int field[MAX_KEY];  /* the table column (record field) of each */
    int unique;
    int have_prev;       /* prev: the last entry's key and rowid */
    i64 prev[MAX_KEY + 1];
} IndexTarget;

struct gmpscope_appender {
    sqlite3 *db;
    Table *tab;
    BtCursor *cur;
    int nindex;
    IndexTarget index[MAX_INDEXES];
    int nfield;     /* fields in a record: the table's columns */
    int ncol;       /* caller's columns */
    int *field_col; /* record field -> caller column, -1: NULL (rowid alias), -2-k: literal k */
    i64 *lit;
    int format4;    /* schema format 4+: 0 and 1 take no bytes */
    u8 *buf;
    i64 nbuf;
};
typedef struct gmpscope_appender gmpscope_appender;

/* gmpscope_appender_rows stopped before a row its indexes cannot take by
 * appending (*done rows appended). */
#define GMPSCOPE_APPEND_STOPPED 1000

/* The interface's version: the binder uses the appender only when it is
 * the one it was built for. */
SQLITE_API int gmpscope_appender_version(void) { return 2; }

/* SQLite's serial type for integer v and its size in bytes (OP_MakeRecord's). */
static inline __attribute__((always_inline)) u32 int_serial_type(i64 v, int format4,
                                                                 u32 *len) {
    u64 u = v < 0 ? ~(u64)v : (u64)v;
    if (u <= 127) {
        if ((v & 1) == v && format4) {
            *len = 0;
            return 8 + (u32)u;
        }
        *len = 1;
        return 1;
    }
    if (u <= 32767) { *len = 2; return 2; }
    if (u <= 8388607) { *len = 3; return 3; }
    if (u <= 2147483647) { *len = 4; return 4; }
    if (u <= 140737488355327LL) { *len = 6; return 5; }
    *len = 8;
    return 6;
}

static int refuse(char *err, int nerr, const char *why, const char *table) {
    if (err && nerr > 0) sqlite3_snprintf(nerr, err, "%s: %s", table, why);
    return SQLITE_MISUSE;
}

/* Whether the temp schema has a trigger on main's table tab. */
static int temp_triggers_on(sqlite3 *db, Table *tab) {
    if (db->nDb < 2 || db->aDb[1].pSchema == 0) return 0;
    HashElem *e;
    for (e = sqliteHashFirst(&db->aDb[1].pSchema->trigHash); e; e = sqliteHashNext(e)) {
        Trigger *t = (Trigger *)sqliteHashData(e);
        if (t->pTabSchema == tab->pSchema && sqlite3StrICmp(t->table, tab->zName) == 0) return 1;
    }
    return 0;
}

static int check_table(sqlite3 *db, Table *tab, char *err, int nerr, const char *name) {
    if (!IsOrdinaryTable(tab) || !HasRowid(tab)) return refuse(err, nerr, "not a rowid table", name);
    if (tab->pCheck) return refuse(err, nerr, "has a CHECK constraint", name);
    if (tab->tabFlags & (TF_HasGenerated | TF_Autoincrement | TF_Strict))
        return refuse(err, nerr, "has generated columns, AUTOINCREMENT or STRICT", name);
    if (tab->pTrigger || temp_triggers_on(db, tab)) return refuse(err, nerr, "has a trigger", name);
    if ((db->flags & SQLITE_ForeignKeys) && (tab->u.tab.pFKey || sqlite3FkReferences(tab)))
        return refuse(err, nerr, "has foreign keys to check", name);
    if (db->xUpdateCallback) return refuse(err, nerr, "an update hook is set", name);
#ifdef SQLITE_ENABLE_PREUPDATE_HOOK
    if (db->xPreUpdateCallback) return refuse(err, nerr, "a pre-update hook is set", name);
#endif
#ifndef SQLITE_OMIT_AUTHORIZATION
    if (db->xAuth) return refuse(err, nerr, "an authorizer is set", name);
#endif
    if (ENC(db) != SQLITE_UTF8) return refuse(err, nerr, "not a UTF-8 database", name);
    return SQLITE_OK;
}

/* Which caller column or literal each field of the record comes from. */
static int map_fields(gmpscope_appender *a, int ncol, const char *const *names,
                      const int *is_text, int nlit, const char *const *lit_names,
                      char *err, int nerr) {
    Table *tab = a->tab;
    int given = 0;
    for (int f = 0; f < tab->nCol; f++) {
        Column *col = &tab->aCol[f];
        int from = -1, found = 0;
        for (int j = 0; j < ncol; j++)
            if (sqlite3StrICmp(names[j], col->zCnName) == 0) { from = j; found++; }
        for (int k = 0; k < nlit; k++)
            if (sqlite3StrICmp(lit_names[k], col->zCnName) == 0) { from = -2 - k; found++; }
        if (f == tab->iPKey) {
            if (found) return refuse(err, nerr, "the rowid is given", tab->zName);
            a->field_col[f] = -1;
            continue;
        }
        if (found != 1) return refuse(err, nerr, "a column is missing or given twice", tab->zName);
        int text = from >= 0 && is_text[from];
        char aff = col->affinity;
        if (text ? (aff != SQLITE_AFF_TEXT && aff != SQLITE_AFF_BLOB)
                 : (aff != SQLITE_AFF_INTEGER && aff != SQLITE_AFF_NUMERIC))
            return refuse(err, nerr, "a column's affinity would convert its values", tab->zName);
        a->field_col[f] = from;
        given++;
    }
    if (given != ncol + nlit) return refuse(err, nerr, "a column is not in the table", tab->zName);
    return SQLITE_OK;
}

/* The table's indexes, when the appender can keep them: plain ascending
 * BINARY keys of integer columns (given as integers), at most MAX_KEY. */
static int map_indexes(gmpscope_appender *a, const int *is_text, char *err, int nerr) {
    Table *tab = a->tab;
    for (Index *idx = tab->pIndex; idx; idx = idx->pNext) {
        if (a->nindex == MAX_INDEXES) return refuse(err, nerr, "has too many indexes", tab->zName);
        IndexTarget *t = &a->index[a->nindex];
        if (idx->pPartIdxWhere || idx->aColExpr || idx->nKeyCol > MAX_KEY ||
            idx->nColumn != idx->nKeyCol + 1)
            return refuse(err, nerr, "has a partial, expression or wide index", tab->zName);
        for (int i = 0; i < idx->nKeyCol; i++) {
            int c = idx->aiColumn[i];
            if (c < 0 || c == tab->iPKey || idx->aSortOrder[i] ||
                sqlite3StrICmp(idx->azColl[i], sqlite3StrBINARY) != 0)
                return refuse(err, nerr, "has an index the appender cannot keep", tab->zName);
            int from = a->field_col[c];
            char aff = tab->aCol[c].affinity;
            if ((from >= 0 && is_text[from]) ||
                (aff != SQLITE_AFF_INTEGER && aff != SQLITE_AFF_NUMERIC))
                return refuse(err, nerr, "has an index on a column not of integers",
                              tab->zName);
            t->field[i] = c;
        }
        t->idx = idx;
        t->nkey = idx->nKeyCol;
        t->unique = IsUniqueIndex(idx);
        /* As sqlite3KeyInfoOfIndex makes it (BINARY, ascending). */
        t->key = idx->uniqNotNull ? sqlite3KeyInfoAlloc(a->db, idx->nKeyCol, 1)
                                  : sqlite3KeyInfoAlloc(a->db, idx->nColumn, 0);
        t->cur = sqlite3MallocZero(sqlite3BtreeCursorSize());
        a->nindex++;
        if (!t->key || !t->cur) return SQLITE_NOMEM_BKPT;
    }
    return SQLITE_OK;
}

static void free_indexes(gmpscope_appender *a) {
    for (int i = 0; i < a->nindex; i++) {
        IndexTarget *t = &a->index[i];
        if (t->cur && t->cur->pBtree) sqlite3BtreeCloseCursor(t->cur);
        sqlite3_free(t->cur);
        sqlite3KeyInfoUnref(t->key);
    }
    a->nindex = 0;
}

/* Close an appender's cursors and free it (the db's mutex and b-trees held;
 * also a half-opened one: a cursor is closed only if it was opened). */
static void appender_free(gmpscope_appender *a) {
    free_indexes(a);
    if (a->cur && a->cur->pBtree) sqlite3BtreeCloseCursor(a->cur);
    sqlite3_free(a->cur);
    sqlite3_free(a->field_col);
    sqlite3_free(a->lit);
    sqlite3_free(a->buf);
    sqlite3_free(a);
}

/* The last entry's key and rowid of index t into t->prev (have_prev 0 when
 * the index is empty); SQLITE_MISUSE when an entry holds other than integers
 * (and NULLs, which sort first: taken as the smallest integer). */
static int read_last_entry(IndexTarget *t) {
    int empty = 0;
    int rc = sqlite3BtreeLast(t->cur, &empty);
    if (rc || empty) {
        t->have_prev = 0;
        return rc;
    }
    u32 size = sqlite3BtreePayloadSize(t->cur), have = 0;
    const u8 *rec = sqlite3BtreePayloadFetch(t->cur, &have);
    if (have < size) return SQLITE_MISUSE; /* an overflowing entry: not ours */
    u32 nhdr, type, at;
    at = getVarint32(rec, nhdr);
    const u8 *body = rec + nhdr;
    for (int f = 0; f <= t->nkey; f++) {
        if (at >= nhdr) return SQLITE_MISUSE;
        at += getVarint32(rec + at, type);
        i64 v;
        if (type == 0) {
            v = SMALLEST_INT64;
        } else if (type == 8 || type == 9) {
            v = type - 8;
        } else if (type >= 1 && type <= 6) {
            u32 n = sqlite3VdbeSerialTypeLen(type);
            if (body + n > rec + size) return SQLITE_MISUSE;
            v = (body[0] & 0x80) ? -1 : 0;
            for (u32 b = 0; b < n; b++) v = (i64)(((u64)v << 8) | body[b]);
            body += n;
        } else {
            return SQLITE_MISUSE;
        }
        t->prev[f] = v;
    }
    t->have_prev = 1;
    return SQLITE_OK;
}

/* Prepare to append rows to main.table, the caller's columns `names` (texts
 * where is_text[j]) plus literal integer columns. SQLITE_MISUSE (err says
 * why) when the appender cannot do exactly what an INSERT would. */
SQLITE_API int gmpscope_appender_open(sqlite3 *db, const char *table, int ncol,
                                      const char *const *names, const int *is_text, int nlit,
                                      const char *const *lit_names, const sqlite3_int64 *lit_values,
                                      gmpscope_appender **out, char *err, int nerr) {
    int rc = SQLITE_OK;
    gmpscope_appender *a = 0;
    *out = 0;
    if (err && nerr > 0) err[0] = 0;
    if (!sqlite3SafetyCheckOk(db)) return SQLITE_MISUSE_BKPT;
    sqlite3_mutex_enter(db->mutex);
    sqlite3BtreeEnterAll(db);
    Btree *bt = db->aDb[0].pBt;
    Table *tab = 0;
    u32 cookie = 0;
    if (bt == 0 || sqlite3BtreeTxnState(bt) != SQLITE_TXN_WRITE) {
        rc = refuse(err, nerr, "no write transaction open", table);
        goto done;
    }
    if (!DbHasProperty(db, 0, DB_SchemaLoaded)) { /* as preparing a statement would */
        char *msg = 0;
        int init = sqlite3Init(db, &msg);
        sqlite3DbFree(db, msg);
        if (init != SQLITE_OK) {
            rc = refuse(err, nerr, "the schema cannot be read", table);
            goto done;
        }
    }
    tab = sqlite3FindTable(db, table, "main");
    if (tab == 0) {
        rc = refuse(err, nerr, "no such table in main", table);
        goto done;
    }
    sqlite3BtreeGetMeta(bt, BTREE_SCHEMA_VERSION, &cookie);
    if ((int)cookie != tab->pSchema->schema_cookie) {
        rc = refuse(err, nerr, "the schema changed", table);
        goto done;
    }
    rc = check_table(db, tab, err, nerr, table);
    if (rc) goto done;
    a = sqlite3MallocZero(sizeof *a);
    if (a) {
        a->field_col = sqlite3MallocZero(sizeof(int) * (tab->nCol + 1));
        a->lit = sqlite3MallocZero(sizeof(i64) * (nlit + 1));
        a->cur = sqlite3MallocZero(sqlite3BtreeCursorSize());
    }
    if (!a || !a->field_col || !a->lit || !a->cur) {
        rc = SQLITE_NOMEM_BKPT;
        goto done;
    }
    a->db = db;
    a->tab = tab;
    a->nfield = tab->nCol;
    a->ncol = ncol;
    a->format4 = tab->pSchema->file_format >= 4;
    for (int k = 0; k < nlit; k++) a->lit[k] = lit_values[k];
    rc = map_fields(a, ncol, names, is_text, nlit, lit_names, err, nerr);
    if (rc) goto done;
    rc = map_indexes(a, is_text, err, nerr);
    if (rc) goto done;
    sqlite3BtreeCursorZero(a->cur);
    rc = sqlite3BtreeCursor(bt, tab->tnum, BTREE_WRCSR, 0, a->cur);
    for (int i = 0; rc == SQLITE_OK && i < a->nindex; i++) {
        IndexTarget *t = &a->index[i];
        sqlite3BtreeCursorZero(t->cur);
        rc = sqlite3BtreeCursor(bt, t->idx->tnum, BTREE_WRCSR, t->key, t->cur);
        if (rc == SQLITE_OK) rc = read_last_entry(t);
        if (rc == SQLITE_MISUSE) refuse(err, nerr, "an index holds other than integers", table);
    }
done:
    if (rc && a) {
        appender_free(a);
        a = 0;
    }
    sqlite3BtreeLeaveAll(db);
    sqlite3_mutex_leave(db->mutex);
    *out = a;
    return rc;
}

/* Where each field of a row comes from, for one call's rows. */
typedef struct {
    int kind;               /* FIELD_NULL, FIELD_INT, FIELD_LITERAL, FIELD_TEXT */
    const i64 *v;           /* the caller column's values (texts: indexes) */
    const unsigned char *null;
    const char *const *txt;
    const i64 *txtlen;
    u32 lit_type, lit_len;  /* a literal's serial type and size */
    i64 lit;
    int notnull;
} FieldSource;

#define FIELD_NULL 0
#define FIELD_INT 1
#define FIELD_LITERAL 2
#define FIELD_TEXT 3

/* Integer v as serial type t's big-endian bytes at p (t in 1..6). */
static inline __attribute__((always_inline)) void put_int(u8 *p, u32 t, i64 v) {
    u64 u = (u64)v;
    switch (t) {
    case 1: p[0] = (u8)u; break;
    case 2: { u16 x = __builtin_bswap16((u16)u); memcpy(p, &x, 2); break; }
    case 3: p[0] = (u8)(u >> 16); p[1] = (u8)(u >> 8); p[2] = (u8)u; break;
    case 4: { u32 x = __builtin_bswap32((u32)u); memcpy(p, &x, 4); break; }
    case 5: { u64 x = __builtin_bswap64(u << 16); memcpy(p, &x, 6); break; }
    default: { u64 x = __builtin_bswap64(u); memcpy(p, &x, 8); break; }
    }
}

static int grow(gmpscope_appender *a, i64 need) {
    if (need <= a->nbuf) return SQLITE_OK;
    i64 size = need < 4096 ? 4096 : need;
    u8 *nb = sqlite3_realloc64(a->buf, (u64)size);
    if (!nb) return SQLITE_NOMEM_BKPT;
    a->buf = nb;
    a->nbuf = size;
    return SQLITE_OK;
}

/* Row r's record in a->buf (its size in *size): OP_MakeRecord's format. */
static int make_record(gmpscope_appender *a, const FieldSource *src, int has_text, int r,
                       i64 *size) {
    sqlite3 *db = a->db;
    int nfield = a->nfield;
    if (!has_text) {
        /* Integers and NULLs only: every serial type is one header byte, and
         * the header (at most 126 fields + its size byte) fits one byte too. */
        i64 nhdr = nfield + 1;
        int rc = grow(a, nhdr + 8 * (i64)nfield);
        if (rc) return rc;
        u8 *hdr = a->buf, *body = a->buf + nhdr;
        hdr[0] = (u8)nhdr;
        for (int f = 0; f < nfield; f++) {
            const FieldSource *s = &src[f];
            u32 t, len;
            if (s->kind == FIELD_LITERAL) {
                t = s->lit_type;
                if (s->lit_len) put_int(body, t, s->lit);
                body += s->lit_len;
            } else if (s->kind == FIELD_NULL || (s->null && s->null[r])) {
                if (s->notnull) goto not_null;
                t = 0;
            } else {
                i64 v = s->v[r];
                t = int_serial_type(v, a->format4, &len);
                if (len) put_int(body, t, v);
                body += len;
            }
            hdr[1 + f] = (u8)t;
        }
        *size = body - a->buf;
        return SQLITE_OK;
    }
    u32 types[64];
    u32 *type = nfield <= 64 ? types : sqlite3_malloc64(sizeof(u32) * (u64)nfield);
    if (!type) return SQLITE_NOMEM_BKPT;
    i64 nhdr = 0, ndata = 0;
    int rc = SQLITE_OK;
    for (int f = 0; f < nfield; f++) {
        const FieldSource *s = &src[f];
        u32 len = 0;
        if (s->kind == FIELD_LITERAL) {
            type[f] = s->lit_type;
            len = s->lit_len;
        } else if (s->kind == FIELD_NULL || (s->null && s->null[r])) {
            if (s->notnull) {
                if (type != types) sqlite3_free(type);
                goto not_null;
            }
            type[f] = 0;
        } else if (s->kind == FIELD_TEXT) {
            i64 n = s->txtlen[s->v[r]];
            type[f] = (u32)(n * 2 + 13);
            len = (u32)n;
        } else {
            type[f] = int_serial_type(s->v[r], a->format4, &len);
        }
        nhdr += sqlite3VarintLen(type[f]);
        ndata += len;
    }
    if (nhdr <= 126) {
        nhdr += 1;
    } else {
        int nv = sqlite3VarintLen((u64)nhdr);
        nhdr += nv;
        if (nv < sqlite3VarintLen((u64)nhdr)) nhdr++;
    }
    if (nhdr + ndata > db->aLimit[SQLITE_LIMIT_LENGTH]) {
        rc = SQLITE_TOOBIG;
        sqlite3ErrorWithMsg(db, rc, "string or blob too big");
    }
    if (!rc) rc = grow(a, nhdr + ndata);
    if (!rc) {
        u8 *hdr = a->buf, *body = a->buf + nhdr;
        hdr += sqlite3PutVarint(hdr, (u64)nhdr);
        for (int f = 0; f < nfield; f++) {
            const FieldSource *s = &src[f];
            u32 t = type[f];
            hdr += sqlite3PutVarint(hdr, t);
            if (t == 0 || t == 8 || t == 9) continue;
            if (t >= 13) {
                u32 n = (t - 13) / 2;
                if (n) memcpy(body, s->txt[s->v[r]], n);
                body += n;
            } else {
                i64 v = s->kind == FIELD_LITERAL ? s->lit : s->v[r];
                put_int(body, t, v);
                body += sqlite3VdbeSerialTypeLen(t);
            }
        }
        *size = nhdr + ndata;
    }
    if (type != types) sqlite3_free(type);
    return rc;
not_null:
    for (int f = 0; f < nfield; f++) {
        if (src[f].notnull && (src[f].kind == FIELD_NULL || (src[f].null && src[f].null[r]))) {
            sqlite3ErrorWithMsg(db, SQLITE_CONSTRAINT_NOTNULL, "NOT NULL constraint failed: %s.%s",
                                a->tab->zName, a->tab->aCol[f].zCnName);
            break;
        }
    }
    return SQLITE_CONSTRAINT_NOTNULL;
}

/* Integer record field f of row r (a literal, a caller column; NULL is
 * refused for key columns by their NOT NULL or taken as the smallest). */
static i64 field_int(const FieldSource *s, int r) {
    if (s->kind == FIELD_LITERAL) return s->lit;
    if (s->kind == FIELD_NULL || (s->null && s->null[r])) return SMALLEST_INT64;
    return s->v[r];
}

/* Whether row r's entry (key, rowid) sorts after index t's last; if so it
 * becomes the last. */
static int key_follows(gmpscope_appender *a, IndexTarget *t, const FieldSource *src, int r,
                       i64 rowid) {
    i64 key[MAX_KEY + 1];
    int cmp = t->have_prev ? 0 : 1;
    for (int i = 0; i < t->nkey; i++) {
        key[i] = field_int(&src[t->field[i]], r);
        if (cmp == 0 && key[i] != t->prev[i]) cmp = key[i] > t->prev[i] ? 1 : -1;
    }
    key[t->nkey] = rowid;
    if (cmp == 0) /* the same key: a unique index refuses it, another orders by rowid */
        cmp = t->unique ? -1 : (rowid > t->prev[t->nkey] ? 1 : -1);
    if (cmp < 0) return 0;
    memcpy(t->prev, key, sizeof(i64) * (size_t)(t->nkey + 1));
    t->have_prev = 1;
    (void)a;
    return 1;
}

/* Row r's entry in index t: its key's integers and the rowid (an index
 * record: OP_MakeRecord's format), appended after the last entry. */
static int append_entry(gmpscope_appender *a, IndexTarget *t, const FieldSource *src, int r,
                        i64 rowid) {
    u8 rec[1 + (MAX_KEY + 1) * 9];
    int nfield = t->nkey + 1;
    u8 *body = rec + 1 + nfield;
    rec[0] = (u8)(1 + nfield);
    for (int f = 0; f < nfield; f++) {
        const FieldSource *s = f < t->nkey ? &src[t->field[f]] : 0;
        u32 type, len = 0;
        if (s && (s->kind == FIELD_NULL || (s->null && s->null[r]))) {
            type = 0;
        } else {
            i64 v = s ? field_int(s, r) : rowid;
            type = int_serial_type(v, a->format4, &len);
            if (len) put_int(body, type, v);
            body += len;
        }
        rec[1 + f] = (u8)type;
    }
    int empty = 0;
    int rc = sqlite3BtreeLast(t->cur, &empty);
    if (rc) return rc;
    BtreePayload x;
    memset(&x, 0, sizeof x);
    x.pKey = rec;
    x.nKey = body - rec;
    /* The cursor on the last entry, which the new one follows (-1). */
    return sqlite3BtreeInsert(t->cur, &x, BTREE_APPEND, empty ? 0 : -1);
}

/* Append nrow rows. Caller column j of row r: NULL where
 * nulls[j * stride + r], else values[j * stride + r], which for a text
 * column (texts[j] not NULL) is an index into texts[j] / text_lengths[j].
 * Rowids: the table's last + 1, as an INSERT assigns them. */
SQLITE_API int gmpscope_appender_rows(gmpscope_appender *a, int nrow, int stride,
                                      const sqlite3_int64 *values, const unsigned char *nulls,
                                      const char *const *const *texts,
                                      const sqlite3_int64 *const *text_lengths, int *done) {
    sqlite3 *db = a->db;
    /* has_text: the general record path (texts, or too many fields for
     * one-byte headers). */
    int rc = SQLITE_OK, has_text = a->nfield > 126;
    FieldSource sources[64];
    FieldSource *src = a->nfield <= 64 ? sources
                                       : sqlite3_malloc64(sizeof(FieldSource) * (u64)a->nfield);
    if (!src) return SQLITE_NOMEM_BKPT;
    for (int f = 0; f < a->nfield; f++) {
        FieldSource *s = &src[f];
        int j = a->field_col[f];
        memset(s, 0, sizeof *s);
        s->notnull = a->tab->aCol[f].notNull != OE_None && f != a->tab->iPKey;
        if (j == -1) {
            s->kind = FIELD_NULL;
        } else if (j <= -2) {
            s->kind = FIELD_LITERAL;
            s->lit = a->lit[-2 - j];
            s->lit_type = int_serial_type(s->lit, a->format4, &s->lit_len);
        } else {
            s->kind = texts[j] ? FIELD_TEXT : FIELD_INT;
            s->v = values + (size_t)j * stride;
            /* No per-row test for a column without a NULL in these rows. */
            s->null = nulls + (size_t)j * stride;
            if (nrow > 0 && s->null[0] == 0 && memcmp(s->null, s->null + 1, (size_t)nrow - 1) == 0)
                s->null = 0;
            s->txt = texts[j];
            s->txtlen = text_lengths[j];
            has_text |= texts[j] != 0;
        }
    }
    sqlite3_mutex_enter(db->mutex);
    sqlite3BtreeEnterAll(db);
    if (sqlite3BtreeTxnState(db->aDb[0].pBt) != SQLITE_TXN_WRITE) {
        rc = SQLITE_MISUSE_BKPT;
        sqlite3ErrorWithMsg(db, rc, "%s: the write transaction ended", a->tab->zName);
        goto done;
    }
    *done = 0;
    for (int r = 0; r < nrow; r++) {
        i64 nbyte = 0;
        rc = make_record(a, src, has_text, r, &nbyte);
        if (rc) goto done; /* its message is set */
        /* As OP_NewRowid: the cursor at the table's last row (no seek when
         * it is there already); then OP_Insert's append. */
        int empty = 0;
        i64 rowid = 1;
        rc = sqlite3BtreeLast(a->cur, &empty);
        if (rc) break;
        if (!empty) {
            i64 last = sqlite3BtreeIntegerKey(a->cur);
            if (last >= LARGEST_INT64) {
                rc = SQLITE_FULL;
                sqlite3ErrorWithMsg(db, rc, "%s: no rowid left", a->tab->zName);
                goto done;
            }
            rowid = last + 1;
        }
        if (a->nindex) {
            /* Stop before a row whose entry would not sort after the index's
             * last (the caller inserts it and the rest through statements,
             * which seek, and fail on a duplicate of a unique key). */
            int stop = 0;
            for (int i = 0; i < a->nindex && !stop; i++)
                stop = !key_follows(a, &a->index[i], src, r, rowid);
            if (stop) {
                rc = GMPSCOPE_APPEND_STOPPED;
                goto done;
            }
            /* The entries first, then the row, as INSERT does (the pages
             * are allocated in the same order: the same file). */
            for (int i = 0; i < a->nindex && rc == SQLITE_OK; i++)
                rc = append_entry(a, &a->index[i], src, r, rowid);
            if (rc) break;
        }
        BtreePayload x;
        memset(&x, 0, sizeof x);
        x.nKey = rowid;
        x.pData = a->buf;
        x.nData = (int)nbyte;
        rc = sqlite3BtreeInsert(a->cur, &x, BTREE_APPEND, 0);
        if (rc) break;
        *done = r + 1;
    }
    if (rc) sqlite3Error(db, rc);
done:
    sqlite3BtreeLeaveAll(db);
    sqlite3_mutex_leave(db->mutex);
    if (src != sources) sqlite3_free(src);
    return rc;
}

SQLITE_API void gmpscope_appender_close(gmpscope_appender *a) {
    if (!a) return;
    sqlite3 *db = a->db;
    sqlite3_mutex_enter(db->mutex);
    sqlite3BtreeEnterAll(db);
    appender_free(a);
    sqlite3BtreeLeaveAll(db);
    sqlite3_mutex_leave(db->mutex);
}
