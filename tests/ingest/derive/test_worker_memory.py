"""What a server worker keeps of a trace (ingest.derive.cache, ingest.derive.frames):
values held in memory only stay under MEMORY_BUDGET (least recently used dropped,
built again when asked for), memory-mapped values do not count against it, and
reading whole mapped columns leaves none of their pages in the process once the
frames are released."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from ingest.derive import cache as derived_cache
from ingest.derive.cache import cached, held_bytes
from ingest.derive.frames import FrameStore, TraceFrames
from ingest.derive.proc_thread_lanes import p_lanes
from tests.ingest.derive.test_derived_cache import load_sample


@dataclasses.dataclass
class Blob:
    a: np.ndarray


class Frames:
    """Frames without a directory: every value is held in memory."""

    directory: Path | None = None


def test_held_values_stay_under_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(derived_cache, "MEMORY_BUDGET", 3000)
    frames = Frames()
    builds: list[str] = []

    def make(key: str) -> Blob:
        return cached(frames, key, lambda: builds.append(key) or Blob(np.zeros(125)))  # 1000 B

    for key in ("a", "b", "c"):
        make(key)
    make("a")  # a is now the most recently used
    make("d")  # 4000 B > 3000: b, the least recently used, goes
    assert builds == ["a", "b", "c", "d"]
    make("a")
    make("c")
    make("b")  # built again
    assert builds == ["a", "b", "c", "d", "b"]
    mem = derived_cache._memory(frames)
    assert sum(mem.held.values()) <= 3000 and set(mem.held) == set(mem.values)


def test_a_value_over_the_budget_alone_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(derived_cache, "MEMORY_BUDGET", 500)
    frames = Frames()
    small = cached(frames, "small", lambda: Blob(np.zeros(10)))
    big = cached(frames, "big", lambda: Blob(np.zeros(1000)))
    assert cached(frames, "big", lambda: Blob(np.ones(1))) is big
    assert cached(frames, "small", lambda: Blob(np.ones(1))) is not small


def test_held_bytes_count_views_once_and_mapped_arrays_not(tmp_path: Path) -> None:
    base = np.zeros(1000, np.int64)
    assert held_bytes(Blob(base[10:20])) == 8000
    assert held_bytes([Blob(base), Blob(base[:5])]) == 8000
    np.save(tmp_path / "x.npy", base)
    assert held_bytes(Blob(np.load(tmp_path / "x.npy", mmap_mode="r"))) == 0
    assert held_bytes("abc") == 3


def _mapped_kb(path: Path) -> int:
    """Rss (kB) of this process's mappings of ``path``."""
    total, current = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and not head[0].endswith(":"):
            current = line.endswith(str(path))
        elif current and head and head[0] == "Rss:":
            total += int(head[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux /proc")
def test_release_hands_back_the_pages_of_columns_and_lane_sets(tmp_path: Path) -> None:
    store, tid = load_sample(tmp_path)
    frames: TraceFrames = store.get(tid)
    ls = p_lanes(frames)  # memory-mapped from the loader's copy
    start = frames.intervals["start_ts"]
    assert int(np.asarray(start).sum()) and int(np.asarray(ls.ref).sum())  # read whole
    start_file = Path(start.filename)
    lane_file = Path(ls.ref.base.filename)  # type: ignore[union-attr]
    assert _mapped_kb(start_file) > 0 and _mapped_kb(lane_file) > 0
    frames.release()
    assert _mapped_kb(start_file) == 0 and _mapped_kb(lane_file) == 0
    assert int(np.asarray(start).sum())  # still readable: mapped again
    assert _mapped_kb(start_file) > 0
    store.release_all()
    assert _mapped_kb(start_file) == 0


def test_the_frames_keep_no_pages_of_the_lane_ids_after_opening(tmp_path: Path) -> None:
    store, tid = load_sample(tmp_path)
    frames = FrameStore(store.engine, store.data_dir).get(tid)
    assert _mapped_kb(Path(frames.intervals["rid"].filename)) == 0
