"""What the SQL page lets a statement do (docs/sql.md#what-is-refused).

:class:`SQLiteGuard` is the SQLite authorizer and progress handler of one
query; :data:`PG_DENIED` names the PostgreSQL functions refused before a query
is sent; :func:`first_keyword` reads a statement's first word for the
refusal's message.
"""

from __future__ import annotations

import re
import sqlite3
import time
from dataclasses import dataclass, field

#: PRAGMAs whose argument is a table or index name (schema introspection).
SQLITE_NAME_PRAGMAS = frozenset({
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
    "foreign_key_list"})
#: PRAGMAs allowed without an argument only: with one (``page_size=4096``,
#: ``journal_mode=DELETE``) they change the database.
SQLITE_READ_PRAGMAS = frozenset({
    "database_list", "compile_options", "function_list", "pragma_list", "collation_list",
    "module_list", "page_count", "page_size", "freelist_count", "user_version", "encoding",
    "journal_mode", "foreign_keys", "query_only"})
#: SQL functions that reach files, load code or swap internals.
SQLITE_DENIED_FUNCTIONS = frozenset({
    "load_extension", "fts3_tokenizer", "readfile", "writefile", "edit", "fsdir", "zipfile",
    "sqlar_compress", "sqlar_uncompress", "lsmode"})

#: What each refused authorizer action is called in a refusal.
_ACTIONS = {
    sqlite3.SQLITE_INSERT: "INSERT", sqlite3.SQLITE_UPDATE: "UPDATE",
    sqlite3.SQLITE_DELETE: "DELETE", sqlite3.SQLITE_ATTACH: "ATTACH",
    sqlite3.SQLITE_DETACH: "DETACH", sqlite3.SQLITE_TRANSACTION: "transaction control",
    sqlite3.SQLITE_SAVEPOINT: "SAVEPOINT", sqlite3.SQLITE_ALTER_TABLE: "ALTER TABLE",
    sqlite3.SQLITE_REINDEX: "REINDEX", sqlite3.SQLITE_ANALYZE: "ANALYZE",
    sqlite3.SQLITE_CREATE_VTABLE: "CREATE VIRTUAL TABLE",
    sqlite3.SQLITE_DROP_VTABLE: "DROP VIRTUAL TABLE",
}
_CREATE = {getattr(sqlite3, n) for n in dir(sqlite3) if n.startswith("SQLITE_CREATE_")}
_DROP = {getattr(sqlite3, n) for n in dir(sqlite3) if n.startswith("SQLITE_DROP_")}

#: PostgreSQL functions refused by name: the server's files (readable by a
#: privileged role even in a read-only transaction), large objects, other
#: sessions, session-wide locks and settings, notifications.
PG_DENIED = re.compile(
    r"\b(pg_read_file|pg_read_binary_file|pg_ls_\w+|pg_stat_file|pg_file_\w+"
    r"|lo_import|lo_export|lo_get|lo_put|lo_open|lo_create|lo_creat|lo_unlink|lo_from_bytea"
    r"|dblink\w*|pg_terminate_backend|pg_cancel_backend|pg_reload_conf|pg_rotate_logfile"
    r"|pg_advisory\w*|pg_try_advisory\w*|set_config|pg_notify|pg_promote|pg_switch_wal"
    r"|pg_log_backend_memory_contexts|query_to_xml\w*|table_to_xml\w*|cursor_to_xml\w*)\b")

class SQLError(ValueError):
    """A query the database could not run (bad syntax, unknown name): 400."""


class SQLRefused(SQLError):
    """A statement the SQL page never runs (a write, ATTACH, a PRAGMA that
    changes state...): 403."""


class SQLTimeout(SQLError):
    """A query stopped at the time limit: 400."""


def timed_out(timeout_ms: int) -> SQLTimeout:
    """The error of a query stopped at the time limit."""
    return SQLTimeout(f"the query ran longer than the {timeout_ms / 1000:g} s limit "
                      "and was stopped")


_COMMENT_OR_SPACE = re.compile(r"(\s+|--[^\n]*(\n|$)|/\*.*?\*/|\()", re.DOTALL)
_WORD = re.compile(r"[A-Za-z_]+")


def first_keyword(sql: str) -> str:
    """The statement's first word, lower case, after spaces, comments and
    opening parentheses ('' when there is none)."""
    pos = 0
    while True:
        m = _COMMENT_OR_SPACE.match(sql, pos)
        if not m or m.end() == pos:
            break
        pos = m.end()
    w = _WORD.match(sql, pos)
    return w.group(0).lower() if w else ""


@dataclass
class SQLiteGuard:
    """The authorizer and progress handler of one SQLite query.

    The authorizer allows reading tables and views, recursive CTEs, functions
    but :data:`SQLITE_DENIED_FUNCTIONS`, and the PRAGMAs above; it denies the
    rest and remembers what, for the message. The progress handler ends the
    query once ``deadline`` (``time.monotonic()``) has passed.
    """

    deadline: float
    denied: str | None = None
    timed_out: bool = False
    _seen: list[str] = field(default_factory=list)

    #: SQLite calls the progress handler every this many virtual machine steps
    #: (a few hundred microseconds of work).
    PROGRESS_STEPS = 20_000

    def authorize(self, action: int, arg1: str | None, arg2: str | None,
                  _db: str | None, _trigger: str | None) -> int:
        """sqlite3's authorizer callback."""
        if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE):
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION:
            if (arg2 or "").lower() not in SQLITE_DENIED_FUNCTIONS:
                return sqlite3.SQLITE_OK
            return self._deny(f"the function {arg2}()")
        if action == sqlite3.SQLITE_PRAGMA:
            name = (arg1 or "").lower()
            if name in SQLITE_NAME_PRAGMAS or (name in SQLITE_READ_PRAGMAS and arg2 is None):
                return sqlite3.SQLITE_OK
            shown = f"PRAGMA {name}" + (f"={arg2}" if arg2 is not None else "")
            return self._deny(shown)
        if action in _ACTIONS:
            return self._deny(_ACTIONS[action])
        if action in _CREATE:
            return self._deny("CREATE")
        if action in _DROP:
            return self._deny("DROP")
        return self._deny("this statement")

    def _deny(self, what: str) -> int:
        if self.denied is None:
            self.denied = what
        return sqlite3.SQLITE_DENY

    def progress(self) -> int:
        """sqlite3's progress handler: non-zero stops the query."""
        if time.monotonic() > self.deadline:
            self.timed_out = True
            return 1
        return 0

    def explain(self, e: sqlite3.Error, timeout_ms: int) -> SQLError:
        """The SQLError (or subclass) for SQLite's error ``e`` in this query."""
        message = str(e)
        if self.timed_out:
            return timed_out(timeout_ms)
        if self.denied is not None or "not authorized" in message:
            what = self.denied or "this statement"
            return SQLRefused(f"{what} is not allowed: the SQL page only reads")
        if "readonly database" in message:
            return SQLRefused("writing is not allowed: the SQL page only reads")
        return SQLError(message)
