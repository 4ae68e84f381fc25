"""The warm's steps shared out between workers: threads, and maybe a forked process.

The reports are numpy between stretches of Python, and threads of one process
take turns at the GIL for those stretches: on the 200 MB benchmark trace the
warm took 5.4 s on one thread and 3.9 s on two, where each step's time alone
adds up to ~2.7 s a core. With the second worker a forked copy of this
process instead of a thread, nothing is shared but the cores: 3.2 s
(``bench/RESULTS.md``, session 26).

The steps are numbered longest first, and the numbers written into a pipe
(:class:`StepQueue`): a worker takes the next step with a one-byte read, which
the kernel hands to exactly one reader, so the threads of this process and a
forked child draw from the same queue without a lock between them. The child
writes a record per step it finished into a second pipe; this process hears
of them (``done``), times them and reports progress as its own.

A fork copies only the thread that calls it, with whatever locks the others
held at that moment: it is done only when this is the process's only thread
(``gmpscope ingest`` once the load is stored: the decoder's, the insert
worker's and the frame writer's threads have ended) and before the warm
starts any of its own (the WAL checkpoint). The child opens its own database
connections (``after_fork``: the parent's pooled ones are left alone) and
its own mapping of the frames, and ends with ``os._exit``: none of the
parent's exit handlers run in it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import struct
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from ingest.forking import can_fork, die_with_parent, exit_child

if TYPE_CHECKING:
    from ingest.derive.frames import TraceFrames

log = logging.getLogger("gmpscope.ingest.warm")

#: A named step of the warm, run on a mapping of the trace's frames.
Step = tuple[str, Callable[["TraceFrames"], object]]
#: done(step number, seconds it took): every step run, by whichever worker.
Done = Callable[[int, float], None]

#: A finished step as the child writes it: its number and seconds (fits in
#: PIPE_BUF, so each record is written whole).
_RECORD = struct.Struct("<Hd")


class StepQueue:
    """Step numbers 0..n-1 in a pipe, to be taken in that order."""

    def __init__(self, n: int) -> None:
        if n > 255:
            raise ValueError(f"{n} steps: the queue holds at most 255")
        self._r, w = os.pipe()
        try:
            os.write(w, bytes(range(n)))  # well under a pipe's 64 KB
        finally:
            os.close(w)  # an empty pipe then reads as its end

    def take(self) -> int | None:
        """The next step's number; None when every step was taken."""
        b = os.read(self._r, 1)
        return b[0] if b else None

    def close(self) -> None:
        os.close(self._r)


def run_steps(steps: Sequence[Step], open_frames: Callable[[], TraceFrames], *,
              workers: int, fork: bool, done: Done,
              after_fork: Callable[[], None],
              beside: Callable[[], AbstractContextManager[None]], what: str) -> None:
    """Run ``steps`` on ``workers`` workers, each on its own frames; with
    ``fork`` (and :func:`can_fork`), one of them a forked process.

    ``open_frames`` opens the frames (may raise TraceNotFound, which ends
    the warm quietly); ``beside()`` is a context this process's workers run
    in (started after the fork); ``after_fork`` runs first in the child;
    ``what`` (``trace 3``) names the steps' subject in the log."""
    from ingest.derive.frames import TraceNotFound

    queue = StepQueue(len(steps))
    try:
        child = _Child.start(queue, steps, open_frames, after_fork, what) \
            if fork and workers > 1 and can_fork() else None
        try:
            threads = workers - (1 if child is not None else 0)
            with beside():
                try:
                    frames = open_frames()
                    # Each thread on its own mapping: what a step maps goes back
                    # to the page cache after it (frames.release), which must
                    # not pull pages from under a step running beside it.
                    others = [frames.remapped() for _ in range(1, max(1, threads))]
                except TraceNotFound:
                    return  # deleted meanwhile
                except Exception:  # a bug, or the frames unreadable: the pages will say so
                    log.exception("opening the frames of %s failed", what)
                    return
                lock = threading.Lock()

                def heard(i: int, seconds: float) -> None:
                    with lock:
                        done(i, seconds)
                        if child is not None:
                            child.heard(done)

                helpers = [threading.Thread(target=_work, args=(queue, steps, f, heard, what),
                                            name=f"gmpscope-warm-{i}")
                           for i, f in enumerate(others, 1)]
                for h in helpers:
                    h.start()
                _work(queue, steps, frames, heard, what)
                for h in helpers:
                    h.join()
            if child is not None:
                with lock:
                    child.finish(done)
                child = None
        finally:
            if child is not None:
                child.stop()
    finally:
        queue.close()


def _work(queue: StepQueue, steps: Sequence[Step], frames: TraceFrames, done: Done,
          what: str) -> bool:
    """Take and run steps until none is left; False if the trace is gone."""
    from ingest.derive.frames import TraceNotFound
    from ingest.memory import give_back_if_big

    while (i := queue.take()) is not None:
        name, step = steps[i]
        started = time.perf_counter()
        try:
            step(frames)
        except TraceNotFound:
            return False
        except Exception:  # a bug: the pages will say so; keep the traceback in the log
            log.exception("%s of %s failed", name, what)
        frames.release()
        give_back_if_big()
        done(i, time.perf_counter() - started)
    return True


class _Child:
    """A forked worker: its pid, and the pipe it reports finished steps on."""

    def __init__(self, pid: int, records: int, what: str) -> None:
        self.pid = pid
        self.what = what
        self._records = records
        self._buf = b""

    @classmethod
    def start(cls, queue: StepQueue, steps: Sequence[Step],
              open_frames: Callable[[], TraceFrames], after_fork: Callable[[], None],
              what: str) -> _Child:
        r, w = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(r)
            _child_main(parent, queue, steps, open_frames, after_fork, w, what)
        os.close(w)
        os.set_blocking(r, False)
        return cls(pid, r, what)

    def heard(self, done: Done) -> None:
        """Pass on the steps the child has finished so far."""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self._records, 4096):
                self._buf += chunk
        self._pass_on(done)

    def finish(self, done: Done) -> None:
        """Wait for the child to end, passing on every step it finished."""
        os.set_blocking(self._records, True)
        while chunk := os.read(self._records, 4096):
            self._buf += chunk
        self._pass_on(done)
        os.close(self._records)
        _, status = os.waitpid(self.pid, 0)
        if status:
            log.warning("the forked worker warming %s ended with status %#x", self.what, status)

    def stop(self) -> None:
        """End the child (this process is failing or being interrupted)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        os.close(self._records)

    def _pass_on(self, done: Done) -> None:
        n = len(self._buf) // _RECORD.size * _RECORD.size
        for i, seconds in _RECORD.iter_unpack(self._buf[:n]):
            done(i, seconds)
        self._buf = self._buf[n:]


def _child_main(parent: int, queue: StepQueue, steps: Sequence[Step],
                open_frames: Callable[[], TraceFrames], after_fork: Callable[[], None],
                records: int, what: str) -> None:
    code = 1
    try:
        if not die_with_parent(parent):
            return  # the parent died before the child could ask to follow it
        after_fork()
        frames = open_frames()

        def report(i: int, seconds: float) -> None:
            os.write(records, _RECORD.pack(i, seconds))

        _work(queue, steps, frames, report, what)
        code = 0
    except BaseException:  # noqa: BLE001 - anything, logged; the steps left are built on demand
        with contextlib.suppress(BaseException):
            log.exception("the forked worker warming %s failed", what)
    finally:
        exit_child(code)
