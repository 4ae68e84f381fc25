/* Internal interface of the ordering state machine, shared by order.c
 * (procs and goroutines) and order_misc.c (everything else). */
#ifndef GMPSCOPE_ORDER_H
#define GMPSCOPE_ORDER_H

#include "dec.h"

enum { MUST_NOT, MAY, MUST };

#define LL(x) ((long long)(x))
#define ULL(x) ((unsigned long long)(x))
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        set_err(err, -1, __VA_ARGS__);                                                             \
        return -1;                                                                                 \
    } while (0)
#define NOMEM()                                                                                    \
    do {                                                                                           \
        d->nomem = 1;                                                                              \
        set_err(err, -1, "out of memory");                                                         \
        return -1;                                                                                 \
    } while (0)
/* Version-dependent event name; needs a `char namebuf[32]` in scope. */
#define NAME(typ) event_name(d->minor, (typ), namebuf, sizeof namebuf)

/* The goroutine (d->gs) or proc (d->ps) state of an id, NULL if unknown. */
RState *ord_find(Dec *d, U64Map *m, int64_t id);
/* The proc's state, or NULL with Go's "WHAT proc N found during EVENT" error. */
RState *ord_pstate(Dec *d, int64_t pid, int typ, const char *what, Err *err);
/* Go's checks of the (thread, proc, goroutine) context of an event. */
int ord_check_ctx(int64_t p, int64_t g, int64_t m, int rm, int rp, int rg, Err *err);
int ord_check_user(int64_t m, int64_t p, int64_t g, Err *err);
/* Queue c's head event in the context (m, p, g); -1 when out of memory. */
int ord_push(Dec *d, const Cursor *c, int64_t m, int64_t p, int64_t g);
int ord_advance_misc(Dec *d, Cursor *c, int64_t m, int64_t p, int64_t g, Err *err);

#endif
