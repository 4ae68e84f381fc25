/* Small building blocks for the fast decoder: growable buffers, an
 * open-addressing u64 -> u64 map and varint reading. Header-only so the
 * hot paths inline. */
#ifndef GMPSCOPE_UTIL_H
#define GMPSCOPE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ buffers */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} Buf;

/* Grow so that `extra` more bytes fit; 0 on success, -1 out of memory. */
static inline int buf_grow(Buf *b, size_t extra)
{
    if (extra <= b->cap - b->n)
        return 0;
    if (extra > ((size_t)1 << 40) - b->n)
        return -1;
    size_t need = b->n + extra;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    uint8_t *np = (uint8_t *)realloc(b->p, cap);
    if (!np)
        return -1;
    b->p = np;
    b->cap = cap;
    return 0;
}

static inline int buf_put(Buf *b, const void *src, size_t n)
{
    if (buf_grow(b, n))
        return -1;
    if (n <= 16) {
        /* Most puts are short strings: a call to memcpy costs more than this. */
        const uint8_t *s = (const uint8_t *)src;
        uint8_t *d = b->p + b->n;
        for (size_t i = 0; i < n; i++)
            d[i] = s[i];
    } else {
        memcpy(b->p + b->n, src, n);
    }
    b->n += n;
    return 0;
}

static inline void buf_free(Buf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

/* Typed vector helpers on top of Buf. */
#define VEC_LEN(b, T) ((b)->n / sizeof(T))
#define VEC_AT(b, T, i) (((T *)(b)->p)[i])

/* Append s to b as valid UTF-8: every maximal ill-formed subsequence becomes
 * U+FFFD, exactly as Python's bytes.decode("utf-8", "replace") does. */
static inline int buf_put_utf8(Buf *b, const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n && s[i] < 0x80)
        i++;
    if (i == n)
        return buf_put(b, s, n);
    if (buf_put(b, s, i))
        return -1;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            if (buf_put(b, &s[i], 1))
                return -1;
            i++;
            continue;
        }
        int need;
        uint8_t lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf)
            need = 1;
        else if (c == 0xe0)
            need = 2, lo = 0xa0;
        else if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef)
            need = 2;
        else if (c == 0xed)
            need = 2, hi = 0x9f;
        else if (c == 0xf0)
            need = 3, lo = 0x90;
        else if (c >= 0xf1 && c <= 0xf3)
            need = 3;
        else if (c == 0xf4)
            need = 3, hi = 0x8f;
        else
            need = 0;
        size_t j = i + 1;
        int k = 0;
        while (need && k < need && j < n && s[j] >= lo && s[j] <= hi) {
            j++;
            k++;
            lo = 0x80;
            hi = 0xbf;
        }
        if (need && k == need) {
            if (buf_put(b, &s[i], j - i))
                return -1;
        } else if (buf_put(b, "\xef\xbf\xbd", 3)) {
            return -1;
        }
        i = j;
    }
    return 0;
}

/* ------------------------------------------------------------ hashing */

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static inline uint64_t hash_bytes(const uint8_t *p, size_t n, uint64_t h)
{
    h ^= 0xcbf29ce484222325ULL + n;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return mix64(h);
}

/* Open addressing, linear probing, backward-shift deletion. */
typedef struct {
    uint64_t *keys;
    uint64_t *vals;
    uint8_t *used;
    size_t cap, len; /* cap is a power of two or 0 */
} U64Map;

static inline void map_free(U64Map *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
    memset(m, 0, sizeof(*m));
}

static inline void map_clear(U64Map *m)
{
    if (m->len) {
        memset(m->used, 0, m->cap);
        m->len = 0;
    }
}

/* Index of key's slot, or of the empty slot where it would go. */
static inline size_t map_slot(const U64Map *m, uint64_t key)
{
    size_t mask = m->cap - 1;
    size_t i = (size_t)mix64(key) & mask;
    while (m->used[i] && m->keys[i] != key)
        i = (i + 1) & mask;
    return i;
}

static inline uint64_t *map_get(const U64Map *m, uint64_t key)
{
    if (!m->len)
        return NULL;
    size_t i = map_slot(m, key);
    return m->used[i] ? &m->vals[i] : NULL;
}

static int map_rehash(U64Map *m, size_t ncap)
{
    uint64_t *k = (uint64_t *)malloc(ncap * sizeof(uint64_t));
    uint64_t *v = (uint64_t *)malloc(ncap * sizeof(uint64_t));
    uint8_t *u = (uint8_t *)calloc(ncap, 1);
    if (!k || !v || !u) {
        free(k);
        free(v);
        free(u);
        return -1;
    }
    U64Map nm = {k, v, u, ncap, 0};
    for (size_t i = 0; i < m->cap; i++) {
        if (m->used[i]) {
            size_t j = map_slot(&nm, m->keys[i]);
            nm.used[j] = 1;
            nm.keys[j] = m->keys[i];
            nm.vals[j] = m->vals[i];
            nm.len++;
        }
    }
    map_free(m);
    *m = nm;
    return 0;
}

/* Insert or overwrite; 0 ok, -1 out of memory. */
static inline int map_put(U64Map *m, uint64_t key, uint64_t val)
{
    if ((m->len + 1) * 2 > m->cap) {
        if (map_rehash(m, m->cap ? m->cap * 2 : 16))
            return -1;
    }
    size_t i = map_slot(m, key);
    if (!m->used[i]) {
        m->used[i] = 1;
        m->keys[i] = key;
        m->len++;
    }
    m->vals[i] = val;
    return 0;
}

/* Remove key if present; returns 1 when removed. */
static inline int map_del(U64Map *m, uint64_t key)
{
    if (!m->len)
        return 0;
    size_t mask = m->cap - 1;
    size_t i = map_slot(m, key);
    if (!m->used[i])
        return 0;
    m->used[i] = 0;
    m->len--;
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->used[j])
            break;
        size_t home = (size_t)mix64(m->keys[j]) & mask;
        /* Move j back into the hole at i unless its home lies in (i, j]. */
        int in_range = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
        if (!in_range) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            m->used[i] = 1;
            m->used[j] = 0;
            i = j;
        }
    }
    return 1;
}

/* ------------------------------------------------------------ varints */

/* Go's binary.Uvarint over [*pos, end): 0 ok, -1 input ends, -2 overflow. */
static inline int uvarint(const uint8_t *d, size_t *pos, size_t end, uint64_t *out)
{
    uint64_t x = 0;
    unsigned s = 0;
    size_t p = *pos;
    for (int i = 0; p < end; i++) {
        uint8_t b = d[p++];
        if (i == 9 && b > 1)
            return -2;
        if (b < 0x80) {
            *out = x | ((uint64_t)b << s);
            *pos = p;
            return 0;
        }
        x |= (uint64_t)(b & 0x7f) << s;
        s += 7;
        if (i + 1 == 10)
            return -2;
    }
    return -1;
}

#endif
