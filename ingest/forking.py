"""What a forked worker of a load or a warm needs to be safe.

A fork copies only the thread that calls it, with whatever locks the others
held at that moment: ingest forks only when the calling thread is the
process's only one (:func:`can_fork`). The child asks to be killed with its
parent (:func:`die_with_parent`) so that no orphan goes on writing, and ends
with ``os._exit`` (:func:`exit_child`): none of the parent's exit handlers,
finalizers or buffered files run or are flushed twice in it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from typing import NoReturn

_PR_SET_PDEATHSIG = 1


def can_fork() -> bool:
    """Whether a worker may be a forked process: this is the only thread."""
    return hasattr(os, "fork") and threading.active_count() == 1


def die_with_parent(parent: int) -> bool:
    """SIGKILL this (forked) process when ``parent`` dies; False when it
    already has (the child then has nothing to do)."""
    from ingest.memory import libc

    c = libc()
    prctl = getattr(c, "prctl", None) if c is not None else None
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # Ctrl-C reaches the whole process group: the parent stops the child.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return os.getppid() == parent


def exit_child(code: int) -> NoReturn:
    """End a forked child: its log handlers flushed, nothing else run."""
    with contextlib.suppress(BaseException):
        logging.shutdown()  # flush the inherited handlers: os._exit does not
    os._exit(code)
