"""Decoding a raw trace on a thread while the caller opens the database.

``gmpscope ingest`` spends its first moments importing SQLAlchemy and opening
(on a new database: creating) the schema, single-threaded Python work; the C
decoder releases the GIL while it decodes. Started first, the decode overlaps
that set-up instead of following it. Only the standard library is imported
here; the thread imports the decoder and what it needs, and the caller waits
for those imports (:meth:`DecodeAhead.wait_imports`) before it imports anything
itself: two threads importing the same packages at once can see each other's
modules half initialised (CPython breaks import-lock cycles that way).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from collectors.gotrace.mapped import MappedTrace
from ingest.load.row_group_handoff import RowGroupHandOff

if TYPE_CHECKING:
    from ingest.load.decoded import Decoded


class DecodeAhead:
    """The decode of the trace file ``path``, running on its own thread.

    :meth:`sha256` answers as soon as the file is read and hashed (to find an
    already stored copy before the decode ends); :meth:`result` waits for the
    decode and raises what it raised; :meth:`cancel` stops it at its next row
    group when the result is not needed. ``data_dir``: where a big trace's
    transitions are spilled (ingest.load.transition_spill.spill_dir).
    """

    def __init__(self, path: Path, data_dir: Path | None = None) -> None:
        self.path = Path(path)
        self.data_dir = data_dir
        #: Seconds the thread spent reading, hashing and decoding.
        self.seconds = 0.0
        self._sha: str | None = None
        self._imported = threading.Event()
        self._hashed = threading.Event()
        self._cancelled = threading.Event()
        self._decoded: Decoded | None = None
        self._handoff = RowGroupHandOff()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="gmpscope-decode-ahead",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        start = time.perf_counter()
        try:
            try:
                from ingest.load.decoded import decode_bytes, import_decoder

                import_decoder()
            finally:
                self._imported.set()
            mapped = MappedTrace(self.path)
            self._sha = mapped.sha256()
            self._hashed.set()
            content: list[bytes | MappedTrace] = [mapped]
            del mapped  # decode_bytes takes it out of ``content``
            self._decoded = decode_bytes(self.path, content, self._sha, self._cancelled.is_set,
                                         self._handoff, self.data_dir)
        except BaseException as e:  # noqa: BLE001 - handed to result()
            self._error = e
        finally:
            self._handoff.close()  # a decode that never started: the helper returns
            self._hashed.set()
            self.seconds = time.perf_counter() - start

    def wait_imports(self) -> None:
        """Wait until the thread has imported the decoder and its dependencies
        (the caller may import the same packages after that)."""
        self._imported.wait()

    def sha256(self) -> str | None:
        """The file's sha256; None when it could not be read (result() says why)."""
        self._hashed.wait()
        return self._sha

    def result(self) -> Decoded | None:
        """The decoded trace, or None when the C decoder does not apply to it.
        Meanwhile this thread copies the decoder's row groups into the
        transitions' columns (ingest.load.row_group_handoff)."""
        self._handoff.help()
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        decoded, self._decoded = self._decoded, None
        return decoded

    def cancel(self) -> None:
        """Stop the decode (its result is not needed) and wait for the thread."""
        self._cancelled.set()
        self._thread.join()
        self._decoded = self._error = None
