"""The interval order by counting sort (ingest/csrc/intervalorder.c) against
numpy's stable sort, on real traces of every trace format we read."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from collectors.gotrace.todir import decode_file_to_dir
from ingest import derive
from ingest.columns import Transitions, read_transitions

REPO = Path(__file__).resolve().parent.parent
TRACES = sorted((REPO / "tests" / "data" / "traces").glob("*.trace")) + [
    REPO / "samples" / "go1.27-httpnet-2MB.trace", REPO / "samples" / "go1.27-syscallblock.trace"]

_intervalorder = pytest.importorskip("ingest._intervalorder")


def assert_same_order(a: derive.Ordered, b: derive.Ordered) -> None:
    for name in ("order", "end", "first", "last", "starts"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        assert np.array_equal(x, y), name


@pytest.fixture(scope="module", params=TRACES, ids=[t.name for t in TRACES])
def decoded(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> tuple[Transitions, int]:
    d = tmp_path_factory.mktemp("order") / "parquet"
    meta = decode_file_to_dir(request.param, d)
    tr = read_transitions(d)
    return tr, max(int(meta["last_ts"]), int(tr.ts.max()))


def test_counting_sort_equals_numpy(decoded: tuple[Transitions, int]) -> None:
    tr, last_ts = decoded
    fast = derive._counting_order(tr, last_ts)
    assert fast is not None, "the C sort applies to every trace Go writes"
    assert_same_order(fast, derive.order_intervals_numpy(tr, last_ts))


@pytest.mark.parametrize("change", ["negative id", "sparse ids", "third resource"])
def test_ids_outside_the_scheme_fall_back_to_numpy(decoded: tuple[Transitions, int],
                                                   change: str) -> None:
    tr, last_ts = decoded
    rid, res = tr.rid.copy(), tr.res.copy()
    k = int(np.flatnonzero(res == 0)[0])  # some goroutine's transition
    if change == "negative id":
        rid[rid == rid[k]] = -5
    elif change == "sparse ids":
        rid[rid == rid[k]] = 2**30 - 1
    else:
        res[k] = 2
    odd = dataclasses.replace(tr, rid=rid, res=res)
    assert derive._counting_order(odd, last_ts) is None
    if change != "third resource":  # the numpy sort's own range
        assert_same_order(derive.order_intervals(odd, last_ts),
                          derive.order_intervals_numpy(odd, last_ts))


def test_empty_and_one_row(decoded: tuple[Transitions, int]) -> None:
    tr, last_ts = decoded
    for n in (0, 1):
        part = dataclasses.replace(tr, **{f.name: getattr(tr, f.name)[:n]
                                          for f in dataclasses.fields(tr) if f.name != "reasons"})
        fast = derive._counting_order(part, last_ts)
        assert fast is not None
        assert_same_order(fast, derive.order_intervals_numpy(part, last_ts))


def test_wrong_buffers_are_refused() -> None:
    n = 4
    res = np.zeros(n, np.int8)
    rid = np.arange(n, dtype=np.int32)
    ts = np.arange(n, dtype=np.int64)
    outs = [np.empty(n, np.int32), np.empty(n, np.int64), np.empty(n, bool), np.empty(n, bool)]
    assert _intervalorder.order_intervals(res, rid, ts, 10, *outs)
    assert outs[0].tolist() == [0, 1, 2, 3] and outs[1].tolist() == [10, 10, 10, 10]
    with pytest.raises(TypeError, match="rid"):
        _intervalorder.order_intervals(res, rid.astype(np.int64), ts, 10, *outs)
    with pytest.raises(ValueError, match="end"):
        _intervalorder.order_intervals(res, rid, ts, 10, outs[0], outs[1][:3], *outs[2:])
    with pytest.raises((TypeError, BufferError)):
        _intervalorder.order_intervals(res, rid, ts, 10, outs[0], b"\0" * 32, *outs[2:])


def test_pure_setting_uses_numpy(decoded: tuple[Transitions, int],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    tr, last_ts = decoded
    monkeypatch.setenv(derive.PURE_ENV, "1")
    assert derive._counting_order(tr, last_ts) is None
