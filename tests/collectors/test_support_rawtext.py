"""Unit tests of the raw-text-to-wire converter (tests/support/rawtext.py).

The end-to-end check against Go lives in tests/collectors/test_go_golden_v2.py."""

from __future__ import annotations

import pytest

from tests.support.rawtext import canonical_lines, parse_txtar, specs_for, text_to_binary, uvarint


def test_uvarint() -> None:
    assert uvarint(0) == b"\x00"
    assert uvarint(127) == b"\x7f"
    # 300 = 0b10_0101100: low 7 bits 0x2c with the continuation bit -> 0xac, then 0x02.
    assert uvarint(300) == b"\xac\x02"
    assert uvarint((1 << 64) - 1) == b"\xff" * 9 + b"\x01"
    with pytest.raises(ValueError):
        uvarint(1 << 64)


def test_version_tables() -> None:
    # Go 1.22 ends at UserLog (44); 1.23 adds up to ExperimentalBatch (49);
    # 1.25 adds Sync and ClockSnapshot; 1.26 EndOfGeneration and experiments.
    assert specs_for(22)["UserLog"][0] == 44 and "GoSwitch" not in specs_for(22)
    assert specs_for(23)["ExperimentalBatch"][0] == 49 and "Sync" not in specs_for(23)
    assert specs_for(25)["ClockSnapshot"][0] == 51 and "EndOfGeneration" not in specs_for(25)
    assert specs_for(26)["EndOfGeneration"][0] == 52 and specs_for(26)["Span"][0] == 128
    with pytest.raises(ValueError):
        specs_for(21)


TEXT = """\
Trace Go1.22
# a comment
EventBatch gen=1 m=0 time=300 size=5
Stack id=1 nframes=1
\tpc=1 func=2 file=3 line=4
String id=2
\tdata="a\\x00\\u00e9"
"""


def test_text_to_binary() -> None:
    version, data = text_to_binary(TEXT)
    assert version == 22
    assert data == (
        b"go 1.22 trace\x00\x00\x00"
        + bytes([1, 1, 0]) + b"\xac\x02" + bytes([5])  # EventBatch gen m time size
        + bytes([3, 1, 1, 1, 2, 3, 4])  # Stack id nframes pc func file line
        + bytes([5, 2, 4]) + b"a\x00\xc3\xa9"  # String id len data
    )  # fmt: skip
    assert canonical_lines(TEXT) == [
        ("EventBatch", "gen=1", "m=0", "time=300", "size=5"),
        ("Stack", "id=1", "nframes=1"),
        ("pc=1", "func=2", "file=3", "line=4"),
        ("String", "id=2"),
        b"a\x00\xc3\xa9",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Trace Go1.21\n",
        "Trace Go1.22\nNoSuchEvent x=1\n",
        "Trace Go1.22\nProcStop dt=1 extra=2\n",
        "Trace Go1.22\nProcStop t=1\n",
        "Trace Go1.22\nStack id=1 nframes=2\n\tpc=1 func=2 file=3 line=4\n",
        "Trace Go1.22\nString id=1\n",
    ],
)
def test_text_errors(text: str) -> None:
    with pytest.raises(ValueError):
        text_to_binary(text)


def test_parse_txtar() -> None:
    assert parse_txtar("comment\n-- expect --\nSUCCESS\n-- trace --\nTrace Go1.22\n") == [
        ("expect", "SUCCESS\n"),
        ("trace", "Trace Go1.22\n"),
    ]
