"""A spill's transitions as one trace again (ingest.load.transition_spill), for
tests that compare a decode's columns."""

from __future__ import annotations

import numpy as np

from ingest.columns import Transitions
from ingest.load.transition_spill import TransitionSpill

COLUMNS = ("ts", "res", "rid", "frm", "to", "reason", "m", "p", "g", "stack")


def whole_transitions(spill: TransitionSpill) -> Transitions:
    """Every bucket and the procs' rows back in Go's order (by ``seq``); the
    spill is read (and emptied) by it."""
    parts = [*spill.buckets(), spill.procs()]
    seq = np.concatenate([np.arange(len(b.tr)) if b.seq is None else b.seq for b in parts])
    by = np.argsort(seq, kind="stable")
    assert np.array_equal(seq[by], np.arange(len(seq))), "every transition once"
    cols = {c: np.concatenate([getattr(b.tr, c) for b in parts])[by] for c in COLUMNS}
    return Transitions(**cols, reasons=spill.reasons)


def assert_same_spills(a: TransitionSpill, b: TransitionSpill) -> None:
    """The same transitions, column for column, in Go's order."""
    ta, tb = whole_transitions(a), whole_transitions(b)
    for col in COLUMNS:
        assert np.array_equal(getattr(ta, col), getattr(tb, col)), col
    assert ta.reasons == tb.reasons
