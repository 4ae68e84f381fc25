"""Type stub of the C extension (collectors/gotrace/csrc): the fast decoder
of Go 1.22+ traces into column chunks (see collectors/gotrace/columnar.py)."""

from typing import Any

CHUNK_ROWS: int

# A column: (values, int32 string offsets or None, validity bitmap or None), as
# read-only buffer-protocol objects owning their memory. Values are int64, or
# int32 dictionary indices for the columns columnar.py reads as dictionaries.
_Column = tuple[Any, Any, Any]

class Decoder:
    def __init__(self, data: Any, minor: int,
                 groups: list[tuple[int, int]] | None = None) -> None: ...
    def next_chunk(self, limit: int = ...) -> list[tuple[int, int, list[_Column]]] | None: ...
    def result(self) -> dict[str, Any]: ...
    def stacks(self) -> tuple[int, tuple[bytes, ...], list[int]]: ...
    def dictionaries(self) -> tuple[list[str], bool]: ...
    def consumed(self) -> int: ...
