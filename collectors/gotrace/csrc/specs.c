/* Wire event layouts of the new trace family (same table as v2/specs.py). */
#include <stdarg.h>
#include <stdio.h>

#include "dec.h"

Spec SPECS[NUM_SPECS];
int8_t TIMED_NARGS[256];

static void def(int typ, const char *name, int timed, int nargs, const char *a0, const char *a1,
                const char *a2, const char *a3, const char *a4)
{
    Spec *s = &SPECS[typ];
    const char *args[5] = {a0, a1, a2, a3, a4};
    s->name = name;
    s->timed = (uint8_t)timed;
    s->nargs = (int8_t)nargs;
    for (int i = 0; i < nargs && i < 5; i++)
        s->args[i] = args[i];
}

static void stk(int typ, int a, int b)
{
    Spec *s = &SPECS[typ];
    s->stacks[0] = (int8_t)a;
    s->stacks[1] = (int8_t)b;
    s->nstacks = (int8_t)(b ? 2 : 1);
}

static void str(int typ, int a, int b)
{
    Spec *s = &SPECS[typ];
    s->strings[0] = (int8_t)a;
    s->strings[1] = (int8_t)b;
    s->nstrings = (int8_t)(b ? 2 : 1);
}

#define T(typ, name, n, a1, a2, a3, a4) def(typ, name, 1, n, "dt", a1, a2, a3, a4)

void specs_init(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    memset(SPECS, 0, sizeof(SPECS));
    for (int i = 0; i < NUM_SPECS; i++)
        SPECS[i].name = "";
    def(EV_EVENT_BATCH, "EventBatch", 0, 4, "gen", "m", "time", "size", NULL);
    def(EV_STACKS, "Stacks", 0, 0, NULL, NULL, NULL, NULL, NULL);
    def(EV_STACK, "Stack", 0, 2, "id", "nframes", NULL, NULL, NULL);
    def(EV_STRINGS, "Strings", 0, 0, NULL, NULL, NULL, NULL, NULL);
    def(EV_STRING, "String", 0, 1, "id", NULL, NULL, NULL, NULL);
    def(EV_CPU_SAMPLES, "CPUSamples", 0, 0, NULL, NULL, NULL, NULL, NULL);
    def(EV_CPU_SAMPLE, "CPUSample", 0, 5, "time", "m", "p", "g", "stack");
    def(EV_FREQUENCY, "Frequency", 0, 1, "freq", NULL, NULL, NULL, NULL);
    T(EV_PROCS_CHANGE, "ProcsChange", 3, "procs_value", "stack", NULL, NULL);
    stk(EV_PROCS_CHANGE, 2, 0);
    T(EV_PROC_START, "ProcStart", 3, "p", "p_seq", NULL, NULL);
    T(EV_PROC_STOP, "ProcStop", 1, NULL, NULL, NULL, NULL);
    T(EV_PROC_STEAL, "ProcSteal", 4, "p", "p_seq", "m", NULL);
    T(EV_PROC_STATUS, "ProcStatus", 3, "p", "pstatus", NULL, NULL);
    T(EV_GO_CREATE, "GoCreate", 4, "new_g", "new_stack", "stack", NULL);
    stk(EV_GO_CREATE, 3, 2);
    T(EV_GO_CREATE_SYSCALL, "GoCreateSyscall", 2, "new_g", NULL, NULL, NULL);
    T(EV_GO_START, "GoStart", 3, "g", "g_seq", NULL, NULL);
    T(EV_GO_DESTROY, "GoDestroy", 1, NULL, NULL, NULL, NULL);
    T(EV_GO_DESTROY_SYSCALL, "GoDestroySyscall", 1, NULL, NULL, NULL, NULL);
    T(EV_GO_STOP, "GoStop", 3, "reason_string", "stack", NULL, NULL);
    stk(EV_GO_STOP, 2, 0);
    str(EV_GO_STOP, 1, 0);
    T(EV_GO_BLOCK, "GoBlock", 3, "reason_string", "stack", NULL, NULL);
    stk(EV_GO_BLOCK, 2, 0);
    str(EV_GO_BLOCK, 1, 0);
    T(EV_GO_UNBLOCK, "GoUnblock", 4, "g", "g_seq", "stack", NULL);
    stk(EV_GO_UNBLOCK, 3, 0);
    T(EV_GO_SYSCALL_BEGIN, "GoSyscallBegin", 3, "p_seq", "stack", NULL, NULL);
    stk(EV_GO_SYSCALL_BEGIN, 2, 0);
    T(EV_GO_SYSCALL_END, "GoSyscallEnd", 1, NULL, NULL, NULL, NULL);
    SPECS[EV_GO_SYSCALL_END].start = EV_GO_SYSCALL_BEGIN;
    T(EV_GO_SYSCALL_END_BLOCKED, "GoSyscallEndBlocked", 1, NULL, NULL, NULL, NULL);
    SPECS[EV_GO_SYSCALL_END_BLOCKED].start = EV_GO_SYSCALL_BEGIN;
    T(EV_GO_STATUS, "GoStatus", 4, "g", "m", "gstatus", NULL);
    T(EV_STW_BEGIN, "STWBegin", 3, "kind_string", "stack", NULL, NULL);
    stk(EV_STW_BEGIN, 2, 0);
    str(EV_STW_BEGIN, 1, 0);
    T(EV_STW_END, "STWEnd", 1, NULL, NULL, NULL, NULL);
    SPECS[EV_STW_END].start = EV_STW_BEGIN;
    T(EV_GC_ACTIVE, "GCActive", 2, "gc_seq", NULL, NULL, NULL);
    SPECS[EV_GC_ACTIVE].start = EV_GC_BEGIN;
    T(EV_GC_BEGIN, "GCBegin", 3, "gc_seq", "stack", NULL, NULL);
    stk(EV_GC_BEGIN, 2, 0);
    T(EV_GC_END, "GCEnd", 2, "gc_seq", NULL, NULL, NULL);
    SPECS[EV_GC_END].start = EV_GC_BEGIN;
    T(EV_GC_SWEEP_ACTIVE, "GCSweepActive", 2, "p", NULL, NULL, NULL);
    SPECS[EV_GC_SWEEP_ACTIVE].start = EV_GC_SWEEP_BEGIN;
    T(EV_GC_SWEEP_BEGIN, "GCSweepBegin", 2, "stack", NULL, NULL, NULL);
    stk(EV_GC_SWEEP_BEGIN, 1, 0);
    T(EV_GC_SWEEP_END, "GCSweepEnd", 3, "swept_value", "reclaimed_value", NULL, NULL);
    SPECS[EV_GC_SWEEP_END].start = EV_GC_SWEEP_BEGIN;
    T(EV_GC_MARK_ASSIST_ACTIVE, "GCMarkAssistActive", 2, "g", NULL, NULL, NULL);
    SPECS[EV_GC_MARK_ASSIST_ACTIVE].start = EV_GC_MARK_ASSIST_BEGIN;
    T(EV_GC_MARK_ASSIST_BEGIN, "GCMarkAssistBegin", 2, "stack", NULL, NULL, NULL);
    stk(EV_GC_MARK_ASSIST_BEGIN, 1, 0);
    T(EV_GC_MARK_ASSIST_END, "GCMarkAssistEnd", 1, NULL, NULL, NULL, NULL);
    SPECS[EV_GC_MARK_ASSIST_END].start = EV_GC_MARK_ASSIST_BEGIN;
    T(EV_HEAP_ALLOC, "HeapAlloc", 2, "heapalloc_value", NULL, NULL, NULL);
    T(EV_HEAP_GOAL, "HeapGoal", 2, "heapgoal_value", NULL, NULL, NULL);
    T(EV_GO_LABEL, "GoLabel", 2, "label_string", NULL, NULL, NULL);
    str(EV_GO_LABEL, 1, 0);
    T(EV_USER_TASK_BEGIN, "UserTaskBegin", 5, "task", "parent_task", "name_string", "stack");
    stk(EV_USER_TASK_BEGIN, 4, 0);
    str(EV_USER_TASK_BEGIN, 3, 0);
    T(EV_USER_TASK_END, "UserTaskEnd", 3, "task", "stack", NULL, NULL);
    stk(EV_USER_TASK_END, 2, 0);
    T(EV_USER_REGION_BEGIN, "UserRegionBegin", 4, "task", "name_string", "stack", NULL);
    stk(EV_USER_REGION_BEGIN, 3, 0);
    str(EV_USER_REGION_BEGIN, 2, 0);
    T(EV_USER_REGION_END, "UserRegionEnd", 4, "task", "name_string", "stack", NULL);
    stk(EV_USER_REGION_END, 3, 0);
    str(EV_USER_REGION_END, 2, 0);
    SPECS[EV_USER_REGION_END].start = EV_USER_REGION_BEGIN;
    T(EV_USER_LOG, "UserLog", 5, "task", "key_string", "value_string", "stack");
    stk(EV_USER_LOG, 4, 0);
    str(EV_USER_LOG, 2, 3);
    T(EV_GO_SWITCH, "GoSwitch", 3, "g", "g_seq", NULL, NULL);
    T(EV_GO_SWITCH_DESTROY, "GoSwitchDestroy", 3, "g", "g_seq", NULL, NULL);
    T(EV_GO_CREATE_BLOCKED, "GoCreateBlocked", 4, "new_g", "new_stack", "stack", NULL);
    stk(EV_GO_CREATE_BLOCKED, 3, 2);
    T(EV_GO_STATUS_STACK, "GoStatusStack", 5, "g", "m", "gstatus", "stack");
    stk(EV_GO_STATUS_STACK, 4, 0);
    def(EV_EXPERIMENTAL_BATCH, "ExperimentalBatch", 0, 4, "exp", "gen", "m", "time", NULL);
    def(EV_SYNC, "Sync", 0, 0, NULL, NULL, NULL, NULL, NULL);
    T(EV_CLOCK_SNAPSHOT, "ClockSnapshot", 4, "mono", "sec", "nsec", NULL);
    def(EV_END_OF_GENERATION, "EndOfGeneration", 0, 0, NULL, NULL, NULL, NULL, NULL);
    T(128, "Span", 4, "id", "npages_value", "kindclass", NULL);
    T(129, "SpanAlloc", 4, "id", "npages_value", "kindclass", NULL);
    T(130, "SpanFree", 2, "id", NULL, NULL, NULL);
    T(131, "HeapObject", 3, "id", "type", NULL, NULL);
    T(132, "HeapObjectAlloc", 3, "id", "type", NULL, NULL);
    T(133, "HeapObjectFree", 2, "id", NULL, NULL, NULL);
    T(134, "GoroutineStack", 3, "id", "order", NULL, NULL);
    T(135, "GoroutineStackAlloc", 3, "id", "order", NULL, NULL);
    T(136, "GoroutineStackFree", 2, "id", NULL, NULL, NULL);
    for (int i = 128; i < NUM_SPECS; i++)
        SPECS[i].experimental = 1;
    for (int i = 0; i < 256; i++) {
        if (i >= NUM_SPECS)
            TIMED_NARGS[i] = -1;
        else if (SPECS[i].timed && SPECS[i].nargs)
            TIMED_NARGS[i] = SPECS[i].nargs;
        else
            TIMED_NARGS[i] = -2;
    }
}

const char *event_name(int minor, int typ, char *tmp, size_t tmpcap)
{
    int last = minor == 22 ? EV_USER_LOG : minor == 23 ? EV_EXPERIMENTAL_BATCH
             : minor == 25 ? EV_CLOCK_SNAPSHOT : NUM_SPECS - 1;
    if (typ >= 0 && typ <= last && SPECS[typ].name[0])
        return SPECS[typ].name;
    snprintf(tmp, tmpcap, "Invalid(%d)", typ);
    return tmp;
}

void set_err(Err *e, int64_t off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
    e->off = off;
    e->set = 1;
    e->table_eof = 0;
}
