"""ingest.timings: phases add up per name, and Timings.each lets go of each item
before it makes the next (a loader's table must not outlive its turn)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

from ingest.timings import Timings


class Table:
    """Stands for a derived table's columns."""


def test_each_does_not_hold_the_previous_item_while_making_the_next() -> None:
    refs: list[weakref.ref[Table]] = []
    alive_when_making: list[bool] = []

    def tables() -> Iterator[Table]:
        for _ in range(3):
            alive_when_making.append(any(r() is not None for r in refs))
            t = Table()
            refs.append(weakref.ref(t))
            yield t
            del t

    timings = Timings()
    for table in timings.each("derive", tables()):
        del table  # the consumer is done with it, as the loader is after submitting
        gc.collect()
    assert alive_when_making == [False, False, False]
    assert set(timings.as_dict()) == {"derive"}


def test_phases_add_up() -> None:
    timings = Timings()
    timings.add("insert", 0.25)
    timings.add("insert", 0.5)
    with timings.phase("commit"):
        pass
    got = timings.as_dict()
    assert got["insert"] == 0.75 and list(got) == ["insert", "commit"]
