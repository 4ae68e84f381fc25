/* What an interval is, for the ingest's C helpers that walk the interval
 * order (intervalorder.c, summaries.c). */
#ifndef GMPSCOPE_INTERVALS_H
#define GMPSCOPE_INTERVALS_H

#include <Python.h>
#include <stdint.h>

/* The end of the interval that row k of the interval order begins: the next
 * row's ts (it is not the last of its resource), else the trace's last_ts;
 * never before its own ts. The caller has checked that order[k] and, when
 * not last, order[k + 1] are rows. */
static inline int64_t row_end(const int32_t *order, const int64_t *ts, Py_ssize_t k, int is_last,
                              int64_t last_ts)
{
    int64_t t = ts[order[k]];
    int64_t e = is_last ? last_ts : ts[order[k + 1]];
    return e > t ? e : t;
}

#endif
