"""The small integer codes of states and resources used in memory while deriving
(the database stores names). No SQLAlchemy here: the decoder's thread
(ingest/load/decode_ahead.py) imports these without the models."""

from __future__ import annotations

STATE_NAMES = ("Undetermined", "NotExist", "Runnable", "Running", "Waiting", "Syscall", "Idle")
STATE_CODE = {name: code for code, name in enumerate(STATE_NAMES)}
RUNNING = STATE_CODE["Running"]
SYSCALL = STATE_CODE["Syscall"]
RESOURCE_NAMES = ("goroutine", "proc")
RESOURCE_CODE = {name: code for code, name in enumerate(RESOURCE_NAMES)}
GOROUTINE = RESOURCE_CODE["goroutine"]
PROC = RESOURCE_CODE["proc"]
