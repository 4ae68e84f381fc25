"""Go's wait reasons in the categories the pages split Waiting by
(``Waiting: network``, ``Waiting: sync``, ...): the state graphs, the
overview's series and the goroutine views name them alike."""

from __future__ import annotations

#: Wait reason categories, in display order.
WAIT_CATEGORIES = ("network", "sync", "chan", "select", "sleep", "GC assist", "other")


def wait_category(reason: str) -> str:
    """The category of one of Go's wait reasons (see WAIT_CATEGORIES)."""
    r = reason.strip()
    if r == "network":
        return "network"
    if r.startswith("sync") or r.startswith("semacquire"):
        return "sync"
    if r.startswith("chan"):
        return "chan"
    if r.startswith("select"):
        return "select"
    if r == "sleep":
        return "sleep"
    if "assist" in r or r == "wait until GC ends":
        return "GC assist"
    return "other"


def node_name(state: str, category: str | None) -> str:
    """``Waiting: <category>`` for a split Waiting node, else the state."""
    return f"Waiting: {category}" if state == "Waiting" and category else state
