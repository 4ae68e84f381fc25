"""Row groups handed from the decoding thread to a waiting helper
(ingest.load.row_group_handoff): every one added once, in order, by the helper
once it helps; an error on the helper's side stops the decode; a decode that
ends early releases the helper."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ingest.load.decode_ahead import DecodeAhead
from ingest.load.decoded import decode_bytes
from ingest.load.row_group_handoff import MAX_QUEUED, RowGroupHandOff
from tests.support.spill import assert_same_spills

ROOT = Path(__file__).resolve().parents[3]
TRACE = ROOT / "samples" / "go1.27-httpnet-2MB.trace"


class Recorder:
    """An ``add`` that notes each item and the thread that added it."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.items: list[int] = []
        self.threads: list[str] = []
        self.fail_at = fail_at

    def __call__(self, item: int) -> None:
        if item == self.fail_at:
            raise ValueError(f"bad row group {item}")
        self.items.append(item)
        self.threads.append(threading.current_thread().name)


def decoding_thread(h: RowGroupHandOff, items: range, helping: threading.Event,
                    errors: list[BaseException]) -> threading.Thread:
    """A thread that puts ``items`` (the first half before the helper helps,
    then waiting for the helper to take each), then finishes."""

    def run() -> None:
        try:
            for i in items:
                if i == len(items) // 2:
                    helping.wait()
                h.put(i)
                if i >= len(items) // 2:
                    # Like a decode in C: the helper gets the GIL meanwhile.
                    for _ in range(200):
                        if not h._queue:
                            break
                        threading.Event().wait(0.001)
            h.finish()
        except BaseException as e:  # noqa: BLE001 - checked by the test
            errors.append(e)
        finally:
            h.close()

    return threading.Thread(target=run, name="decoder")


def decode_with_a_helper(rec: Recorder, rows: int) -> list[BaseException]:
    """``rows`` row groups put by a decoding thread, a helper helping from
    the middle on; the decoding thread's errors."""
    h = RowGroupHandOff()
    h.bind(rec)
    helping, errors = threading.Event(), []
    t = decoding_thread(h, range(rows), helping, errors)
    t.start()
    helper = threading.Thread(target=lambda: (helping.set(), h.help()), name="helper")
    helper.start()
    t.join(60)
    helper.join(60)
    assert not t.is_alive() and not helper.is_alive()
    return errors


def test_every_row_group_once_in_order_and_the_helper_takes_them() -> None:
    rec = Recorder()
    assert decode_with_a_helper(rec, 40) == []
    assert rec.items == list(range(40))
    assert set(rec.threads[:20]) == {"decoder"}  # before the helper helped
    assert "helper" in rec.threads[20:]


def test_without_a_helper_the_decoding_thread_adds_everything() -> None:
    h = RowGroupHandOff()
    rec = Recorder()
    h.bind(rec)
    for i in range(3 * MAX_QUEUED):
        h.put(i)
    h.finish()
    h.help()  # the decode is over: returns at once
    assert rec.items == list(range(3 * MAX_QUEUED)) and set(rec.threads) == {"MainThread"}


def test_an_error_on_the_helpers_side_stops_the_decode() -> None:
    rec = Recorder(fail_at=30)
    errors = decode_with_a_helper(rec, 40)
    assert len(errors) == 1 and str(errors[0]) == "bad row group 30"
    assert rec.items == list(range(30))  # nothing after the failed one


def test_a_decode_that_stops_early_releases_the_helper() -> None:
    h = RowGroupHandOff()
    h.bind(Recorder())
    helper = threading.Thread(target=h.help)
    helper.start()
    h.put(1)
    h.close()  # as DecodeAhead does when the decode raises
    helper.join(60)
    assert not helper.is_alive()


def test_the_helped_decode_equals_the_decode_alone() -> None:
    """DecodeAhead.result() helps; the columns are those of a decode alone."""
    ahead = DecodeAhead(TRACE)
    got = ahead.result()
    want = decode_bytes(TRACE, [TRACE.read_bytes()], "x" * 64)
    assert got is not None and want is not None
    _, tr, _, _, _ = got.take()
    _, tr2, _, _, _ = want.take()
    assert_same_spills(tr, tr2)


def test_a_row_group_that_fails_raises_at_result(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whichever thread adds the failing row group, result() raises its error
    (and neither thread hangs)."""
    from ingest.load.transitions_builder import TransitionsBuilder

    real_add = TransitionsBuilder.add
    seen = []

    def add(self: TransitionsBuilder, table: object) -> None:
        seen.append(threading.current_thread().name)
        if len(seen) == 3:
            raise ValueError("row group 3 refused")
        real_add(self, table)

    monkeypatch.setattr(TransitionsBuilder, "add", add)
    with pytest.raises(ValueError, match="row group 3 refused"):
        DecodeAhead(TRACE).result()
    assert len(seen) == 3
