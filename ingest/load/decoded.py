"""A decoded trace in memory, straight from the C decoder (no Parquet files).

The loader (:mod:`ingest.load.pipeline`) takes a :class:`Decoded` apart table by
table. Heavy imports (numpy, Arrow, the decoder) happen inside the functions,
so that :mod:`ingest.load.decode_ahead` can start a decode before anything else
is imported.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collectors.gotrace.mapped import MappedTrace
from ingest.load.row_group_handoff import RowGroupHandOff

if TYPE_CHECKING:
    from ingest.load.event_split import EventParts
    from ingest.load.transition_spill import TransitionSpill


class Decoded:
    """A decoded trace in memory: meta.json's content, the transitions as
    compact columns, the events split by the table they become
    (:class:`ingest.load.event_split.EventParts`) and the stacks as Arrow tables.

    :meth:`take` hands them over and forgets them, so that the loader alone
    holds them and can drop each as soon as it is done with it.
    """

    def __init__(self, meta: dict[str, Any], tr: TransitionSpill, events: EventParts,
                 tstacks: Any, stacks: Any) -> None:
        self._parts: tuple[dict[str, Any], TransitionSpill, EventParts, Any, Any] | None = (
            meta, tr, events, tstacks, stacks)

    def take(self) -> tuple[dict[str, Any], TransitionSpill, EventParts, Any, Any]:
        """(meta, transitions, events, transition_stacks, stacks), once."""
        if self._parts is None:
            raise RuntimeError("a decoded trace is loaded once")
        parts, self._parts = self._parts, None
        return parts


def decode_file_in_memory(path: Path, data_dir: Path | None = None) -> Decoded | None:
    """Decode a Go 1.22+ trace with the C decoder straight into memory (no
    Parquet written and read back; a big trace's transitions spilled under
    ``data_dir``: ingest.load.transition_spill); None when that decoder does
    not apply. Raises TraceFormatError for a file that is not a trace."""
    from collectors.gotrace.mapped import MappedTrace

    mapped = MappedTrace(path)
    return decode_bytes(path, [mapped], mapped.sha256(), data_dir=data_dir)


def decode_bytes(path: Path, content: list[bytes | MappedTrace], sha256: str,
                 cancelled: Callable[[], bool] = lambda: False,
                 handoff: RowGroupHandOff | None = None,
                 data_dir: Path | None = None) -> Decoded | None:
    """:func:`decode_file_in_memory` of the file's content, the one item of
    ``content`` (whose hash is ``sha256``), which it takes out: raw bytes are
    freed as soon as they are decoded, before the columns are joined; a
    mapped file gives back each generation's pages once it is decoded.
    Stops with DecodeCancelled between row groups once ``cancelled()`` is true.
    With ``handoff``, the row groups are copied into the transitions' columns
    through it (by a thread that helps, or by this one); it is closed when
    this returns or raises."""
    from collectors.gotrace import columnar
    from collectors.gotrace.errors import TraceFormatError
    from collectors.gotrace.reader import read_header

    item = content.pop()
    mapped = item if isinstance(item, MappedTrace) else None
    data = item.buffer if isinstance(item, MappedTrace) else item
    del item
    if not len(data):
        raise TraceFormatError(-1, "empty file, not a Go trace")
    _, family = read_header(data[:16])
    if family != "v2" or not columnar.available():
        if mapped is not None:
            mapped.close()
        return None
    from ingest.load.event_split import EventParts
    from ingest.load.event_split import groups as event_groups
    from ingest.load.transition_spill import TransitionSpill, spill_dir

    # In memory, room for a transition every two bytes of trace: more than a
    # trace holds (the benchmark's: one every five); the untouched room takes
    # no memory, and a trace denser than that goes on as parts.
    spill_to = spill_dir(data_dir, trace_bytes=len(data))
    builder = TransitionSpill(spill_to, capacity=len(data) // 2)
    events = EventParts(spill_to)
    if handoff is None:
        handoff = RowGroupHandOff()
    # Both kinds of row group go through the one hand-off, in the decoder's
    # order: the events' split (Python and Arrow, 2.3 s of the 200 MB
    # trace's decode) runs beside the C decoder on the second core as the
    # transitions' copy does, instead of between its row groups.
    handoff.bind(_add_row_group)

    def add(table: Any) -> None:
        if cancelled():
            raise DecodeCancelled(str(path))
        handoff.put((builder.add, table))

    def add_events(target: int, table: Any, strings: list[str]) -> None:
        if cancelled():
            raise DecodeCancelled(str(path))
        handoff.put((functools.partial(events.add_group, target, strings=strings), table))

    source = {"name": path.name, "size": len(data), "sha256": sha256}
    try:
        # The events come apart by target table, each with its columns only:
        # the split takes no rows out of a wide table (2.4 -> 1.4 s of the 200
        # MB trace's), and the decoder writes no column a target does not read.
        meta, tables = columnar.decode_in_memory(
            data, add, source=source, grouped=(event_groups(), add_events),
            release=mapped.release_before if mapped is not None else None)
        del data
        if mapped is not None:
            mapped.close()
        handoff.finish()
        spill = builder.seal(int(meta["transitions"]))
    except BaseException:
        builder.close()
        events.close()
        raise
    finally:
        handoff.close()
    return Decoded(meta, spill, events, tables["transition_stacks"], tables["stacks"])


def _add_row_group(item: tuple[Callable[[Any], None], Any]) -> None:
    """Hand-off target: (where the row group goes, the row group)."""
    add, table = item
    add(table)


def import_decoder() -> None:
    """Import what :func:`decode_bytes` needs (numpy, Arrow and its compute
    functions, which a decode would import on first use, the decoder, the
    transitions' builder): SQLAlchemy is not among them."""
    import numpy.ma  # noqa: F401  # pyarrow reaches it when it takes numpy indices
    import pyarrow.compute  # type: ignore[import-untyped]  # noqa: F401

    import collectors.gotrace.columnar  # noqa: F401
    import collectors.gotrace.reader  # noqa: F401
    import ingest.load.event_split  # noqa: F401
    import ingest.load.transition_spill  # noqa: F401
    import ingest.load.transitions_builder  # noqa: F401
    from ingest.extensions import optional_extension

    optional_extension("ingest.load._columnappend")  # the builder's row-group copy


class DecodeCancelled(Exception):
    """A decode ahead was stopped because its result is not needed."""
