/* Shared state of the fast new-family (Go 1.22+) decoder.
 *
 * The decoder mirrors collectors/gotrace/v2 (the pure-Python reference)
 * step for step: same generation reading, same ordering state machine, same
 * error offsets and messages. Instead of Event objects it appends rows to
 * column buffers (see out.c) that Python turns into Arrow arrays. */
#ifndef GMPSCOPE_DEC_H
#define GMPSCOPE_DEC_H

#include "util.h"

#define NONE_ID ((int64_t)-1)
#define NO_TASK UINT64_MAX
#define MAX_BATCH_SIZE (64u << 10)
#define MAX_STRING_SIZE (1u << 10)
#define MAX_FRAMES 128u
#define NUM_SPECS 137
#define MSG_CAP 4096
/* Rows per column chunk (a Parquet row group, as parquet_out writes them). */
#define CHUNK 65536

/* Wire event types. */
enum {
    EV_EVENT_BATCH = 1, EV_STACKS, EV_STACK, EV_STRINGS, EV_STRING, EV_CPU_SAMPLES,
    EV_CPU_SAMPLE, EV_FREQUENCY, EV_PROCS_CHANGE, EV_PROC_START, EV_PROC_STOP,
    EV_PROC_STEAL, EV_PROC_STATUS, EV_GO_CREATE, EV_GO_CREATE_SYSCALL, EV_GO_START,
    EV_GO_DESTROY, EV_GO_DESTROY_SYSCALL, EV_GO_STOP, EV_GO_BLOCK, EV_GO_UNBLOCK,
    EV_GO_SYSCALL_BEGIN, EV_GO_SYSCALL_END, EV_GO_SYSCALL_END_BLOCKED, EV_GO_STATUS,
    EV_STW_BEGIN, EV_STW_END, EV_GC_ACTIVE, EV_GC_BEGIN, EV_GC_END, EV_GC_SWEEP_ACTIVE,
    EV_GC_SWEEP_BEGIN, EV_GC_SWEEP_END, EV_GC_MARK_ASSIST_ACTIVE, EV_GC_MARK_ASSIST_BEGIN,
    EV_GC_MARK_ASSIST_END, EV_HEAP_ALLOC, EV_HEAP_GOAL, EV_GO_LABEL, EV_USER_TASK_BEGIN,
    EV_USER_TASK_END, EV_USER_REGION_BEGIN, EV_USER_REGION_END, EV_USER_LOG,
    EV_GO_SWITCH, EV_GO_SWITCH_DESTROY, EV_GO_CREATE_BLOCKED, EV_GO_STATUS_STACK,
    EV_EXPERIMENTAL_BATCH, EV_SYNC, EV_CLOCK_SNAPSHOT, EV_END_OF_GENERATION
};

/* Wire statuses and API states (same numbering as v2/specs.py). */
enum { GS_BAD, GS_RUNNABLE, GS_RUNNING, GS_SYSCALL, GS_WAITING };
enum { PS_BAD, PS_RUNNING, PS_IDLE, PS_SYSCALL, PS_SYSCALL_ABANDONED };
enum { GO_UNDETERMINED, GO_NOT_EXIST, GO_RUNNABLE, GO_RUNNING, GO_WAITING, GO_SYSCALL };
enum { PROC_UNDETERMINED, PROC_NOT_EXIST, PROC_RUNNING, PROC_IDLE };

typedef struct {
    const char *name;
    const char *args[6]; /* argument names; timed events start with "dt" */
    int8_t nargs;
    uint8_t timed;
    int8_t stacks[2]; /* arg positions (0 = dt) holding stack ids; first = event stack */
    int8_t nstacks;
    int8_t strings[2];
    int8_t nstrings;
    uint8_t start;
    uint8_t experimental;
} Spec;

extern Spec SPECS[NUM_SPECS];
extern int8_t TIMED_NARGS[256]; /* -1 out of range, -2 no timestamp */
void specs_init(void);
const char *event_name(int minor, int typ, char *tmp, size_t tmpcap);

/* A failure: byte offset (-1 none) and message. */
typedef struct {
    int set;
    int table_eof; /* a bare EOF before a table field (Go: the trace just ends) */
    int64_t off;
    char msg[MSG_CAP];
} Err;

/* ------------------------------------------------------------ generations */

typedef struct {
    uint64_t off;  /* file offset of the payload */
    uint64_t hdr;  /* file offset of the batch header */
    uint32_t size; /* payload size */
    uint32_t mi;   /* index of its thread in Gen.ms */
    int64_t m;
    uint64_t time;
    uint8_t exp;
    uint8_t eog;   /* an EndOfGeneration marker */
} CBatch;

typedef struct { uint64_t off; uint32_t len; } StrRef;
typedef struct { uint64_t fn, fl, line; } PcInfo;
typedef struct { uint64_t sid; uint32_t first, n; } StackRec;
typedef struct { int64_t t; int64_t m, p, g; uint64_t stk; } Sample;

typedef struct {
    uint64_t gen;
    int64_t start, end;
    Buf batches; /* CBatch of event batches, grouped by thread after finishing */
    Buf ms;      /* int64 thread ids in first-seen order */
    Buf mstart;  /* uint32 first batch index of each thread (after grouping) */
    U64Map mindex;
    Buf samples; /* Sample */
    uint64_t min_ts;
    double freq;
    uint64_t ticks_raw; /* the frequency event's value */
    int has_clock;
    uint64_t snap_time, snap_mono, snap_sec, snap_nsec;
    U64Map strings; /* id -> index into strs */
    Buf strs;       /* StrRef */
    U64Map stacks;  /* id -> index into stackrecs */
    Buf stackrecs;  /* StackRec, in read order */
    Buf stackpcs;   /* uint64 pcs */
    U64Map pcs;     /* pc -> index into pcinfo */
    Buf pcinfo;     /* PcInfo */
    U64Map resolved; /* stack id -> global stack id */
    /* Dense lookups for small ids (the runtime numbers them 1, 2, ...):
     * index + 1 into strs / global stack id + 1, 0 when unknown. */
    uint32_t *str_dense;
    uint32_t *res_dense;
    size_t str_dense_n, res_dense_n;
    /* A name's global string id + 1 by its string id (str_dense_n of them),
     * 0 until first interned: each region, task or range event names one. */
    uint32_t *name_dense;
} Gen;

#define DENSE_MAX 65536
#define DENSE_IDS (1 << 20)

/* A batch framed by read_batch. */
typedef struct {
    CBatch b;
    uint64_t gen;
} Framed;

/* ------------------------------------------------------------ ordering */

typedef struct { uint16_t typ; uint64_t desc; } RangeRec;
typedef struct { uint64_t task; uint32_t name; } RegionRec; /* name: global string id */

typedef struct {
    int64_t id;
    uint8_t status;
    uint64_t sgen, seq;
    Buf regions; /* RegionRec */
    Buf ranges;  /* RangeRec */
} RState; /* a goroutine or a proc */

typedef struct { int64_t id, g, p; } MRec;

typedef struct {
    uint16_t typ;
    int64_t time;
    uint64_t a[4];
    int64_t m, p, g;
} QEv;

typedef struct {
    uint64_t parent;
    uint32_t name;
} TaskRec;

/* Cursor over one thread's batches. */
typedef struct {
    uint32_t mi;
    uint32_t bi, bend; /* batch index range in Gen.batches */
    uint32_t off;      /* offset inside the current batch payload */
    int64_t evoff;     /* file offset of the event at the head, -1 before the first */
    int64_t mrec;      /* index of the thread's MRec once known, else -1 */
    int64_t last;
    uint16_t typ;
    int64_t time;
    uint64_t a[4];
} Cursor;

/* ------------------------------------------------------------ output */

/* COL_DICT: int32 indices into a dictionary Python attaches (the column is
 * written to Parquet as dictionary pages without hashing every value). */
enum { COL_I64, COL_STR, COL_DICT };

typedef struct {
    uint8_t type;
    uint8_t nullable;
    Buf data;    /* int64 values, or string bytes */
    Buf offsets; /* int32 string offsets (n + 1 entries) */
    Buf valid;   /* LSB-first validity bitmap */
} Col;

#define T_COLS 10
#define E_COLS 21
#define S_COLS 2

typedef struct {
    int ncols;
    Col cols[E_COLS];
    int64_t rows;
} Table;

/* Kinds as in model.KINDS. */
enum { K_SYNC, K_METRIC, K_LABEL, K_STACK_SAMPLE, K_RANGE_BEGIN, K_RANGE_ACTIVE,
       K_RANGE_END, K_TASK_BEGIN, K_TASK_END, K_REGION_BEGIN, K_REGION_END, K_LOG,
       K_STATE_TRANSITION, K_EXPERIMENTAL, NKINDS };

/* Events split into groups (Decoder(groups=...)), at most this many. */
#define MAX_GROUPS 8

/* A string dictionary's cache of recent strings: 2^bits slots by address
 * (a generation's log messages, thousands, share few slots at 256). */
#define DICT_CACHE_BITS 12

/* A dictionary the decoder builds of the strings it writes as indices:
 * each distinct string once, as valid UTF-8. map: global string id
 * (intern.c) -> index + 1; cache: recent (bytes, length) -> index, to skip
 * the hashing, checked against the entry's bytes (a name may be made in a
 * buffer that is reused). */
typedef struct {
    Buf bytes; /* utf-8 */
    Buf off;   /* int32 offsets, entries + 1 */
    Buf map;   /* uint32 */
    struct { const uint8_t *p; size_t n; int32_t idx; } cache[1 << DICT_CACHE_BITS];
} StrDict;

/* ------------------------------------------------------------ decoder */

typedef struct Dec {
    const uint8_t *data;
    size_t len;
    int minor; /* 22, 23, 25, 26 */
    int nomem;

    /* reading */
    size_t pos;
    Gen gen;
    int have_gen;
    int done;
    Err read_err;   /* 1.26+: deferred reading error */
    Err spill_err;  /* <1.26: deferred reading error */
    int spill_err_sync;
    int have_spill;
    Framed spill;
    uint64_t completed;
    int64_t lost_from;
    Err fail;       /* the failure that stopped decoding */
    int finished;

    /* merging */
    Buf frontier;   /* Cursor */
    uint32_t si;    /* next sample */
    Buf samples;    /* Sample, sorted by time */
    int64_t last_ts;
    int64_t syncs;
    uint64_t ticks;

    /* ordering */
    U64Map gs;      /* goroutine id -> index into rstates */
    U64Map ps;      /* proc id -> index into rstates */
    uint32_t *gs_dense, *ps_dense; /* small id -> rstate index + 1 */
    size_t gs_dense_n, ps_dense_n;
    Buf rstates;    /* RState */
    Buf rfree;      /* uint32 free rstate indexes */
    U64Map mmap;    /* thread id -> index into mlist */
    Buf mlist;      /* MRec, insertion order */
    U64Map tasks;   /* task id -> index into taskrecs */
    Buf taskrecs;   /* TaskRec */
    Buf taskfree;   /* uint32 */
    uint64_t gc_seq;
    int gc_state;
    uint64_t initial_gen;
    Buf queue;      /* QEv ring */
    size_t qhead, qlen, qcap;

    /* interning */
    Buf gstr;       /* global string bytes */
    Buf gstroff;    /* uint64 offset per id, plus one */
    uint32_t *gstr_tab;
    size_t gstr_cap, gstr_len;
    Buf frames;     /* Frame records of all stacks */
    Buf stackoff;   /* uint32 first frame of each global stack (id-1), plus total */
    uint32_t *stk_tab;
    size_t stk_cap, stk_len;
    Buf tmpframes;

    /* output */
    Table tt, et, st;
    /* With groups, each event goes to its kind's group table instead of et
     * (a kind in no group is counted, not written): group g's table holds
     * the events columns whose bit is set in its mask, in their order;
     * group_at[g][w] is events column w's index in it, or -1. */
    int ngroups;
    int8_t kind_group[NKINDS];
    int8_t group_at[MAX_GROUPS][E_COLS];
    Table gt[MAX_GROUPS];
    /* Dictionary of transitions.reason, entry 0 the empty reason. */
    StrDict reasons;
    /* With groups: the events' names, log categories and messages, which
     * the group tables hold as indices into it (entries from 0; an empty
     * string is a null). */
    StrDict estrings;
    int bad_state;  /* a proc transition came from a bad status (state "Bad") */
    int64_t seq, ntrans;
    int64_t kinds[NKINDS];
    int64_t first_ts, last_out_ts;
    int have_first;
    int have_clock;
    int64_t clock[3];
} Dec;

typedef struct { uint64_t pc; uint32_t fn, fl; uint64_t line; } Frame;

/* Raw timestamp -> ns, truncating the float64 product as Go does. */
static inline int64_t ns_of(uint64_t t, double freq)
{
    double x = (double)t * freq;
    if (x < 9.223372036854775807e18)
        return (int64_t)x;
    return INT64_MIN; /* out of range or NaN, as amd64 converts it */
}

/* wire.c */
int read_batch(Dec *d, size_t pos, Framed *out, size_t *npos, Err *err);
int read_generation_spill(Dec *d, Err *err);
int read_generation_marked(Dec *d, int *eof, Err *err);
void gen_reset(Gen *g);
void gen_free(Gen *g);
int64_t count_generations(Dec *d, size_t pos);

/* order.c */
int order_advance(Dec *d, Cursor *c, int *ok, Err *err);
int queue_push(Dec *d, const QEv *q);
void order_free(Dec *d);

/* out.c */
void tables_init(Dec *d);
void tables_free(Dec *d);
int col_reinit(Col *c);
int emit_queued(Dec *d, const QEv *q, Err *err);
int emit_sync(Dec *d, int with_clock, int64_t t);
int emit_sample(Dec *d, const Sample *s, Err *err);
int64_t intern_string(Dec *d, const uint8_t *p, size_t n);
int resolve_stack(Dec *d, uint64_t sid, uint64_t *gid, int *missing);
void intern_free(Dec *d);

/* gosort.c */
void go_sort_perm(int64_t *keys, uint32_t *perm, size_t n);

/* merge.c */
int run_until(Dec *d, int64_t limit);

/* Formatting helper: errors carry printf-style messages. */
void set_err(Err *e, int64_t off, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
