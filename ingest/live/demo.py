"""The live demo ``make run`` starts beside the explorer, as the library page tells of it.

``make run`` (tools/run.py) runs the demo service, its load generator and a
``gmpscope live`` collector feeding session ``demo``; while they run it keeps a
note of them in ``DATA/demo.json`` (:func:`write_note`), removed when they stop. The
library page and ``GET /api/live/demo`` read it (:func:`running_demo`): what runs,
where, and how to stop it. A note whose processes are all gone (the runner was
killed) is ignored.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

NOTE_FILE = "demo.json"


def note_path(data_dir: Path) -> Path:
    """Where the note of the running demo is kept."""
    return data_dir / NOTE_FILE


def write_note(data_dir: Path, note: dict[str, Any]) -> Path:
    """Keep ``note`` (session, target, processes with name/pid/what, stop) for the page."""
    path = note_path(data_dir)
    tmp = path.with_name(f".{NOTE_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(note, indent=1))
    os.replace(tmp, path)
    return path


def remove_note(data_dir: Path, owner_pid: int) -> None:
    """Remove the note if the process ``owner_pid`` wrote it."""
    path = note_path(data_dir)
    found = _read(path)
    if found is not None and found.get("owner_pid") == owner_pid:
        path.unlink(missing_ok=True)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


def running_demo(data_dir: Path) -> dict[str, Any] | None:
    """The note of the demo running for ``data_dir``, each process marked ``alive``;
    None when there is none or none of its processes runs."""
    note = _read(note_path(data_dir))
    if note is None or not isinstance(note.get("processes"), list):
        return None
    procs = [dict(p, alive=_alive(p.get("pid"))) for p in note["processes"]
             if isinstance(p, dict)]
    if not any(p["alive"] for p in procs):
        return None
    return {**note, "processes": procs}
