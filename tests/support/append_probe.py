"""Runs in a gmpscope process (gmpscope's own SQLite loaded first, which the
pytest process cannot do: it imported sqlite3 long before) and prints JSON:
what tests/test_sqlite_append.py checks of gmpscope's appender.

``python -m tests.support.append_probe CASE DIR``
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from gmpscope import cli

#: One column of every kind the loader stores: integers of every serial
#: type's range, a gather through an int32 order, NULLs, texts (empty, long
#: enough for a two-byte header varint, not ASCII), and a literal.
CREATE = ("CREATE TABLE t (id INTEGER NOT NULL PRIMARY KEY, trace_id INTEGER NOT NULL, "
          "a BIGINT NOT NULL, b BIGINT, g INTEGER NOT NULL, s TEXT, n NUMERIC)")
#: The same without the text column: records of integers and NULLs alone
#: (the appender's own path for those, the intervals' case).
CREATE_INTS = CREATE.replace("TABLE t ", "TABLE u ").replace(" s TEXT,", "")
#: Tables with a unique key led by the trace id, as metrics, goroutines and
#: transition stacks have: k's keys ascend, kx's second index (on a column
#: in random order) makes the appender stop at its first row out of order and
#: hand the rest to statements.
CREATE_KEYED = ("CREATE TABLE k (trace_id INTEGER NOT NULL, seq BIGINT NOT NULL, "
                "v BIGINT, s TEXT, PRIMARY KEY (trace_id, seq))")
CREATE_KEYED_X = (CREATE_KEYED.replace("TABLE k ", "TABLE kx "),
                  "CREATE INDEX kx_v ON kx (v)")
EDGES = [0, 1, -1, 2, 127, 128, -128, -129, 32767, 32768, -32768, -32769, 8388607, 8388608,
         -8388608, -8388609, 2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**47 - 1, 2**47, -2**47,
         -2**47 - 1, 2**63 - 1, -2**63]


def _columns(n: int) -> dict[str, Any]:
    import numpy as np

    from ingest.columns import Gather, Nullable

    rng = np.random.default_rng(7)
    a = np.resize(np.array(EDGES, np.int64), n)
    b = Nullable(rng.integers(-2**40, 2**40, n), rng.random(n) < 0.3)
    order = rng.permutation(n).astype(np.int32)
    g = Gather(rng.integers(0, 300, n).astype(np.int16), order)
    texts = ["", "x" * 200, "Grüße, 世界", "runtime.gopark"]
    s: list[str | None] = [None if i % 7 == 0 else texts[i % 4] for i in range(n)]
    return {"trace_id": 5, "a": a, "b": b, "g": g, "s": s, "n": rng.integers(0, 10, n)}


def _fill(path: Path, append: bool, n: int) -> str:
    """A fresh database with table t holding n rows, its WAL checkpointed
    into the file; the file's sha256."""
    os.environ["GMPSCOPE_SQLITE_APPEND"] = "1" if append else "0"
    from sqlalchemy import MetaData, Table, text

    from ingest.store import bulk
    from ingest.store.db import make_engine, write_tx

    engine = make_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        for sql in (CREATE, CREATE_INTS, CREATE_KEYED, *CREATE_KEYED_X):
            conn.exec_driver_sql(sql)
        meta = MetaData()
        tables = [Table(name, meta, autoload_with=conn) for name in ("t", "u")]
        keyed = [Table(name, meta, autoload_with=conn) for name in ("k", "kx")]
    cols = _columns(n)
    with write_tx(engine, bulk=True) as conn:
        half = n // 2
        # Two calls: the second appends after the first's rows.
        first = {k: v if isinstance(v, int) else _part(v, 0, half) for k, v in cols.items()}
        rest = {k: v if isinstance(v, int) else _part(v, half, n) for k, v in cols.items()}
        for table in tables:
            names = {c.name for c in table.columns}
            for part in (first, rest):
                bulk.insert_columns(conn, table, {k: v for k, v in part.items() if k in names})
        # Keyed rows of trace 5 in two calls, then of trace 6 (its keys follow),
        # then of trace 4 (they sort before: statements from its first row).
        import numpy as np

        seq = np.cumsum(np.arange(n) % 5 + 1)
        for table in keyed:
            for trace_id, lo, hi in ((5, 0, half), (5, half, n), (6, 0, n), (4, 0, half)):
                bulk.insert_columns(conn, table, {
                    "trace_id": trace_id, "seq": seq[lo:hi], "v": _part(cols["b"], lo, hi),
                    "s": cols["s"][lo:hi]})
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        assert conn.execute(text("PRAGMA integrity_check")).scalar() == "ok"
    engine.dispose()
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _part(col: Any, a: int, b: int) -> Any:
    from ingest.columns import Gather, Nullable

    if isinstance(col, Gather):
        return Gather(col.values, col.index[a:b])
    if isinstance(col, Nullable):
        return Nullable(col.values[a:b], col.null[a:b])
    return col[a:b]


def same_file(work: Path) -> dict[str, Any]:
    import sqlite3

    from ingest.store import sqlite_fast

    ext = sqlite_fast._extension()
    n = 50_000
    return {"appender": bool(ext and ext.has_appender()), "sqlite": sqlite3.sqlite_version,
            "appended": _fill(work / "appended.db", True, n),
            "inserted": _fill(work / "inserted.db", False, n)}


def refusals(work: Path) -> dict[str, Any]:
    """What the appender answers for tables it must not take."""
    import sqlite3

    import numpy as np

    from ingest.store import sqlite_fast

    ext = sqlite_fast._extension()
    conn = sqlite3.connect(work / "r.db", isolation_level=None)
    conn.executescript("""
        CREATE TABLE plain (id INTEGER PRIMARY KEY, a INTEGER NOT NULL, s TEXT);
        CREATE TABLE indexed (id INTEGER PRIMARY KEY, a INTEGER);
        CREATE INDEX ix ON indexed (a);
        CREATE TABLE triggered (id INTEGER PRIMARY KEY, a INTEGER);
        CREATE TABLE log (a INTEGER);
        CREATE TRIGGER tr AFTER INSERT ON triggered BEGIN INSERT INTO log VALUES (new.a); END;
        CREATE TABLE temp_triggered (id INTEGER PRIMARY KEY, a INTEGER);
        CREATE TEMP TRIGGER ttr AFTER INSERT ON temp_triggered BEGIN SELECT 1; END;
        CREATE TABLE checked (id INTEGER PRIMARY KEY, a INTEGER CHECK (a >= 0));
        CREATE TABLE strict (id INTEGER PRIMARY KEY, a INTEGER) STRICT;
        CREATE TABLE auto (id INTEGER PRIMARY KEY AUTOINCREMENT, a INTEGER);
        CREATE TABLE textual (id INTEGER PRIMARY KEY, a TEXT);
        CREATE TABLE realish (id INTEGER PRIMARY KEY, a REAL);
        CREATE TABLE defaulted (id INTEGER PRIMARY KEY, a INTEGER, d INTEGER DEFAULT 3);
        CREATE TABLE parent (id INTEGER PRIMARY KEY, a INTEGER);
        CREATE TABLE child (id INTEGER PRIMARY KEY, a INTEGER REFERENCES parent (id));
        CREATE TABLE nokey (a INTEGER PRIMARY KEY) WITHOUT ROWID;
        CREATE TABLE text_index (id INTEGER PRIMARY KEY, a INTEGER, s TEXT);
        CREATE INDEX tix ON text_index (s);
        CREATE TABLE expr_index (id INTEGER PRIMARY KEY, a INTEGER);
        CREATE INDEX eix ON expr_index (a + 1);
        CREATE TABLE partial_index (id INTEGER PRIMARY KEY, a INTEGER);
        CREATE INDEX pix ON partial_index (a) WHERE a > 0;
        CREATE TABLE desc_index (id INTEGER PRIMARY KEY, a INTEGER);
        CREATE INDEX dix ON desc_index (a DESC);
        CREATE TABLE nocase_index (id INTEGER PRIMARY KEY, a INTEGER);
        CREATE INDEX nix ON nocase_index (a COLLATE NOCASE);
    """)
    ints = (np.arange(3, dtype=np.int64), None, None, 0)
    texts = (None, None, None, 0, ["x", None, "z"])

    def ask(table: str, names: list[str] | None = None, specs: list[Any] | None = None,
            fk: bool = False) -> Any:
        conn.execute(f"PRAGMA foreign_keys={'ON' if fk else 'OFF'}")
        conn.execute("BEGIN IMMEDIATE")
        try:
            return ext.append_columns(conn, table, names or ["a"], [], [], 3, specs or [ints])
        finally:
            conn.execute("ROLLBACK")

    out = {"plain": ask("plain", ["a", "s"], [ints, texts])}
    out |= {name: ask(name) for name in ("indexed", "triggered", "temp_triggered",
                                        "checked", "strict", "auto", "textual", "realish",
                                        "defaulted", "nokey", "nosuch", "expr_index",
                                        "partial_index", "desc_index", "nocase_index")}
    out["text_index"] = ask("text_index", ["a", "s"], [ints, texts])
    out["child, foreign keys on"] = ask("child", fk=True)
    out["child, foreign keys off"] = ask("child")
    out["parent, foreign keys on"] = ask("parent", fk=True)
    out["rowid given"] = ask("plain", ["id", "a", "s"], [ints, ints, texts])
    out["text into an integer column"] = ask("plain", ["a", "s"], [texts, texts])
    out["a column left out"] = ask("plain")
    out["no transaction"] = ext.append_columns(conn, "plain", ["a"], [], [], 3, [ints])
    return out


def _both_ways(work: Path, label: str, create: str, table: str, names: list[str],
               cols: list[Any], n: int, literals: dict[str, int]) -> dict[str, Any]:
    """Rows that fail an insert, appended and inserted through statements,
    each in a transaction of a fresh database: the error and the rows kept
    before it (INSERT OR FAIL keeps them)."""
    import sqlite3

    from ingest.store import sqlite_fast

    out: dict[str, Any] = {}
    for append in (True, False):
        os.environ["GMPSCOPE_SQLITE_APPEND"] = "1" if append else "0"
        conn = sqlite3.connect(work / f"{label}{int(append)}.db", isolation_level=None)
        conn.execute(create)
        conn.execute("BEGIN IMMEDIATE")
        insert = sqlite_fast.column_inserter(conn)
        assert insert is not None
        try:
            insert(table, names, cols, 0, n, literals)
            error = None
        except sqlite3.IntegrityError as e:
            error = str(e)
        kept = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        conn.execute("ROLLBACK")
        out["appended" if append else "inserted"] = {"error": error, "kept": kept}
    return out


def not_null(work: Path) -> dict[str, Any]:
    """A NULL in a NOT NULL column."""
    import numpy as np

    from ingest.columns import Nullable

    null = np.zeros(10, bool)
    null[6] = True
    return _both_ways(
        work, "nn", "CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER NOT NULL, b INTEGER)",
        "t", ["a", "b"], [Nullable(np.arange(10, dtype=np.int64), null),
                          np.arange(10, dtype=np.int64)], 10, {})


def duplicate_key(work: Path) -> dict[str, Any]:
    """A key given twice in a table with a unique key."""
    import numpy as np

    seq = np.array([1, 2, 3, 4, 4, 5, 6], np.int64)
    return _both_ways(work, "dup", CREATE_KEYED, "k", ["seq", "v", "s"],
                      [seq, np.arange(7, dtype=np.int64), ["x"] * 7], 7, {"trace_id": 1})


CASES = {"same_file": same_file, "refusals": refusals, "not_null": not_null,
         "duplicate_key": duplicate_key}

if __name__ == "__main__":
    cli.configure_process()
    print(json.dumps(CASES[sys.argv[1]](Path(sys.argv[2]))))
