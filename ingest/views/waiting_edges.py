"""The goroutine state graph's edges into and out of Waiting, split by wait
category (:mod:`ingest.views.wait_reasons`), read a part of the goroutine rows
at a time: the rest of the split graph is the precomputed one
(:func:`ingest.views.states_frames.split_graph`). One C pass per part
(``ingest/csrc/waitedges.c``), numpy's masks without it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ingest.derive.frames import TraceFrames, release_columns
from ingest.extensions import optional_extension
from ingest.store import models
from ingest.views.edge_dwells import EdgeDwells
from ingest.views.states import Edge
from ingest.views.wait_reasons import WAIT_CATEGORIES, node_name, wait_category

WAITING = models.STATE_CODE["Waiting"]


#: Goroutine rows read at a time by :func:`waiting_edges`: whole-trace
#: temporaries of the 1 GB trace's 100 M rows were 3 GB.
SPLIT_ROWS = 1 << 22


def waiting_edges(frames: TraceFrames, n_g: int) -> list[Edge]:
    """The edges from or to Waiting of the goroutine rows, split by reason as
    :func:`ingest.views.states_frames.goroutine_wait_categories` does, read
    :data:`SPLIT_ROWS` rows at a time (each part with the row before it; a
    wait's category carried from part to part), each part's mapped pages
    handed back before the next."""
    names = list(models.STATE_NAMES) + [node_name("Waiting", c) for c in WAIT_CATEGORIES]
    base = len(models.STATE_NAMES)
    top = max(frames.kinds, default=0) + 1
    frm_of, to_of = np.zeros(top, np.int16), np.zeros(top, np.int16)
    cat_of, inherit = np.full(top, -1, np.int8), np.zeros(top, bool)
    for c, k in frames.kinds.items():
        frm_of[c] = models.STATE_CODE.get(k.from_state, 0)
        to_of[c] = models.STATE_CODE.get(k.to_state, 0)
        if k.to_state == "Waiting":
            cat_of[c] = WAIT_CATEGORIES.index(wait_category(k.reason))
            inherit[c] = k.from_state == "Waiting" and not k.reason
    from_w_of = frm_of == WAITING
    touch_of = from_w_of | (to_of == WAITING)
    iv = frames.intervals
    acc = EdgeDwells(names)
    ext = optional_extension("ingest.views._waitedges")
    if ext is not None:
        tables = np.concatenate([frm_of, to_of, cat_of.astype(np.int16),
                                 inherit.astype(np.int16), touch_of.astype(np.int16)])
        return _waiting_edges_c(ext, frames, n_g, names, base, tables, acc)
    carry = np.int8(-1)  # the (filled) category of the row before the part
    try:
        for a in range(0, n_g, SPLIT_ROWS):
            b = min(n_g, a + SPLIT_ROWS)
            lo = max(a - 1, 0)
            # Copies, so that the part's pages go back at once.
            kind = np.array(iv["kind"][a:b])
            rid = np.array(iv["rid"][lo:b])
            ts = np.array(iv["start_ts"][lo:b], dtype=np.int64)
            release_columns(iv, "rid", "start_ts", "kind")
            from_w = from_w_of[kind]
            touch = touch_of[kind]
            need = touch.copy()
            need[:-1] |= from_w[1:]  # a row leaving a wait (or continuing it) reads the one before
            need[-1] = True  # the part's last row: its category is carried to the next
            del from_w
            rows = np.flatnonzero(need)
            del need
            kind = kind[rows]
            at = rows + (a - lo)  # the rows in rid and ts, which start a row earlier but at 0
            before = np.maximum(at - 1, 0)
            first = (at == 0) | (rid[at] != rid[before])
            dwell = np.where(first, -1, ts[at] - ts[before])
            del rid, ts, at, before
            # Categories, forward-filled through chains of inheriting rows: the
            # rows of a chain and the one it starts from are all kept, one
            # after the other (the row before the part's first: ``carry``).
            cats = cat_of[kind]
            chain = inherit[kind] & ~first
            if chain.any():
                src = np.where(chain, -1, np.arange(len(rows)))
                np.maximum.accumulate(src, out=src)
                cats = np.where(src >= 0, cats[np.maximum(src, 0)], carry).astype(np.int8)
                del src
            del chain
            prev = np.empty(len(rows), np.int16)
            prev[0] = carry
            prev[1:] = cats[:-1]
            carry = cats[-1]
            src_code, dst = frm_of[kind], to_of[kind]
            np.copyto(dst, cats.astype(np.int16) + base, where=cats >= 0)
            leaving = (src_code == WAITING) & ~first
            np.copyto(src_code, prev + base, where=leaving & (prev >= 0))
            src_code[(src_code == WAITING) & first] = base + WAIT_CATEGORIES.index("other")
            src_code *= np.int16(len(names))
            src_code += dst
            keep = touch[rows]
            acc.add(src_code[keep], dwell[keep])
    finally:
        release_columns(iv, "rid", "start_ts", "kind")
    return acc.edges()


def _waiting_edges_c(c: Any, frames: TraceFrames, n_g: int, names: list[str], base: int,
                     tables: npt.NDArray[np.int16], acc: EdgeDwells) -> list[Edge]:
    """:func:`waiting_edges` with each part's rows read in one C pass
    (ingest/csrc/waitedges.c)."""
    iv = frames.intervals
    carry = -1
    other = WAIT_CATEGORIES.index("other")
    try:
        for a in range(0, n_g, SPLIT_ROWS):
            b = min(n_g, a + SPLIT_ROWS)
            lo = max(a - 1, 0)
            kind = np.array(iv["kind"][lo:b], np.int16)
            rid = np.array(iv["rid"][lo:b])
            if rid.dtype not in (np.int32, np.int64):
                rid = rid.astype(np.int64)
            ts = np.array(iv["start_ts"][lo:b], np.int64)
            release_columns(iv, "rid", "start_ts", "kind")
            code = np.empty(b - lo, np.int16)
            dwell = np.empty(b - lo, np.int64)
            n, carry = c.waiting_edges(kind, rid, ts, a - lo, tables, carry, len(names), base,
                                       WAITING, other, code, dwell)
            del kind, rid, ts
            acc.add(code[:n], dwell[:n])
    finally:
        release_columns(iv, "rid", "start_ts", "kind")
    return acc.edges()
