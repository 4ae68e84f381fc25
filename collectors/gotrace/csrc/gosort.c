/* Go's unstable sort (slices.SortFunc, pattern-defeating quicksort) on int64
 * keys, mirroring v2/gosort.py: when keys tie, the order Go leaves them in
 * decides which event comes first, so the same moves must be made. Sorts a
 * key array together with a permutation array. */
#include "dec.h"

typedef struct {
    int64_t *k;
    uint32_t *v;
} S;

static inline void sw(S *s, size_t i, size_t j)
{
    int64_t tk = s->k[i];
    s->k[i] = s->k[j];
    s->k[j] = tk;
    uint32_t tv = s->v[i];
    s->v[i] = s->v[j];
    s->v[j] = tv;
}

static inline int less(S *s, size_t i, size_t j) { return s->k[i] < s->k[j]; }

static void insertion(S *s, size_t a, size_t b)
{
    for (size_t i = a + 1; i < b; i++)
        for (size_t j = i; j > a && less(s, j, j - 1); j--)
            sw(s, j, j - 1);
}

static void sift(S *s, size_t lo, size_t hi, size_t first)
{
    size_t root = lo;
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= hi)
            return;
        if (child + 1 < hi && less(s, first + child, first + child + 1))
            child++;
        if (!less(s, first + root, first + child))
            return;
        sw(s, first + root, first + child);
        root = child;
    }
}

static void heapsort_(S *s, size_t a, size_t b)
{
    size_t n = b - a;
    for (size_t i = (n - 1) / 2 + 1; i-- > 0;)
        sift(s, i, n, a);
    for (size_t i = n; i-- > 0;) {
        sw(s, a, a + i);
        sift(s, 0, i, a);
    }
}

static size_t partition(S *s, size_t a, size_t b, size_t pivot, int *already)
{
    sw(s, a, pivot);
    long long i = (long long)a + 1, j = (long long)b - 1;
    while (i <= j && less(s, (size_t)i, a))
        i++;
    while (i <= j && !less(s, (size_t)j, a))
        j--;
    if (i > j) {
        sw(s, (size_t)j, a);
        *already = 1;
        return (size_t)j;
    }
    sw(s, (size_t)i, (size_t)j);
    i++;
    j--;
    for (;;) {
        while (i <= j && less(s, (size_t)i, a))
            i++;
        while (i <= j && !less(s, (size_t)j, a))
            j--;
        if (i > j)
            break;
        sw(s, (size_t)i, (size_t)j);
        i++;
        j--;
    }
    sw(s, (size_t)j, a);
    *already = 0;
    return (size_t)j;
}

static size_t partition_equal(S *s, size_t a, size_t b, size_t pivot)
{
    sw(s, a, pivot);
    long long i = (long long)a + 1, j = (long long)b - 1;
    for (;;) {
        while (i <= j && !less(s, a, (size_t)i))
            i++;
        while (i <= j && less(s, a, (size_t)j))
            j--;
        if (i > j)
            return (size_t)i;
        sw(s, (size_t)i, (size_t)j);
        i++;
        j--;
    }
}

static int partial_insertion(S *s, size_t a, size_t b)
{
    size_t i = a + 1;
    for (int step = 0; step < 5; step++) {
        while (i < b && !less(s, i, i - 1))
            i++;
        if (i == b)
            return 1;
        if (b - a < 50)
            return 0;
        sw(s, i, i - 1);
        if (i - a >= 2)
            for (size_t j = i - 1; j >= 1 && less(s, j, j - 1); j--)
                sw(s, j, j - 1);
        if (b - i >= 2)
            for (size_t j = i + 1; j < b && less(s, j, j - 1); j++)
                sw(s, j, j - 1);
    }
    return 0;
}

static int bitlen(uint64_t n)
{
    int l = 0;
    while (n) {
        l++;
        n >>= 1;
    }
    return l;
}

static void break_patterns(S *s, size_t a, size_t b)
{
    size_t n = b - a;
    if (n < 8)
        return;
    uint64_t r = n;
    uint64_t mod = (uint64_t)1 << bitlen(n);
    size_t mid = a + (n / 4) * 2;
    for (size_t idx = mid - 1; idx <= mid + 1; idx++) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        uint64_t other = r & (mod - 1);
        if (other >= n)
            other -= n;
        sw(s, idx, a + (size_t)other);
    }
}

static void order2(S *s, size_t *x, size_t *y, int *swaps)
{
    if (less(s, *y, *x)) {
        (*swaps)++;
        size_t t = *x;
        *x = *y;
        *y = t;
    }
}

static size_t median(S *s, size_t x, size_t y, size_t z, int *swaps)
{
    order2(s, &x, &y, swaps);
    order2(s, &y, &z, swaps);
    order2(s, &x, &y, swaps);
    return y;
}

/* Returns the pivot; *hint 0 unknown, 1 increasing, 2 decreasing. */
static size_t choose_pivot(S *s, size_t a, size_t b, int *hint)
{
    size_t n = b - a;
    int swaps = 0;
    size_t i = a + n / 4, j = a + n / 4 * 2, k = a + n / 4 * 3;
    if (n >= 8) {
        if (n >= 50) {
            i = median(s, i - 1, i, i + 1, &swaps);
            j = median(s, j - 1, j, j + 1, &swaps);
            k = median(s, k - 1, k, k + 1, &swaps);
        }
        j = median(s, i, j, k, &swaps);
    }
    *hint = swaps == 0 ? 1 : swaps == 12 ? 2 : 0;
    return j;
}

static void pdq(S *s, size_t a, size_t b, int limit)
{
    int balanced = 1, partitioned = 1;
    for (;;) {
        size_t n = b - a;
        if (n <= 12) {
            insertion(s, a, b);
            return;
        }
        if (limit == 0) {
            heapsort_(s, a, b);
            return;
        }
        if (!balanced) {
            break_patterns(s, a, b);
            limit--;
        }
        int hint;
        size_t pivot = choose_pivot(s, a, b, &hint);
        if (hint == 2) {
            for (size_t i = a, j = b - 1; i < j; i++, j--)
                sw(s, i, j);
            pivot = (b - 1) - (pivot - a);
            hint = 1;
        }
        if (balanced && partitioned && hint == 1 && partial_insertion(s, a, b))
            return;
        if (a > 0 && !less(s, a - 1, pivot)) {
            a = partition_equal(s, a, b, pivot);
            continue;
        }
        size_t mid = partition(s, a, b, pivot, &partitioned);
        size_t left = mid - a, right = b - mid, threshold = n / 8;
        if (left < right) {
            balanced = left >= threshold;
            pdq(s, a, mid, limit);
            a = mid + 1;
        } else {
            balanced = right >= threshold;
            pdq(s, mid + 1, b, limit);
            b = mid;
        }
    }
}

/* Fill perm with the order Go's SortFunc leaves items with these keys in.
 * keys is clobbered. */
void go_sort_perm(int64_t *keys, uint32_t *perm, size_t n)
{
    for (size_t i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    S s = {keys, perm};
    if (n <= 12) {
        insertion(&s, 0, n); /* Go's insertion sort here is stable */
        return;
    }
    pdq(&s, 0, n, bitlen(n));
}
