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


def check_by_goroutine(g: Any, name: Any, begin: Any) -> None:
    """pair_by_goroutine (C when built) gives the walk's rows, and the numpy
    sorts' (GMPSCOPE_PURE's path) alike."""
    from ingest.load.pairing import pair_by_goroutine

    got = pair_by_goroutine(g, name, begin)
    rows, ends = walk([g.tolist(), name.tolist()], begin.tolist())
    assert got.row_event.tolist() == rows, (g, name, begin)
    assert got.end_event.tolist() == ends, (g, name, begin)
    assert got.begun.tolist() == [bool(begin[r]) for r in rows]


def test_by_goroutine_every_sequence_of_up_to_five_events() -> None:
    # Every begin/end sequence over two goroutines and two names: an end
    # looking past open begins of the other name, unmatched ends, rows left
    # open at the end.
    for n in range(6):
        for begin in itertools.product((True, False), repeat=n):
            for key in itertools.product(range(4), repeat=n):
                k = np.array(key)
                check_by_goroutine((k // 2).astype(np.int32), (k % 2).astype(np.int8),
                                   np.array(begin, bool))


def test_by_goroutine_random_and_every_key_width() -> None:
    rng = np.random.default_rng(5)
    for gtype, ktype in itertools.product((np.int32, np.int64),
                                          (np.int8, np.int16, np.int32, np.int64)):
        for _ in range(30):
            n = int(rng.integers(0, 300))
            check_by_goroutine(rng.integers(0, 20, n).astype(gtype),
                               rng.integers(0, 3, n).astype(ktype), rng.random(n) < 0.55)


def test_by_goroutine_c_gives_up_on_sparse_ids_and_numpy_pairs_them() -> None:
    """Goroutine ids far beyond the events' count (a head each would be too
    big) or negative: the C pass declines and the sorts pair them."""
    from ingest.extensions import optional_extension

    g = np.array([5, 2**40, 5, 2**40], np.int64)
    name = np.zeros(4, np.int8)
    begin = np.array([True, True, False, False])
    c = optional_extension("ingest.load._pairing")
    if c is not None:
        out = np.empty(4, np.int32), np.empty(4, np.int32)
        assert c.pair_by_goroutine(g, name, begin, *out) == -1
    check_by_goroutine(g, name, begin)


def test_by_goroutine_c_refuses_bad_arguments() -> None:
    import pytest

    from ingest.extensions import optional_extension

    c = optional_extension("ingest.load._pairing")
    if c is None:
        pytest.skip("the C extension is not built")
    g, name, begin = np.zeros(3, np.int32), np.zeros(3, np.int8), np.ones(3, bool)
    with pytest.raises(ValueError, match="negative goroutine"):
        c.pair_by_goroutine(np.array([0, -1, 0], np.int32), name, begin,
                            np.empty(3, np.int32), np.empty(3, np.int32))
    with pytest.raises(ValueError, match="no shorter"):
        c.pair_by_goroutine(g, name, begin, np.empty(2, np.int32), np.empty(2, np.int32))
    with pytest.raises(TypeError, match="row_event"):
        c.pair_by_goroutine(g, name, begin, np.empty(3, np.float64), np.empty(3, np.float64))
