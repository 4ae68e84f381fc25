/* The output tables' columns: set up, the events' groups included, and freed
 * (out.c writes their rows). */
#include "dec.h"

static int col_init(Col *c, uint8_t type, uint8_t nullable)
{
    c->type = type;
    c->nullable = nullable;
    if (type == COL_I64) {
        if (buf_grow(&c->data, CHUNK * 8))
            return -1;
    } else if (type == COL_DICT) {
        if (buf_grow(&c->data, CHUNK * 4))
            return -1;
    } else {
        if (buf_grow(&c->offsets, (CHUNK + 1) * 4) || buf_grow(&c->data, 1024))
            return -1;
        *(int32_t *)c->offsets.p = 0;
        c->offsets.n = 4;
    }
    if (nullable) {
        if (buf_grow(&c->valid, CHUNK / 8))
            return -1;
        memset(c->valid.p, 0, CHUNK / 8);
    }
    return 0;
}

/* Set up a column whose buffers are empty (possibly with capacity: the
 * caller may hand it reused blocks). */
int col_reinit(Col *c)
{
    return col_init(c, c->type, c->nullable);
}

static int table_init(Table *t, int ncols, const char *types, const char *nullable)
{
    t->ncols = ncols;
    t->rows = 0;
    for (int i = 0; i < ncols; i++)
        if (col_init(&t->cols[i], types[i] == 's' ? COL_STR : types[i] == 'd' ? COL_DICT : COL_I64,
                     nullable[i] == 'n'))
            return -1;
    return 0;
}

/* Column types: i = int64-sized, s = string, d = dictionary index; n = nullable. */
static const char E_TYPES[] = "idiiiiisisdisiissiiii", E_NULLABLE[] = "-------nnnnnnnnnnnnnn";

/* Group g's table: the events columns group_at[g] keeps, in their order. */
static int group_init(Dec *d, int g)
{
    Table *t = &d->gt[g];
    t->ncols = 0;
    t->rows = 0;
    for (int w = 0; w < E_COLS; w++) {
        if (d->group_at[g][w] < 0)
            continue;
        Col *c = &t->cols[t->ncols++];
        /* name, category, message: indices into d->estrings */
        int sid = w == 7 || w == 15 || w == 16;
        if (col_init(c, sid || E_TYPES[w] == 'd' ? COL_DICT : E_TYPES[w] == 's' ? COL_STR : COL_I64,
                     E_NULLABLE[w] == 'n'))
            return -1;
    }
    return 0;
}

void tables_init(Dec *d)
{
    int32_t zero = 0;
    if (table_init(&d->tt, T_COLS, "ididddiiii", "----------") ||
        table_init(&d->et, E_COLS, E_TYPES, E_NULLABLE) ||
        table_init(&d->st, S_COLS, "ii", "--") ||
        buf_put(&d->reasons.off, &zero, 4) || buf_put(&d->reasons.off, &zero, 4) ||
        buf_put(&d->estrings.off, &zero, 4))
        d->nomem = 1;
    for (int g = 0; g < d->ngroups; g++)
        if (group_init(d, g))
            d->nomem = 1;
}

void tables_free(Dec *d)
{
    Table *ts[3 + MAX_GROUPS] = {&d->tt, &d->et, &d->st};
    for (int g = 0; g < d->ngroups; g++)
        ts[3 + g] = &d->gt[g];
    for (int k = 0; k < 3 + d->ngroups; k++)
        for (int i = 0; i < E_COLS; i++) {
            buf_free(&ts[k]->cols[i].data);
            buf_free(&ts[k]->cols[i].offsets);
            buf_free(&ts[k]->cols[i].valid);
        }
    StrDict *ds[2] = {&d->reasons, &d->estrings};
    for (int k = 0; k < 2; k++) {
        buf_free(&ds[k]->bytes);
        buf_free(&ds[k]->off);
        buf_free(&ds[k]->map);
    }
}
