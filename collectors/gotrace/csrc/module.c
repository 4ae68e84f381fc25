/* Python binding: collectors.gotrace._v2fast.Decoder.
 *
 *   dec = Decoder(data, minor, groups=None)  # data: bytes-like holding the whole trace
 *   dec.next_chunk(limit)           # [(table, rows, columns), ...] or None at the end
 *   dec.result()                    # dict of facts known at the end (loss, counts, ...)
 *   dec.stacks()                    # (rows, columns, row-group boundaries) of stacks.parquet
 *
 *   dec.dictionaries()              # (reason dictionary so far: list of str, "Bad" state used)
 *
 * Tables: 0 transitions, 1 events, 2 transition_stacks; with groups, a
 * list of (kinds, columns) bit masks (kinds as model.KINDS numbers them,
 * columns as events.parquet orders them), each event goes instead to table
 * 3 + its kind's group, with that group's columns only. A column is
 * (data, offsets or None, validity bitmap or None) as bytes, laid out as
 * Arrow buffers (int64 values or int32 dictionary indices, int32 string
 * offsets, LSB-first bitmaps). Which columns are dictionary indices, and
 * their dictionaries, is columnar.py's business. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "dec.h"


/* Column blocks come back here when Arrow is done with them, for the next
 * chunks to reuse: a fresh malloc of this size is a fresh mmap whose pages
 * the kernel must fault in and zero again (~0.1 s a 25 MB trace). Only
 * while a Decoder lives; the GIL guards it (buffers are taken and given
 * back with the GIL held). */
#define POOL_MAX 48
#define POOL_MIN_BLOCK (64u << 10)
static struct { void *p; size_t cap; } pool[POOL_MAX];
static int npool, live_decoders;

static void pool_drain(void);

typedef struct {
    PyObject_HEAD
    Py_buffer view;
    int have_view;
    int busy; /* next_chunk runs without the GIL: refuse concurrent calls */
    Dec *d;
} DecoderObject;

static void dec_free_all(Dec *d)
{
    gen_free(&d->gen);
    buf_free(&d->frontier);
    buf_free(&d->samples);
    order_free(d);
    intern_free(d);
    tables_free(d);
    free(d);
}

static void Decoder_dealloc(DecoderObject *self)
{
    if (self->d) {
        dec_free_all(self->d);
        if (--live_decoders == 0)
            pool_drain();
    }
    if (self->have_view)
        PyBuffer_Release(&self->view);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Decoder_init(DecoderObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"data", "minor", "groups", NULL};
    PyObject *data, *groups = Py_None;
    int minor;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Oi|O", kwlist, &data, &minor, &groups))
        return -1;
    /* groups: [(kinds bit mask, events columns bit mask), ...] */
    unsigned long long kmask[MAX_GROUPS], cmask[MAX_GROUPS];
    Py_ssize_t ngroups = 0;
    if (groups != Py_None) {
        PyObject *seq = PySequence_Fast(groups, "groups: a sequence of (kinds, columns) masks");
        if (!seq)
            return -1;
        ngroups = PySequence_Fast_GET_SIZE(seq);
        int bad = ngroups > MAX_GROUPS;
        for (Py_ssize_t g = 0; g < ngroups && !bad; g++) {
            PyObject *it = PySequence_Fast_GET_ITEM(seq, g);
            bad = !PyArg_ParseTuple(it, "KK", &kmask[g], &cmask[g]) ||
                  kmask[g] >> NKINDS || cmask[g] >> E_COLS || !cmask[g];
            for (Py_ssize_t h = 0; h < g && !bad; h++)
                bad = (kmask[g] & kmask[h]) != 0;
        }
        Py_DECREF(seq);
        if (bad) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError,
                         "groups: at most %d (kinds, columns) pairs of bit masks, kinds "
                         "below %d and in one group each, columns below %d, at least one",
                         MAX_GROUPS, NKINDS, E_COLS);
            return -1;
        }
    }
    if (minor != 22 && minor != 23 && minor != 25 && minor != 26) {
        PyErr_Format(PyExc_ValueError, "unsupported new-family version 1.%d", minor);
        return -1;
    }
    if (self->d || self->have_view) {
        PyErr_SetString(PyExc_RuntimeError, "Decoder already initialised");
        return -1;
    }
    if (PyObject_GetBuffer(data, &self->view, PyBUF_SIMPLE) < 0)
        return -1;
    self->have_view = 1;
    specs_init();
    Dec *d = (Dec *)calloc(1, sizeof(Dec));
    if (!d) {
        PyErr_NoMemory();
        return -1;
    }
    self->d = d;
    live_decoders++;
    d->data = (const uint8_t *)self->view.buf;
    d->len = (size_t)self->view.len;
    d->minor = minor;
    d->pos = 16;
    d->lost_from = 16;
    d->ngroups = (int)ngroups;
    memset(d->kind_group, -1, sizeof d->kind_group);
    for (int g = 0; g < d->ngroups; g++) {
        for (int k = 0; k < NKINDS; k++)
            if (kmask[g] >> k & 1)
                d->kind_group[k] = (int8_t)g;
        for (int w = 0, at = 0; w < E_COLS; w++)
            d->group_at[g][w] = (int8_t)(cmask[g] >> w & 1 ? at++ : -1);
    }
    tables_init(d);
    if (d->nomem) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* A read-only buffer owning a malloc'd block: column buffers go to Python
 * (and on to Arrow, zero-copy) without being copied. */
typedef struct {
    PyObject_HEAD
    void *p;
    Py_ssize_t n;
    size_t cap;
} OwnedBuffer;

static void pool_drain(void)
{
    while (npool > 0)
        free(pool[--npool].p);
}

/* Give b (empty) a pooled block of at least `need` bytes, if one fits. */
static void pool_take(Buf *b, size_t need)
{
    for (int i = 0; i < npool; i++) {
        if (pool[i].cap >= need && pool[i].cap <= 4 * need) {
            b->p = pool[i].p;
            b->cap = pool[i].cap;
            b->n = 0;
            pool[i] = pool[--npool];
            return;
        }
    }
}

/* Fresh buffers for a column whose old ones went to Python (see col_reinit). */
static int col_refill(Col *c)
{
    memset(&c->data, 0, sizeof c->data);
    memset(&c->offsets, 0, sizeof c->offsets);
    memset(&c->valid, 0, sizeof c->valid);
    if (c->type == COL_STR) {
        pool_take(&c->offsets, (CHUNK + 1) * 4);
        pool_take(&c->data, POOL_MIN_BLOCK);
    } else {
        pool_take(&c->data, (size_t)CHUNK * (c->type == COL_I64 ? 8 : 4));
    }
    return col_reinit(c);
}

static int OwnedBuffer_getbuffer(PyObject *o, Py_buffer *view, int flags)
{
    OwnedBuffer *b = (OwnedBuffer *)o;
    return PyBuffer_FillInfo(view, o, b->p, b->n, 1, flags);
}

static void OwnedBuffer_dealloc(OwnedBuffer *b)
{
    if (live_decoders > 0 && npool < POOL_MAX && b->cap >= POOL_MIN_BLOCK) {
        pool[npool].p = b->p;
        pool[npool].cap = b->cap;
        npool++;
    } else {
        free(b->p);
    }
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static PyBufferProcs OwnedBuffer_as_buffer = {OwnedBuffer_getbuffer, NULL};

static PyTypeObject OwnedBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "collectors.gotrace._v2fast.OwnedBuffer",
    .tp_basicsize = sizeof(OwnedBuffer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Column data handed over by the decoder (buffer protocol, read-only).",
    .tp_dealloc = (destructor)OwnedBuffer_dealloc,
    .tp_as_buffer = &OwnedBuffer_as_buffer,
};

/* Wrap the first n bytes of b, taking ownership of its memory. */
static PyObject *own(Buf *b, size_t n)
{
    OwnedBuffer *o = PyObject_New(OwnedBuffer, &OwnedBufferType);
    if (!o)
        return NULL;
    o->p = b->p;
    o->n = (Py_ssize_t)n;
    o->cap = b->cap;
    b->p = NULL;
    b->n = b->cap = 0;
    return (PyObject *)o;
}

/* Hand a table's rows to Python and give it fresh buffers. */
static PyObject *take_table(Table *t, int which)
{
    int64_t rows = t->rows;
    PyObject *cols = PyList_New(t->ncols);
    if (!cols)
        return NULL;
    for (int i = 0; i < t->ncols; i++) {
        Col *c = &t->cols[i];
        PyObject *data, *offs, *valid;
        if (c->type == COL_I64 || c->type == COL_DICT) {
            data = own(&c->data, (size_t)rows * (c->type == COL_I64 ? 8 : 4));
            offs = Py_None;
            Py_INCREF(offs);
        } else {
            data = own(&c->data, c->data.n);
            offs = own(&c->offsets, (size_t)(rows + 1) * 4);
        }
        if (c->nullable) {
            valid = own(&c->valid, (size_t)(rows + 7) / 8);
        } else {
            valid = Py_None;
            Py_INCREF(valid);
        }
        PyObject *tup = (data && offs && valid) ? PyTuple_Pack(3, data, offs, valid) : NULL;
        Py_XDECREF(data);
        Py_XDECREF(offs);
        Py_XDECREF(valid);
        if (!tup || col_refill(c)) {
            Py_XDECREF(tup);
            Py_DECREF(cols);
            return tup ? PyErr_NoMemory() : NULL;
        }
        PyList_SET_ITEM(cols, i, tup);
    }
    t->rows = 0;
    return Py_BuildValue("(iLN)", which, (long long)rows, cols);
}

static PyObject *Decoder_next_chunk(DecoderObject *self, PyObject *args)
{
    long long limit = CHUNK;
    if (!PyArg_ParseTuple(args, "|L", &limit))
        return NULL;
    if (limit < 1 || limit > CHUNK)
        limit = CHUNK;
    Dec *d = self->d;
    if (!d) {
        PyErr_SetString(PyExc_RuntimeError, "Decoder not initialised");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Decoder is already decoding in another thread");
        return NULL;
    }
    if (d->nomem)
        return PyErr_NoMemory(); /* a previous call ran out of memory */
    int r;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    r = run_until(d, limit);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (r < 0 || d->nomem)
        return PyErr_NoMemory();
    Table *ts[3 + MAX_GROUPS] = {&d->tt, &d->et, &d->st};
    for (int g = 0; g < d->ngroups; g++)
        ts[3 + g] = &d->gt[g];
    PyObject *out = PyList_New(0);
    if (!out)
        return NULL;
    for (int k = 0; k < 3 + d->ngroups; k++) {
        /* Full tables now; every non-empty one at the end. */
        if (ts[k]->rows >= limit || (d->finished && ts[k]->rows > 0)) {
            PyObject *t = take_table(ts[k], k);
            if (!t)
                d->nomem = 1; /* the table may be left without buffers */
            if (!t || PyList_Append(out, t) < 0) {
                Py_XDECREF(t);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(t);
        }
    }
    if (PyList_GET_SIZE(out) == 0 && d->finished) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    return out;
}

static PyObject *str_from(const char *s, Py_ssize_t n)
{
    return PyUnicode_DecodeUTF8(s, n, "surrogateescape");
}

/* The decoder's state, or NULL with an error set when it is decoding in
 * another thread or was never initialised. */
static Dec *ready(DecoderObject *self)
{
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Decoder is decoding in another thread");
        return NULL;
    }
    if (!self->d)
        PyErr_SetString(PyExc_RuntimeError, "Decoder not initialised");
    return self->d;
}

static PyObject *Decoder_result(DecoderObject *self, PyObject *unused)
{
    Dec *d = ready(self);
    if (!d)
        return NULL;
    PyObject *kinds = PyList_New(NKINDS);
    if (!kinds)
        return NULL;
    for (int i = 0; i < NKINDS; i++)
        PyList_SET_ITEM(kinds, i, PyLong_FromLongLong(d->kinds[i]));
    PyObject *fail;
    long long gens_lost = 0;
    if (d->fail.set) {
        fail = Py_BuildValue("(LN)", (long long)d->fail.off,
                             str_from(d->fail.msg, (Py_ssize_t)strlen(d->fail.msg)));
        gens_lost = count_generations(d, (size_t)d->lost_from);
    } else {
        fail = Py_None;
        Py_INCREF(fail);
    }
    PyObject *clock;
    if (d->have_clock)
        clock = Py_BuildValue("(LLL)", (long long)d->clock[0], (long long)d->clock[1],
                              (long long)d->clock[2]);
    else {
        clock = Py_None;
        Py_INCREF(clock);
    }
    PyObject *ticks = PyLong_FromUnsignedLongLong(d->ticks);
    return Py_BuildValue(
        "{s:N,s:L,s:L,s:L,s:L,s:L,s:L,s:N,s:N,s:L,s:N,s:O,s:L}", "fail", fail, "completed",
        (long long)d->completed, "lost_from", (long long)d->lost_from, "events", (long long)d->seq,
        "transitions", (long long)d->ntrans, "first_ts", (long long)(d->have_first ? d->first_ts : 0),
        "last_ts", (long long)d->last_out_ts, "kinds", kinds, "clock", clock, "stacks",
        (long long)(d->stackoff.n ? VEC_LEN(&d->stackoff, uint32_t) - 1 : 0), "ticks_per_sec", ticks,
        "finished", d->finished ? Py_True : Py_False, "generations_lost", gens_lost);
}

/* How many leading bytes of the data the decoder will not read again: those
 * before the generation being decoded (a caller reading a mapped file may
 * give their pages back). */
static PyObject *Decoder_consumed(DecoderObject *self, PyObject *unused)
{
    Dec *d = ready(self);
    if (!d)
        return NULL;
    int64_t done = d->gen.start;
    if (done < 0 || (size_t)done > d->pos)
        done = (int64_t)d->pos;
    return PyLong_FromLongLong(done > 16 ? done : 0);
}

/* Entries start.. of a decoder-built dictionary, as a list of str. */
static PyObject *dict_strings(const StrDict *t, Py_ssize_t start)
{
    Py_ssize_t n = (Py_ssize_t)VEC_LEN(&t->off, int32_t) - 1;
    if (start > n)
        start = n;
    const int32_t *off = (const int32_t *)t->off.p;
    PyObject *out = PyList_New(n - start);
    if (!out)
        return NULL;
    for (Py_ssize_t i = start; i < n; i++) {
        PyObject *s = PyUnicode_DecodeUTF8(t->bytes.p ? (const char *)t->bytes.p + off[i] : "",
                                           off[i + 1] - off[i], "strict");
        if (!s) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i - start, s);
    }
    return out;
}

/* The decoder-built dictionaries: every reason index a transitions chunk
 * taken so far uses, and whether any from_state was "Bad". */
static PyObject *Decoder_dictionaries(DecoderObject *self, PyObject *unused)
{
    Dec *d = ready(self);
    if (!d)
        return NULL;
    PyObject *out = dict_strings(&d->reasons, 0);
    if (!out)
        return NULL;
    return Py_BuildValue("(NO)", out, d->bad_state ? Py_True : Py_False);
}

/* With groups: the entries of the events' string dictionary from index
 * start on, which the group tables' name, category and message columns
 * index (taken as they come: it only grows). */
static PyObject *Decoder_event_strings(DecoderObject *self, PyObject *arg)
{
    Dec *d = ready(self);
    if (!d)
        return NULL;
    Py_ssize_t start = PyLong_AsSsize_t(arg);
    if (start < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "event_strings: start must be >= 0");
        return NULL;
    }
    return dict_strings(&d->estrings, start);
}

/* stacks.parquet columns: stack_id, depth (int32), function, file, line, pc. */
static PyObject *Decoder_stacks(DecoderObject *self, PyObject *unused)
{
    Dec *d = ready(self);
    if (!d)
        return NULL;
    size_t nstk = d->stackoff.n ? VEC_LEN(&d->stackoff, uint32_t) - 1 : 0;
    size_t nf = VEC_LEN(&d->frames, Frame);
    const uint32_t *so = (const uint32_t *)d->stackoff.p;
    const Frame *fr = (const Frame *)d->frames.p;
    Buf sid = {0}, depth = {0}, line = {0}, pc = {0}, fn = {0}, fl = {0}, fno = {0}, flo = {0}, bounds = {0};
    PyObject *res = NULL;
    int32_t zero = 0;
    if (buf_grow(&sid, nf * 8 + 8) || buf_grow(&depth, nf * 4 + 4) || buf_grow(&line, nf * 8 + 8) ||
        buf_grow(&pc, nf * 8 + 8) || buf_grow(&fno, nf * 4 + 8) || buf_grow(&flo, nf * 4 + 8) ||
        buf_put(&fno, &zero, 4) || buf_put(&flo, &zero, 4))
        goto nomem;
    int64_t rows_in_group = 0;
    for (size_t s = 0; s < nstk; s++) {
        for (uint32_t k = so[s]; k < so[s + 1]; k++) {
            int64_t id = (int64_t)(s + 1);
            int32_t dep = (int32_t)(k - so[s]);
            const Frame *f = &fr[k];
            uint64_t *o1 = &VEC_AT(&d->gstroff, uint64_t, f->fn);
            uint64_t *o2 = &VEC_AT(&d->gstroff, uint64_t, f->fl);
            if (buf_put(&sid, &id, 8) || buf_put(&depth, &dep, 4) || buf_put(&line, &f->line, 8) ||
                buf_put(&pc, &f->pc, 8) || buf_put_utf8(&fn, d->gstr.p + o1[0], (size_t)(o1[1] - o1[0])) ||
                buf_put_utf8(&fl, d->gstr.p + o2[0], (size_t)(o2[1] - o2[0])))
                goto nomem;
            if (fn.n > INT32_MAX || fl.n > INT32_MAX)
                goto nomem;
            int32_t e1 = (int32_t)fn.n, e2 = (int32_t)fl.n;
            if (buf_put(&fno, &e1, 4) || buf_put(&flo, &e2, 4))
                goto nomem;
            rows_in_group++;
        }
        /* parquet_out flushes a row group after a stack once it holds CHUNK rows. */
        if (rows_in_group >= CHUNK) {
            int64_t end = (int64_t)VEC_LEN(&sid, int64_t);
            if (buf_put(&bounds, &end, 8))
                goto nomem;
            rows_in_group = 0;
        }
    }
    {
        Py_ssize_t rows = (Py_ssize_t)VEC_LEN(&sid, int64_t);
        PyObject *bl = PyList_New(0);
        if (!bl)
            goto done;
        for (size_t i = 0; i < VEC_LEN(&bounds, int64_t); i++) {
            PyObject *x = PyLong_FromLongLong(VEC_AT(&bounds, int64_t, i));
            if (!x || PyList_Append(bl, x) < 0) {
                Py_XDECREF(x);
                Py_DECREF(bl);
                goto done;
            }
            Py_DECREF(x);
        }
        res = Py_BuildValue("(n(y#y#y#y#y#y#y#y#)N)", rows, sid.p ? (char *)sid.p : "", (Py_ssize_t)sid.n,
                            depth.p ? (char *)depth.p : "", (Py_ssize_t)depth.n,
                            fn.p ? (char *)fn.p : "", (Py_ssize_t)fn.n, fno.p, (Py_ssize_t)fno.n,
                            fl.p ? (char *)fl.p : "", (Py_ssize_t)fl.n, flo.p, (Py_ssize_t)flo.n,
                            line.p ? (char *)line.p : "", (Py_ssize_t)line.n,
                            pc.p ? (char *)pc.p : "", (Py_ssize_t)pc.n, bl);
    }
    goto done;
nomem:
    PyErr_NoMemory();
done:
    buf_free(&sid);
    buf_free(&depth);
    buf_free(&line);
    buf_free(&pc);
    buf_free(&fn);
    buf_free(&fl);
    buf_free(&fno);
    buf_free(&flo);
    buf_free(&bounds);
    return res;
}

static PyMethodDef Decoder_methods[] = {
    {"next_chunk", (PyCFunction)Decoder_next_chunk, METH_VARARGS,
     "Decode until a table holds `limit` rows; return the full tables, or all at the end; None when done."},
    {"result", (PyCFunction)Decoder_result, METH_NOARGS, "Facts known at the end of decoding."},
    {"stacks", (PyCFunction)Decoder_stacks, METH_NOARGS, "Columns of stacks.parquet."},
    {"consumed", (PyCFunction)Decoder_consumed, METH_NOARGS,
     "Leading bytes of the data not read again (those before the generation being decoded)."},
    {"dictionaries", (PyCFunction)Decoder_dictionaries, METH_NOARGS,
     "(reason dictionary so far, index 0 the empty reason; whether the Bad state occurred)."},
    {"event_strings", (PyCFunction)Decoder_event_strings, METH_O,
     "event_strings(start): the events' string dictionary from index start on (groups' "
     "name, category and message columns are indices into it)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject DecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "collectors.gotrace._v2fast.Decoder",
    .tp_basicsize = sizeof(DecoderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Fast decoder of Go 1.22+ execution traces into column chunks.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Decoder_init,
    .tp_dealloc = (destructor)Decoder_dealloc,
    .tp_methods = Decoder_methods,
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_v2fast", "Fast decoder of Go 1.22+ execution traces (C).", -1, NULL,
};

PyMODINIT_FUNC PyInit__v2fast(void)
{
    if (PyType_Ready(&DecoderType) < 0 || PyType_Ready(&OwnedBufferType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    Py_INCREF(&DecoderType);
    if (PyModule_AddObject(m, "Decoder", (PyObject *)&DecoderType) < 0) {
        Py_DECREF(&DecoderType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "CHUNK_ROWS", CHUNK) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
