"""The goroutine table's groups (ingest.derive.goroutine_lanes): made from the
database's codes (goroutines_of_codes, a batch of rows at a time) they equal
those made from the loader's strings (goroutines_of), and are ranked by
goroutine count, then name, the unknown start function last."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine

import ingest.derive.goroutine_lanes as gl
from ingest.derive.frames import FrameStore
from ingest.derive.goroutine_lanes import goroutine_groups, goroutines_of, goroutines_of_codes
from ingest.load.pipeline import ingest_trace_file
from tests.support.ingest_fixtures import db_url, engine  # noqa: F401 - fixtures

REPO = Path(__file__).resolve().parents[3]


def test_groups_from_codes_equal_groups_from_strings() -> None:
    """Goroutines 1-9 started by f (4), g (2), none (2: a None and an empty
    string) and 9 missing from the table; h is a string of no goroutine row:
    no group."""
    functions = ["g", "h", "f", ""]  # the strings in code order
    fn_goids = np.array([1, 2, 3, 4, 5, 6, 7, 8], np.int64)
    codes = np.array([2, 0, 2, -1, 2, 0, 3, 2], np.int64)
    goids = np.arange(1, 10, dtype=np.int64)
    by_codes = goroutines_of_codes(goids, fn_goids, codes, functions)
    by_strings = goroutines_of(goids, fn_goids,
                               [None if c < 0 else functions[c] for c in codes.tolist()])
    # f: 4 goroutines, g: 2, then the unknown (2 + goroutine 9).
    assert by_codes.names == by_strings.names == ["f", "g", ""]
    # A function of goroutines not in the frames only: a group of none, last but "".
    only_missing = goroutines_of_codes(goids[:2], fn_goids, codes, functions)
    assert only_missing.names == ["f", "g", ""] and only_missing.group.tolist() == [0, 1]
    assert by_codes.group.tolist() == by_strings.group.tolist() == [0, 1, 0, 2, 0, 1, 2, 0, 2]
    assert by_codes.group.dtype == by_strings.group.dtype == np.int16
    empty = goroutines_of_codes(goids[:0], fn_goids[:0], codes[:0], [])
    assert empty.names == [""] and len(empty.group) == 0


@pytest.mark.parametrize("batch", [1, 7, 1 << 16])
def test_groups_read_in_batches_equal_the_loaders(engine: Engine, tmp_path: Path, batch: int,  # noqa: F811
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The groups the loader stages from its columns equal those read from the
    database ``batch`` rows at a time."""
    res = ingest_trace_file(engine, REPO / "samples" / "go1.27-httpnet.trace",
                            data_dir=tmp_path)
    staged = goroutine_groups(engine, FrameStore(engine, tmp_path).get(res.id))
    monkeypatch.setattr(gl, "_FETCH_ROWS", batch)
    # The frames without a directory: built from the database, not read back.
    frames = FrameStore(engine, tmp_path).get(res.id)
    frames.directory = None
    built = goroutine_groups(engine, frames)
    assert built.names == staged.names and len(built.names) > 3
    assert built.group.dtype == staged.group.dtype
    np.testing.assert_array_equal(built.group, staged.group)


def test_start_functions_as_codes_read_as_the_stack_lookup() -> None:
    """intervals.start_functions: row i reads stack_functions.get(stack[i]) where
    found[i], else None: a stack of no known function, a function of None and a
    stack id below, between and above the known ones included."""
    from ingest.derive.intervals import start_functions

    stack_functions = {7: "main.worker", 3: "net/http.(*conn).serve", 12: "main.worker",
                       40: None}  # type: ignore[dict-item]
    stack = np.array([7, 3, 12, 40, 5, 1, 99, 7, 3, 0], np.int64)
    found = np.array([1, 1, 1, 1, 1, 1, 1, 0, 1, 1], bool)
    got = start_functions(stack, found, stack_functions)  # type: ignore[arg-type]
    want = [stack_functions.get(int(s)) if f else None
            for s, f in zip(stack.tolist(), found.tolist(), strict=True)]
    assert list(got) == want
    assert got.codes is not None and [got.values[c] for c in got.codes.tolist()] == want
    assert list(start_functions(stack, found, {})) == [None] * len(stack)
