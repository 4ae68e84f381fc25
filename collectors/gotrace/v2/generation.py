"""Reading one generation: its batches, string and stack tables, CPU samples
and the sync data (frequency, clock snapshot).

Traces before Go 1.26 have no end-of-generation marker: the first batch of
the next generation is read while reading the current one and handed on
("spilled"). Go 1.26 traces end every generation with an explicit marker.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from collectors.gotrace.v2.specs import (
    EV_CLOCK_SNAPSHOT,
    EV_CPU_SAMPLE,
    EV_CPU_SAMPLES,
    EV_END_OF_GENERATION,
    EV_FREQUENCY,
    EV_STACK,
    EV_STACKS,
    EV_STRING,
    EV_STRINGS,
    EV_SYNC,
)
from collectors.gotrace.v2.wire import (
    MAX_FRAMES,
    MAX_STRING_SIZE,
    U64_MASK,
    Batch,
    EndOfTrace,
    WireError,
    as_i64,
    read_batch,
    uvarint,
)


@dataclass
class Generation:
    """Everything read from one generation, before ordering."""

    gen: int = 0
    start: int = 0  # file offset of the generation's first batch
    end: int = 0  # file offset just past its last batch
    batches: dict[int, list[Batch]] = field(default_factory=dict)
    batch_ms: list[int] = field(default_factory=list)  # Ms in first-seen order
    # CPU samples as (raw time, m, p, g, stack id); sorted by ns time later.
    samples: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    min_ts: int = 0
    freq: float = 0.0  # ns per timestamp unit
    ticks_per_sec: int = 0  # the raw frequency event value
    has_clock: bool = False
    snap_time: int = 0
    snap_mono: int = 0
    snap_sec: int = 0
    snap_nsec: int = 0
    strings: dict[int, str] = field(default_factory=dict)
    stacks: dict[int, tuple[int, ...]] = field(default_factory=dict)
    pcs: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # pc -> func, file, line

    def string(self, sid: int) -> str | None:
        """String for an id (0 is the empty string), None when unknown."""
        if sid == 0:
            return ""
        return self.strings.get(sid)


class TableEOF(WireError):
    """A table entry ends exactly at the end of its batch, before a field.

    Go's reader passes the bare end-of-file error of such a read up unchanged,
    and ``go tool trace`` then takes it for the normal end of the trace.
    """


def _v(buf: bytes, pos: int, end: int, off: int, what: str, bare: bool = True) -> tuple[int, int]:
    """Read a varint field; ``bare`` marks fields whose read error Go does not wrap."""
    val, npos = uvarint(buf, pos, end)
    if npos < 0:
        if bare and pos >= end:
            raise TableEOF(off + pos, f"reading {what}: EOF")
        raise WireError(
            off + pos,
            f"reading {what}: "
            + ("varint overflows a 64-bit integer" if npos == -2 else "unexpected EOF"),
        )
    return val, npos


def _add_strings(g: Generation, b: Batch) -> None:
    data, off = b.data, b.data_offset
    end = len(data)
    pos = 1
    table = g.strings
    while pos < end:
        typ = data[pos]
        if typ != EV_STRING:
            raise WireError(off + pos, f"expected string event, got {typ}")
        sid, pos = _v(data, pos + 1, end, off, "string ID")
        n, pos = _v(data, pos, end, off, "string length")
        if n > MAX_STRING_SIZE:
            raise WireError(off + pos, f"invalid string size {n}, maximum is {MAX_STRING_SIZE}")
        if pos + n > end:
            raise WireError(
                off + pos, f"failed to read full string: read {end - pos} but wanted {n}"
            )
        s = data[pos : pos + n].decode("utf-8", "surrogateescape")
        pos += n
        if sid == 0 or sid in table:
            raise WireError(off + pos, f"multiple strings with the same ID: id={sid}")
        table[sid] = s


def _add_stacks(g: Generation, b: Batch) -> None:
    data, off = b.data, b.data_offset
    end = len(data)
    pos = 1
    stacks, pcs = g.stacks, g.pcs
    while pos < end:
        typ = data[pos]
        if typ != EV_STACK:
            raise WireError(off + pos, f"expected stack event, got {typ}")
        sid, pos = _v(data, pos + 1, end, off, "stack ID")
        nframes, pos = _v(data, pos, end, off, "stack frame count")
        if nframes > MAX_FRAMES:
            raise WireError(off + pos, f"invalid stack size {nframes}, maximum is {MAX_FRAMES}")
        frames = []
        for i in range(nframes):
            pc, pos = _v(data, pos, end, off, f"frame {i + 1}'s PC for stack {sid}", False)
            fn, pos = _v(data, pos, end, off, f"frame {i + 1}'s funcID for stack {sid}", False)
            fl, pos = _v(data, pos, end, off, f"frame {i + 1}'s fileID for stack {sid}", False)
            line, pos = _v(data, pos, end, off, f"frame {i + 1}'s line for stack {sid}", False)
            frames.append(pc)
            if pc not in pcs:
                # The first frame seen for a PC wins for the whole generation.
                pcs[pc] = (fn, fl, line)
        if sid == 0 or sid in stacks:
            raise WireError(off + pos, f"multiple stacks with the same ID: id={sid}")
        stacks[sid] = tuple(frames)


def _add_samples(g: Generation, b: Batch) -> None:
    data, off = b.data, b.data_offset
    end = len(data)
    pos = 1
    out = g.samples
    while pos < end:
        typ = data[pos]
        if typ != EV_CPU_SAMPLE:
            raise WireError(off + pos, f"expected CPU sample event, got {typ}")
        ts, pos = _v(data, pos + 1, end, off, "CPU sample time")
        m, pos = _v(data, pos, end, off, "CPU sample M")
        p, pos = _v(data, pos, end, off, "CPU sample P")
        gid, pos = _v(data, pos, end, off, "CPU sample G")
        stk, pos = _v(data, pos, end, off, "CPU sample stack")
        out.append((ts, as_i64(m), as_i64(p), as_i64(gid) if gid else -1, stk))


def _set_sync(g: Generation, b: Batch, version: str) -> None:
    data, off = b.data, b.data_offset
    end = len(data)
    pos = 1 if version >= "1.25" else 0  # 1.25+ sync batches start with EvSync
    last = b.time
    while pos < end:
        typ = data[pos]
        pos += 1
        if typ == EV_FREQUENCY:
            if g.freq != 0:
                raise WireError(off + pos, "found multiple frequency events")
            f, pos = _v(data, pos, end, off, "frequency")
            g.ticks_per_sec = f
            # Same float64 arithmetic as Go; a zero frequency gives +Inf there.
            g.freq = 1.0 / (f / 1e9) if f else float("inf")
        elif typ == EV_CLOCK_SNAPSHOT and version >= "1.25":
            if g.has_clock:
                raise WireError(off + pos, "found multiple clock snapshot events")
            g.has_clock = True
            dt, pos = _v(data, pos, end, off, "clock snapshot time")
            last = (last + dt) & U64_MASK
            g.snap_time = last
            g.snap_mono, pos = _v(data, pos, end, off, "clock snapshot mono")
            g.snap_sec, pos = _v(data, pos, end, off, "clock snapshot sec")
            g.snap_nsec, pos = _v(data, pos, end, off, "clock snapshot nsec")
        else:
            raise WireError(off + pos - 1, f"expected frequency or clock snapshot event, got {typ}")


def _process(g: Generation, b: Batch, version: str) -> None:
    """File one batch into the generation (Go's processBatch)."""
    head = b.data[0] if b.data else -1
    if b.exp == 0 and head == EV_STRINGS:
        _add_strings(g, b)
    elif b.exp == 0 and head == EV_STACKS:
        _add_stacks(g, b)
    elif b.exp == 0 and head == EV_CPU_SAMPLES:
        _add_samples(g, b)
    elif b.exp == 0 and (
        (head == EV_FREQUENCY and version < "1.25") or (head == EV_SYNC and version >= "1.25")
    ):
        _set_sync(g, b, version)
    elif b.exp != 0:
        pass  # experimental side data: not surfaced as events
    elif head == EV_END_OF_GENERATION:
        raise WireError(b.offset, "unexpected EndOfGeneration batch; broken trace?")
    else:
        lst = g.batches.get(b.m)
        if lst is None:
            g.batch_ms.append(b.m)
            g.batches[b.m] = lst = []
        lst.append(b)


def _finish(g: Generation, version: str) -> None:
    if g.freq == 0:
        raise WireError(g.start, "no frequency event found")
    if version >= "1.25" and not g.has_clock:
        raise WireError(g.start, "no clock snapshot event found")
    strings = g.strings
    for sid, pcs in g.stacks.items():
        for pc in pcs:
            fn, fl, _ = g.pcs[pc]
            if fn != 0 and fn not in strings:
                raise WireError(g.start, f"found invalid func string ID {fn} for stack {sid}")
            if fl != 0 and fl not in strings:
                raise WireError(g.start, f"found invalid file string ID {fl} for stack {sid}")


class SpillState:
    """What reading a pre-1.26 generation leaves for the next one."""

    __slots__ = ("batch", "gen", "error")

    def __init__(self) -> None:
        self.batch: Batch | None = None  # first batch of the next generation
        self.gen = 0
        self.error: WireError | None = None  # failure reading that batch


def read_generation_spill(
    buf: bytes | memoryview, pos: int, spill: SpillState, version: str
) -> tuple[Generation, int]:
    """Read one pre-1.26 generation starting at ``pos`` (after any spilled
    batch). Updates ``spill`` for the next call; raises WireError when this
    generation itself is unusable."""
    g = Generation(start=pos)
    if spill.batch is not None:
        b = spill.batch
        g.gen = spill.gen
        g.min_ts = b.time
        g.start = b.offset
        spill.batch = None
        _process(g, b, version)
    mv = buf
    g.end = -1
    while True:
        try:
            b, gen, npos = read_batch(mv, pos)
        except EndOfTrace:
            break
        except WireError as e:
            if g.gen != 0:
                # Possibly just the next generation's first batch: keep what we have.
                spill.error = e
                break
            raise
        if gen == 0:
            raise WireError(pos, f"invalid generation number {gen}")
        if g.gen == 0:
            g.gen = gen
        if gen == ((g.gen + 1) & U64_MASK):
            spill.batch, spill.gen = b, gen
            g.end = b.offset
            pos = npos
            break
        if gen != g.gen:
            raise WireError(pos, "generations out of order")
        if g.min_ts == 0 or b.time < g.min_ts:
            g.min_ts = b.time
        _process(g, b, version)
        pos = npos
    if g.end < 0:
        g.end = pos
    _finish(g, version)
    return g, pos


def read_generation_marked(
    buf: bytes | memoryview, pos: int, version: str
) -> tuple[Generation | None, int]:
    """Read one Go 1.26+ generation (ended by an EndOfGeneration marker).

    Returns (None, pos) at the clean end of the trace.
    """
    g = Generation(start=pos)
    mv = buf
    while True:
        try:
            b, gen, npos = read_batch(mv, pos)
        except EndOfTrace:
            if g.batches:
                raise WireError(
                    pos, "incomplete generation found; trace likely truncated"
                ) from None
            return None, pos
        if g.gen == 0:
            g.gen = gen
        if b.exp == 0 and b.data and b.data[0] == EV_END_OF_GENERATION:
            pos = npos
            break
        if gen == 0:
            raise WireError(pos, f"invalid generation number {gen}")
        if gen != g.gen:
            raise WireError(
                pos, "broken trace: missing end-of-generation event, or generations are interleaved"
            )
        if g.min_ts == 0 or b.time < g.min_ts:
            g.min_ts = b.time
        _process(g, b, version)
        pos = npos
    g.end = pos
    _finish(g, version)
    return g, pos
