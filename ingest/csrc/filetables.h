/* The tables ingest.store._intervalfiles shows to SQL from column files: what
 * each one's columns are and where their values come from (intervalfiles.c
 * reads them).
 *
 * Two kinds of table:
 *  - ranged (key file NULL): a trace's rows have the ids first_id..last_id,
 *    row r the id first_id + r, one set per trace, the sets in first_id order
 *    (ids are one sequence over every trace);
 *  - keyed (key file set): a set is one part of a trace's rows, its key
 *    column (file[C_ID]) ascending within the set, the parts of a trace not
 *    overlapping; the sets in (trace_id, first key) order (keys start afresh
 *    in every trace: metric_rows' seq, region_rows' id).
 *
 * Each table's listing query gives its sets as (trace_id, first key, last
 * key, base, directory, rows, file prefix). */
#ifndef GMPSCOPE_FILETABLES_H
#define GMPSCOPE_FILETABLES_H

/* Every table here has its key (id, seq) and trace_id as its first two columns. */
enum { C_ID, C_TRACE, MAX_COLS = 17 };

/* How a column's SQL value is made from its file's value v. */
enum {
    AS_IS,       /* v */
    PLUS_BASE,   /* v + the set's base (an interval id stored as the interval's row) */
    NULL_IF_NEG, /* NULL where v is -1 (the frames' NULL), else v */
    TEXT_CODE,   /* the text texts[v] */
    NULL_IF_MIN, /* NULL where v is its width's lowest value (the coded files' NULL), else v */
    ALWAYS_NULL, /* NULL (no file: a column whose every row is NULL in files) */
};

/* A table of files: its columns, the files they are read from, and the SQL
 * listing its sets. */
typedef struct {
    const char *name;
    const char *label; /* in error messages */
    const char *schema;
    const char *sets_sql;
    int ncols;
    /* The column's file after the set's prefix (NULL: the ranged tables' id,
     * trace_id, an ALWAYS_NULL column). */
    const char *const file[MAX_COLS];
    const int how[MAX_COLS];
    const char *const *texts; /* TEXT_CODE's texts */
    int ntexts;
} TableDesc;

#define KEYED(desc) ((desc)->file[C_ID] != NULL)

/* gmpscope_intervals: the intervals (interval_files). */
static const TableDesc INTERVALS = {
    "gmpscope_intervals",
    "intervals",
    "CREATE TABLE x(id INTEGER, trace_id INTEGER, rid INTEGER, start_ts INTEGER, "
    "seq INTEGER, end_ts INTEGER, kind INTEGER, m INTEGER, p INTEGER, g INTEGER, "
    "stack_id INTEGER)",
    "SELECT trace_id, first_id, last_id, 0, directory, last_id - first_id + 1, '' "
    "FROM main.interval_files ORDER BY first_id",
    11,
    {NULL, NULL, "intervals.rid", "intervals.start_ts", "intervals.seq", "intervals.end_ts",
     "intervals.kind", "intervals.m", "intervals.p", "intervals.g", "intervals.stack_id"},
    {AS_IS},
    NULL, 0,
};

/* gmpscope_proc_run_index: proc_run_index's rows (proc_run_files), each run's
 * interval stored as its row in the trace's intervals. */
static const TableDesc PROC_RUNS = {
    "gmpscope_proc_run_index",
    "proc runs",
    "CREATE TABLE x(id INTEGER, trace_id INTEGER, interval_id INTEGER)",
    "SELECT r.trace_id, r.first_id, r.last_id, f.first_id, f.directory, "
    "r.last_id - r.first_id + 1, '' "
    "FROM main.proc_run_files r JOIN main.interval_files f ON f.trace_id = r.trace_id "
    "ORDER BY r.first_id",
    3,
    {NULL, NULL, "proc_runs.row"},
    {AS_IS, AS_IS, PLUS_BASE},
    NULL, 0,
};

/* ingest.derive.intervals.SYSCALL_OUTCOMES, in its order. */
static const char *const OUTCOMES[] = {"returned", "blocked", "exited", "unfinished", "other"};

/* gmpscope_syscall_outcomes: syscall_outcomes' rows (syscall_files), from the
 * frames' syscalls files. */
static const TableDesc SYSCALLS = {
    "gmpscope_syscall_outcomes",
    "syscalls",
    "CREATE TABLE x(id INTEGER, trace_id INTEGER, interval_id INTEGER, start_known INTEGER, "
    "outcome TEXT, p_lost INTEGER, stolen_ts INTEGER, stolen_by_m INTEGER)",
    "SELECT s.trace_id, s.first_id, s.last_id, f.first_id, f.directory, "
    "s.last_id - s.first_id + 1, '' "
    "FROM main.syscall_files s JOIN main.interval_files f ON f.trace_id = s.trace_id "
    "ORDER BY s.first_id",
    8,
    {NULL, NULL, "syscalls.row", "syscalls.start_known", "syscalls.outcome", "syscalls.p_lost",
     "syscalls.stolen_ts", "syscalls.stolen_by_m"},
    {AS_IS, AS_IS, PLUS_BASE, AS_IS, TEXT_CODE, AS_IS, NULL_IF_NEG, NULL_IF_NEG},
    OUTCOMES, 5,
};

/* The coded tables kept in files (ingest.store.coded_files): one set per
 * part, its files <table>.<part>.<column>.npy in the trace's interval
 * directory. */
#define CODED_SETS(table)                                                                    \
    "SELECT trace_id, first_key, last_key, 0, directory, rows, '" table ".' || part || '.' " \
    "FROM main.coded_files WHERE table_name = '" table "' ORDER BY trace_id, first_key"

/* gmpscope_metric_rows: metric_rows' rows kept in files. */
static const TableDesc METRIC_ROWS = {
    "gmpscope_metric_rows",
    "metric rows",
    "CREATE TABLE x(seq INTEGER, trace_id INTEGER, ts INTEGER, name_code INTEGER, "
    "value INTEGER, value_str TEXT)",
    CODED_SETS("metric_rows"),
    6,
    {"seq", NULL, "ts", "name_code", "value", NULL},
    {AS_IS, AS_IS, AS_IS, AS_IS, NULL_IF_MIN, ALWAYS_NULL},
    NULL, 0,
};

/* gmpscope_log_rows: log_rows' rows kept in files. */
static const TableDesc LOG_ROWS = {
    "gmpscope_log_rows",
    "log rows",
    "CREATE TABLE x(seq INTEGER, trace_id INTEGER, ts INTEGER, g INTEGER, task_id INTEGER, "
    "category_code INTEGER, message_code INTEGER, stack_id INTEGER)",
    CODED_SETS("log_rows"),
    8,
    {"seq", NULL, "ts", "g", "task_id", "category_code", "message_code", "stack_id"},
    {AS_IS, AS_IS, AS_IS, AS_IS, NULL_IF_MIN, AS_IS, AS_IS, AS_IS},
    NULL, 0,
};

/* gmpscope_region_rows: region_rows' rows kept in files. */
static const TableDesc REGION_ROWS = {
    "gmpscope_region_rows",
    "region rows",
    "CREATE TABLE x(id INTEGER, trace_id INTEGER, task_id INTEGER, name_code INTEGER, "
    "g INTEGER, start_ts INTEGER, end_ts_delta INTEGER, stack_id INTEGER)",
    CODED_SETS("region_rows"),
    8,
    {"id", NULL, "task_id", "name_code", "g", "start_ts", "end_ts_delta", "stack_id"},
    {AS_IS, AS_IS, NULL_IF_MIN, AS_IS, AS_IS, NULL_IF_MIN, NULL_IF_MIN, AS_IS},
    NULL, 0,
};

/* gmpscope_goroutine_rows: goroutine_rows' rows kept in files. */
static const TableDesc GOROUTINE_ROWS = {
    "gmpscope_goroutine_rows",
    "goroutine rows",
    "CREATE TABLE x(goid INTEGER, trace_id INTEGER, start_function_code INTEGER, "
    "start_stack_id INTEGER, created_ts_delta INTEGER, ended_ts_delta INTEGER, "
    "parent_goid INTEGER, first_ts INTEGER, last_ts_delta INTEGER, final_state_code INTEGER, "
    "transitions INTEGER, running_ns INTEGER, runnable_ns INTEGER, waiting_ns INTEGER, "
    "syscall_ns INTEGER, first_interval INTEGER, last_interval_delta INTEGER)",
    CODED_SETS("goroutine_rows"),
    17,
    {"goid", NULL, "start_function_code", "start_stack_id", "created_ts_delta",
     "ended_ts_delta", "parent_goid", "first_ts", "last_ts_delta", "final_state_code",
     "transitions", "running_ns", "runnable_ns", "waiting_ns", "syscall_ns", "first_interval",
     "last_interval_delta"},
    {AS_IS, AS_IS, NULL_IF_MIN, NULL_IF_MIN, NULL_IF_MIN, NULL_IF_MIN, NULL_IF_MIN, AS_IS, AS_IS,
     AS_IS, AS_IS, AS_IS, AS_IS, AS_IS, AS_IS, AS_IS, AS_IS},
    NULL, 0,
};

/* gmpscope_task_rows: task_rows' rows kept in files. */
static const TableDesc TASK_ROWS = {
    "gmpscope_task_rows",
    "task rows",
    "CREATE TABLE x(task_id INTEGER, trace_id INTEGER, parent_id INTEGER, name_code INTEGER, "
    "start_ts INTEGER, end_ts_delta INTEGER, start_g INTEGER, end_g_delta INTEGER)",
    CODED_SETS("task_rows"),
    8,
    {"task_id", NULL, "parent_id", "name_code", "start_ts", "end_ts_delta", "start_g",
     "end_g_delta"},
    {AS_IS, AS_IS, NULL_IF_MIN, NULL_IF_MIN, NULL_IF_MIN, NULL_IF_MIN, NULL_IF_MIN, NULL_IF_MIN},
    NULL, 0,
};

/* gmpscope_range_rows: range_rows' rows kept in files. */
static const TableDesc RANGE_ROWS = {
    "gmpscope_range_rows",
    "range rows",
    "CREATE TABLE x(id INTEGER, trace_id INTEGER, name_code INTEGER, kind_code INTEGER, "
    "scope_code INTEGER, scope_id INTEGER, start_ts INTEGER, end_ts_delta INTEGER, "
    "active_at_start INTEGER, m INTEGER, p INTEGER, g INTEGER, stack_id INTEGER, "
    "end_attrs_code INTEGER)",
    CODED_SETS("range_rows"),
    14,
    {"id", NULL, "name_code", "kind_code", "scope_code", "scope_id", "start_ts", "end_ts_delta",
     "active_at_start", "m", "p", "g", "stack_id", "end_attrs_code"},
    {AS_IS, AS_IS, AS_IS, AS_IS, AS_IS, AS_IS, NULL_IF_MIN, NULL_IF_MIN, AS_IS, AS_IS, AS_IS,
     AS_IS, AS_IS, NULL_IF_MIN},
    NULL, 0,
};

static const TableDesc *const TABLES[] = {&INTERVALS, &PROC_RUNS, &SYSCALLS, &METRIC_ROWS,
                                          &LOG_ROWS, &REGION_ROWS, &GOROUTINE_ROWS,
                                          &TASK_ROWS, &RANGE_ROWS};

#endif
