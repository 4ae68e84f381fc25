/* Global interning of strings and stacks by content (model.StackTable
 * semantics: stack ids 1.. in first-use order, 0 for no stack or an empty
 * one; Go's own ids restart every generation). */
#include "dec.h"

static int grow_tab(uint32_t **tab, size_t *cap, size_t len, uint64_t (*hash)(Dec *, uint32_t),
                    Dec *d)
{
    if ((len + 1) * 2 <= *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 1024;
    uint32_t *nt = (uint32_t *)calloc(ncap, sizeof(uint32_t));
    if (!nt)
        return -1;
    for (size_t i = 0; i < *cap; i++) {
        uint32_t id = (*tab)[i];
        if (!id)
            continue;
        size_t j = (size_t)hash(d, id) & (ncap - 1);
        while (nt[j])
            j = (j + 1) & (ncap - 1);
        nt[j] = id;
    }
    free(*tab);
    *tab = nt;
    *cap = ncap;
    return 0;
}

static uint64_t gstr_hash(Dec *d, uint32_t id)
{
    uint64_t *o = &VEC_AT(&d->gstroff, uint64_t, id - 1);
    return hash_bytes(d->gstr.p + o[0], (size_t)(o[1] - o[0]), 0);
}

/* Global id (0..) of a string by content; -1 when out of memory. */
int64_t intern_string(Dec *d, const uint8_t *p, size_t n)
{
    if (!d->gstroff.n) {
        uint64_t z = 0;
        if (buf_put(&d->gstroff, &z, sizeof z))
            return -1;
    }
    if (grow_tab(&d->gstr_tab, &d->gstr_cap, d->gstr_len, gstr_hash, d))
        return -1;
    uint64_t h = hash_bytes(p, n, 0);
    size_t mask = d->gstr_cap - 1, j = (size_t)h & mask;
    for (;;) {
        uint32_t id = d->gstr_tab[j];
        if (!id)
            break;
        uint64_t *o = &VEC_AT(&d->gstroff, uint64_t, id - 1);
        if (o[1] - o[0] == n && memcmp(d->gstr.p + o[0], p, n) == 0)
            return id - 1;
        j = (j + 1) & mask;
    }
    int64_t id = (int64_t)VEC_LEN(&d->gstroff, uint64_t) - 1;
    uint64_t end = d->gstr.n + n;
    if (buf_put(&d->gstr, p, n) || buf_put(&d->gstroff, &end, sizeof end))
        return -1;
    d->gstr_tab[j] = (uint32_t)(id + 1);
    d->gstr_len++;
    return id;
}

static uint64_t frames_hash(const Frame *f, size_t n)
{
    return hash_bytes((const uint8_t *)f, n * sizeof(Frame), 1);
}

static uint64_t stk_hash(Dec *d, uint32_t id)
{
    uint32_t *o = &VEC_AT(&d->stackoff, uint32_t, id - 1);
    return frames_hash(&VEC_AT(&d->frames, Frame, o[0]), o[1] - o[0]);
}

/* Global id of the generation's stack sid (0 for none). *missing is set
 * when the generation has no such stack. Returns -1 when out of memory. */
int resolve_stack(Dec *d, uint64_t sid, uint64_t *gid, int *missing)
{
    *missing = 0;
    *gid = 0;
    if (sid == 0)
        return 0;
    Gen *g = &d->gen;
    if (sid < g->res_dense_n && g->res_dense[sid]) {
        *gid = g->res_dense[sid] - 1;
        return 0;
    }
    uint64_t *cached = map_get(&g->resolved, sid);
    if (cached) {
        *gid = *cached;
        return 0;
    }
    uint64_t *si = map_get(&g->stacks, sid);
    if (!si) {
        *missing = 1;
        return 0;
    }
    StackRec *rec = &VEC_AT(&g->stackrecs, StackRec, *si);
    d->tmpframes.n = 0;
    for (uint32_t k = 0; k < rec->n; k++) {
        uint64_t pc = VEC_AT(&g->stackpcs, uint64_t, rec->first + k);
        PcInfo *pi = &VEC_AT(&g->pcinfo, PcInfo, *map_get(&g->pcs, pc));
        Frame f;
        memset(&f, 0, sizeof f);
        f.pc = pc;
        f.line = pi->line;
        uint64_t ids[2] = {pi->fn, pi->fl};
        int64_t gids[2];
        for (int i = 0; i < 2; i++) {
            const uint8_t *s = (const uint8_t *)"";
            size_t n = 0;
            uint64_t *v = ids[i] ? map_get(&g->strings, ids[i]) : NULL;
            if (v) {
                StrRef *r = &VEC_AT(&g->strs, StrRef, *v);
                s = d->data + r->off;
                n = r->len;
            }
            gids[i] = intern_string(d, s, n);
            if (gids[i] < 0)
                return -1;
        }
        f.fn = (uint32_t)gids[0];
        f.fl = (uint32_t)gids[1];
        if (buf_put(&d->tmpframes, &f, sizeof f))
            return -1;
    }
    size_t n = VEC_LEN(&d->tmpframes, Frame);
    uint64_t id = 0;
    if (n) {
        if (!d->stackoff.n) {
            uint32_t z = 0;
            if (buf_put(&d->stackoff, &z, sizeof z))
                return -1;
        }
        if (grow_tab(&d->stk_tab, &d->stk_cap, d->stk_len, stk_hash, d))
            return -1;
        const Frame *fr = (const Frame *)d->tmpframes.p;
        size_t mask = d->stk_cap - 1, j = (size_t)frames_hash(fr, n) & mask;
        for (;;) {
            uint32_t cand = d->stk_tab[j];
            if (!cand)
                break;
            uint32_t *o = &VEC_AT(&d->stackoff, uint32_t, cand - 1);
            if (o[1] - o[0] == n && memcmp(&VEC_AT(&d->frames, Frame, o[0]), fr, n * sizeof(Frame)) == 0) {
                id = cand;
                break;
            }
            j = (j + 1) & mask;
        }
        if (!id) {
            id = VEC_LEN(&d->stackoff, uint32_t);
            if (buf_put(&d->frames, fr, n * sizeof(Frame)))
                return -1;
            uint32_t end = (uint32_t)VEC_LEN(&d->frames, Frame);
            if (buf_put(&d->stackoff, &end, sizeof end))
                return -1;
            d->stk_tab[j] = (uint32_t)id;
            d->stk_len++;
        }
    }
    if (sid < g->res_dense_n && id < UINT32_MAX)
        g->res_dense[sid] = (uint32_t)(id + 1);
    else if (map_put(&g->resolved, sid, id))
        return -1;
    *gid = id;
    return 0;
}

void intern_free(Dec *d)
{
    buf_free(&d->gstr);
    buf_free(&d->gstroff);
    free(d->gstr_tab);
    d->gstr_tab = NULL;
    d->gstr_cap = d->gstr_len = 0;
    buf_free(&d->frames);
    buf_free(&d->stackoff);
    free(d->stk_tab);
    d->stk_tab = NULL;
    d->stk_cap = d->stk_len = 0;
    buf_free(&d->tmpframes);
}

