"""The vectorised nested pairing against the walk it replaces: a stack of
open begins per key, an end closing the latest one (or making a row of its
own when nothing is open)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ingest.load.pairing import pair_nested


def walk(keys: list[list[int]], begin: list[bool]) -> tuple[list[int], list[int]]:
    """(row_event, end_event) by the stack walk."""
    open_: dict[tuple[int, ...], list[int]] = {}
    rows: list[int] = []
    ends: list[int] = []
    for i, b in enumerate(begin):
        key = tuple(k[i] for k in keys)
        stack = open_.setdefault(key, [])
        if not b and stack:
            ends[stack.pop()] = i
            continue
        if b:
            stack.append(len(rows))
        rows.append(i)
        ends.append(-1)
    return rows, ends


def check(keys: list[list[int]], begin: list[bool]) -> None:
    got = pair_nested([np.array(k, np.int64) for k in keys], np.array(begin, bool))
    rows, ends = walk(keys, begin)
    assert got.row_event.tolist() == rows, (keys, begin)
    assert got.end_event.tolist() == ends, (keys, begin)
    assert got.begun.tolist() == [begin[r] for r in rows]


def test_every_sequence_of_up_to_eight_events_over_two_keys() -> None:
    # Every begin/end sequence and key assignment: nesting, unmatched ends
    # before, between and after, keys interleaved.
    for n in range(9):
        for begin in itertools.product((True, False), repeat=n):
            for keys in itertools.product((0, 1), repeat=n):
                check([list(keys)], list(begin))


def test_two_key_columns_and_the_empty_input() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(0, 60))
        a: list[Any] = rng.integers(0, 3, n).tolist()
        b: list[Any] = rng.integers(0, 2, n).tolist()
        check([a, b], (rng.random(n) < 0.55).tolist())


def test_in_parts_of_goroutines_pairs_as_at_once() -> None:
    """Paired a range of the part key at a time (here parts of 1 to 50
    events over 40 goroutines), the rows are the walk's."""
    from ingest.load.pairing import pair_nested_in_parts

    rng = np.random.default_rng(11)
    for part in (1, 3, 7, 50):
        for _ in range(40):
            n = int(rng.integers(0, 120))
            g = rng.integers(0, 40, n)
            name = rng.integers(0, 2, n)
            begin = rng.random(n) < 0.55
            got = pair_nested_in_parts(g, [g, name], begin, part_events=part)
            rows, ends = walk([g.tolist(), name.tolist()], begin.tolist())
            assert got.row_event.tolist() == rows
            assert got.end_event.tolist() == ends
            assert got.begun.tolist() == [bool(begin[r]) for r in rows]
