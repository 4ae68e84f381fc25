"""Values derived from a trace's frames, kept in memory and on disk.

The timeline's lane sets take one sort of millions of rows to build (about a
second on a 4-million-event trace). Built once, they are written next to the
trace's frames (``<frames dir>/derived-v<N>/<key>/``, one ``.npy`` per array,
memory-mapped when read back), so a server that restarts, or its other
worker processes, read them instead of building them again, and the loader
builds them right after a trace is stored (:func:`ingest.derive.lanesets.precompute_steps`).

A persisted value is a dataclass whose fields are numpy arrays, ints,
strings, lists of strings, or other such dataclasses (or None); or, through
:func:`cached_json`, a whole-trace report made of plain JSON values. Like the
frames, this is only a cache: any failure to write it means the value is
built again next time, never a wrong answer.

What a worker keeps in its own memory is bounded: values read back from disk
are memory-mapped (their pages are the page cache's, and
:func:`release_cached` hands back those a view touched), and the values held
in memory only (never persisted, or not written) are kept up to
:data:`MEMORY_BUDGET` bytes per trace, least recently used dropped first
(built again when asked for again).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import mmap
import os
import shutil
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from ingest.npy import map_npy, save_npy

#: Bumped whenever a persisted value's layout or the way it is built changes:
#: values of an older version are ignored (and removed with their frames).
DERIVED_VERSION = 3

T = TypeVar("T")

_MANIFEST = "manifest.json"

#: Bytes of values held in a worker's own memory (not memory-mapped) per trace.
MEMORY_BUDGET = 96 << 20


class TraceFrames(Protocol):
    """What this cache needs of a trace's frames
    (:class:`ingest.derive.frames.TraceFrames`): their directory (None: in
    memory only). Values kept in memory live on the object itself. A
    protocol, not the class: the frame writer, which the frame store calls,
    saves values through this module, so it cannot import the store's module.
    """

    @property
    def directory(self) -> Path | None: ...


def derived_dir(frames: TraceFrames) -> Path | None:
    """Where ``frames``' derived values live on disk (None: memory only)."""
    if frames.directory is None:
        return None
    return frames.directory / f"derived-v{DERIVED_VERSION}"


def save_value(d: Path, value: Any) -> None:
    """Write dataclass ``value`` into the new directory ``d`` (atomically: it
    is written under a temporary name and renamed)."""
    tmp = d.parent / f".{d.name}.{uuid.uuid4().hex}.tmp"
    tmp.mkdir()  # never parents: a trace deleted meanwhile stays deleted
    try:
        manifest = _save_fields(tmp, "", value)
        (tmp / _MANIFEST).write_text(json.dumps(manifest))
        os.replace(tmp, d)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _save_fields(d: Path, prefix: str, value: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(value):
        v = getattr(value, f.name)
        name = prefix + f.name
        if isinstance(v, np.ndarray):
            # Read back a window at a time, later, through a memory map.
            save_npy(d / f"{name}.npy", v)
            fields[f.name] = {"array": f"{name}.npy"}
        elif v is None or isinstance(v, int | str) or (
                isinstance(v, list) and all(isinstance(x, str) for x in v)):
            fields[f.name] = {"json": v}
        elif dataclasses.is_dataclass(v):
            fields[f.name] = {"object": type(v).__name__,
                              "fields": _save_fields(d, name + ".", v)["fields"]}
        else:
            raise TypeError(f"cannot persist field {name} of type {type(v).__name__}")
    return {"type": type(value).__name__, "fields": fields}


def load_value(d: Path, classes: tuple[type, ...]) -> Any:
    """The value saved in ``d`` (arrays memory-mapped read-only); ``classes``
    are the dataclasses it may be made of. Raises OSError/ValueError/KeyError
    on anything missing or foreign."""
    manifest = json.loads((d / _MANIFEST).read_text())
    by_name = {c.__name__: c for c in classes}
    return _load_fields(d, manifest["type"], manifest["fields"], by_name)


def _load_fields(d: Path, type_name: str, fields: dict[str, Any],
                 by_name: dict[str, type]) -> Any:
    cls = by_name[type_name]
    kwargs: dict[str, Any] = {}
    for name, spec in fields.items():
        if "array" in spec:
            kwargs[name] = map_npy(d / spec["array"])
        elif "json" in spec:
            kwargs[name] = spec["json"]
        else:
            kwargs[name] = _load_fields(d, spec["object"], spec["fields"], by_name)
    expected = {f.name for f in dataclasses.fields(cls)}
    if set(kwargs) != expected:
        raise ValueError(f"{d}: fields {sorted(kwargs)} do not make a {type_name}")
    return cls(**kwargs)


@dataclass
class Steps:
    """An int64 column kept as its first value and the steps from each value
    to the next, for columns that mostly climb by small steps (sorted times,
    ascending rows): each step in the narrowest unsigned type that holds
    nearly all of them, the others (and any step down) in ``big``, in order,
    where ``step`` holds the type's largest value. Exact; read whole
    (:meth:`values`), a cumulative sum."""

    n: int
    first: int
    step: npt.NDArray[np.unsignedinteger[Any]]
    big: npt.NDArray[np.int64]

    @classmethod
    def of(cls, values: npt.NDArray[np.integer[Any]]) -> Steps:
        """``values`` as steps (the narrowest of uint8/16/32 by bytes kept)."""
        n = len(values)
        if not n:
            return cls(0, 0, np.zeros(0, np.uint8), np.zeros(0, np.int64))
        types: tuple[type[np.unsignedinteger[Any]], ...] = (np.uint8, np.uint16, np.uint32)
        # The steps a part at a time: a column of tens of millions of values
        # (a 1 GB trace's samples) never has whole int64 temporaries beside it.
        over = [0] * len(types)
        for d in _steps_in_parts(values):
            for i, t in enumerate(types):
                over[i] += int(np.count_nonzero((d < 0) | (d >= int(np.iinfo(t).max))))
        sizes = [(n - 1) * np.dtype(t).itemsize + 8 * k for t, k in zip(types, over,
                                                                         strict=True)]
        best = types[sizes.index(min(sizes))]
        top = int(np.iinfo(best).max)
        step: npt.NDArray[np.unsignedinteger[Any]] = np.empty(n - 1, best)
        big: list[npt.NDArray[np.int64]] = []
        at = 0
        for d in _steps_in_parts(values):
            out = (d < 0) | (d >= top)
            step[at:at + len(d)] = np.where(out, top, d)
            big.append(d[out])
            at += len(d)
        return cls(n, int(values[0]), step,
                   np.concatenate(big) if big else np.zeros(0, np.int64))

    def __len__(self) -> int:
        return self.n

    def values(self) -> npt.NDArray[np.int64]:
        """The column (a new int64 array)."""
        if not self.n:
            return np.zeros(0, np.int64)
        d = np.empty(self.n, np.int64)
        d[0] = self.first
        d[1:] = self.step
        if len(self.big):
            d[1:][self.step == np.iinfo(self.step.dtype).max] = self.big
        return np.cumsum(d, out=d)


#: Values per part of :meth:`Steps.of`.
_STEP_PART = 4 << 20


def _steps_in_parts(values: npt.NDArray[np.integer[Any]]) -> Iterator[npt.NDArray[np.int64]]:
    """np.diff of ``values`` as int64, :data:`_STEP_PART` steps at a time."""
    n = len(values)
    for a in range(0, n - 1, _STEP_PART):
        b = min(n - 1, a + _STEP_PART)
        yield (np.asarray(values[a + 1:b + 1], np.int64)
               - np.asarray(values[a:b], np.int64))


class _Memory:
    """The values kept for one trace's frames: every one by key, and the
    bytes of those held in memory (not mapped), least recently used first."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.held: OrderedDict[str, int] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: str) -> tuple[bool, Any]:
        with self.lock:
            if key not in self.values:
                return False, None
            if key in self.held:
                self.held.move_to_end(key)
            return True, self.values[key]

    def put(self, key: str, value: Any) -> Any:
        size = held_bytes(value)
        with self.lock:
            if key in self.values:
                return self.values[key]  # another thread's, built meanwhile
            self.values[key] = value
            if size:
                self.held[key] = size
                total = sum(self.held.values())
                while total > MEMORY_BUDGET and len(self.held) > 1:
                    old, n = self.held.popitem(last=False)
                    del self.values[old]
                    total -= n
            return value


def _memory(frames: TraceFrames) -> _Memory:
    # Kept on the frames object itself, not in a module global: an evicted or
    # rebuilt trace drops its derived values with it.
    with _MEMORY_LOCK:
        mem: _Memory = vars(frames).setdefault("_derived_cache", _Memory())
    return mem


_MEMORY_LOCK = threading.Lock()


def _arrays(value: Any, seen: set[int] | None = None) -> Iterator[Any]:
    """The numpy arrays a cached value is made of (dataclass fields, nested)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        yield value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _arrays(getattr(value, f.name), seen)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _arrays(v, seen)


def _mapping(a: Any) -> mmap.mmap | None:
    """The file mapping under array ``a`` (a numpy.memmap, or a view of one)."""
    mapping = getattr(a, "_mmap", None)
    return mapping if isinstance(mapping, mmap.mmap) else None


def held_bytes(value: Any) -> int:
    """Bytes of ``value`` held in this process's own memory: its arrays that
    are not memory-mapped (a view counts its base once), or a string's length."""
    if isinstance(value, str | bytes):
        return len(value)
    bases: dict[int, int] = {}
    for a in _arrays(value):
        if _mapping(a) is None:
            base = a
            while isinstance(base.base, np.ndarray):
                base = base.base
            bases[id(base)] = base.nbytes
    return sum(bases.values())


def release_pages(col: Any) -> None:
    """Take a memory-mapped array's pages out of this process's memory: the
    page cache keeps them, and touching the array again maps them again
    (reading a whole mapped column otherwise counts in the process's memory
    until the mapping is closed). No-op for arrays in memory."""
    mapping = _mapping(col)
    if mapping is not None and hasattr(mmap, "MADV_DONTNEED"):
        try:
            # Read-only shared file mapping: nothing is lost (docs: madvise(2)).
            mapping.madvise(mmap.MADV_DONTNEED)
        except (OSError, ValueError):
            pass


def release_columns(table: Any, *names: str) -> None:
    """:func:`release_pages` of the columns ``names`` of ``table`` (a frames
    table, or any mapping of names to arrays)."""
    for name in names:
        release_pages(table[name])


def release_cached(frames: TraceFrames) -> None:
    """:func:`release_pages` of every memory-mapped array of the values kept
    for ``frames``."""
    mem = _memory(frames)
    with mem.lock:
        values = list(mem.values.values())
    for v in values:
        for a in _arrays(v):
            release_pages(a)


def remove_other_versions(frames_root: Path) -> int:
    """Delete every trace's derived values of another version than this one
    (no reader looks at them: a value of an older layout is built again in
    the current one); the number of directories removed."""
    removed = 0
    current = f"derived-v{DERIVED_VERSION}"
    for d in frames_root.glob("*/derived-v*"):
        if d.name != current and d.is_dir() and not d.is_symlink():
            shutil.rmtree(d, ignore_errors=True)
            removed += 1
    return removed


def cached(frames: TraceFrames, key: str, build: Callable[[], T],
           persist: tuple[type, ...] = ()) -> T:
    """``build()`` once per trace (again after a value held in memory only
    was dropped for :data:`MEMORY_BUDGET`).

    Memory first; then, when ``persist`` names the dataclasses the value is
    made of and the frames have a directory, the disk, where a value built
    here is also written. Building takes a file lock, so of several threads
    or worker processes asking at once one builds and the others read.
    """
    mem = _memory(frames)
    found, value = mem.get(key)
    if found:
        return value  # type: ignore[no-any-return]
    root = derived_dir(frames) if persist else None
    value = _from_disk(root, key, build, persist) if root is not None else build()
    return mem.put(key, value)  # type: ignore[no-any-return]


@contextmanager
def _build_lock(root: Path, key: str) -> Iterator[bool]:
    """Hold the lock for building ``key`` under ``root``, across threads and
    processes; yields False (no lock, nothing to persist) when the directory
    cannot be made (a deleted trace, a full disk)."""
    try:
        root.mkdir(exist_ok=True)  # never parents: a trace deleted meanwhile stays deleted
        lock_file = open(root / f".{key}.lock", "a")  # noqa: SIM115 - held while building
    except OSError:
        yield False
        return
    with lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        yield True


def _from_disk(root: Path, key: str, build: Callable[[], T], classes: tuple[type, ...]) -> T:
    d = root / key
    with _build_lock(root, key) as locked:
        if not locked:
            return build()
        if d.is_dir():
            try:
                return load_value(d, classes)  # type: ignore[no-any-return]
            except (OSError, ValueError, KeyError, TypeError):
                shutil.rmtree(d, ignore_errors=True)  # foreign or torn: build it again
        value = build()
        try:
            save_value(d, value)
            # The memory-mapped copy, not the one just built: its pages are the
            # page cache's, shared by every worker process and given back under
            # memory pressure.
            return load_value(d, classes)  # type: ignore[no-any-return]
        except (OSError, ValueError, KeyError):
            # A full disk, or the directory gone meanwhile (the trace deleted):
            # served from memory, built again next time.
            return value


def cached_json(frames: TraceFrames, key: str, build: Callable[[], Any]) -> Any:
    """A whole-trace report (plain JSON values) built once per trace.

    Kept as JSON text, in memory (:func:`cached`) and in
    ``<derived dir>/<key>.json``: every call returns a fresh copy, so a caller
    may add to it freely.
    """
    root = derived_dir(frames)

    def text() -> str:
        return _json_from_disk(root, key, build) if root is not None else json.dumps(build())

    return json.loads(cached(frames, f"json:{key}", text))


def _json_from_disk(root: Path, key: str, build: Callable[[], Any]) -> str:
    path = root / f"{key}.json"
    with _build_lock(root, key) as locked:
        if not locked:
            return json.dumps(build())
        try:
            text = path.read_text()
            json.loads(text)  # a torn file is built again
            return text
        except (OSError, ValueError):
            pass
        text = json.dumps(build())
        tmp = root / f".{key}.{uuid.uuid4().hex}.tmp"
        try:
            tmp.write_text(text)
            os.replace(tmp, path)
        except OSError:
            tmp.unlink(missing_ok=True)  # a full disk: built again next time
        return text
