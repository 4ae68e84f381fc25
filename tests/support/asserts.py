"""Comparisons of our decoded events with Go's, with readable failure messages.

All functions take two lists of :class:`support.goparsed.GoEvent` (convert
ours with :func:`support.goparsed.ours_as_go`) and raise ``AssertionError``
with the first difference, a few events of context from each side (one line
per event, close to Go's own ``Event.String()`` first line) and the totals.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import fields

from .goparsed import GoEvent, Stack
from .gostrings import go_quote

CONTEXT = 3
_FIELDS = [f.name for f in fields(GoEvent)]


def _stack_brief(stk: Stack) -> str:
    if not stk:
        return "-"
    top = stk[0]
    return f"{top.func}@{top.pc:#x}/{len(stk)}"


def fmt_event(e: GoEvent) -> str:
    """A compact one-line rendering of an event (all fields that matter)."""
    parts = [f"M={e.m} P={e.p} G={e.g} {e.kind} Time={e.ts}"]
    k = e.kind
    if k == "StateTransition":
        rk = {"goroutine": "GoID", "proc": "ProcID"}.get(e.resource, e.resource or "?")
        parts.append(f"{rk}={e.rid} {e.from_state}->{e.to_state} Reason={go_quote(e.reason)}")
        parts.append(f"tstk={_stack_brief(e.tstack)}")
    elif k == "Metric":
        parts.append(f"Name={go_quote(e.name)} Value={e.value!r}")
    elif k == "Label":
        parts.append(f"Label={go_quote(e.name)} Resource={e.scope}({e.scope_id})")
    elif k.startswith("Range"):
        parts.append(f"Name={go_quote(e.name)} Scope={e.scope}({e.scope_id})")
        if e.attrs:
            parts.append(f"Attrs={list(e.attrs)!r}")
    elif k.startswith("Task"):
        parts.append(f"ID={e.task} Parent={e.parent} Type={go_quote(e.name)}")
    elif k.startswith("Region"):
        parts.append(f"Task={e.task} Type={go_quote(e.name)}")
    elif k == "Log":
        parts.append(f"Task={e.task} Category={go_quote(e.category)} Message={go_quote(e.message)}")
    elif k == "Sync":
        parts.append(f"N={e.n}")
        if e.clock is not None:
            parts.append(f"Clock={tuple(e.clock)}")
    elif k == "Experimental":
        parts.append(f"Name={e.name} Args={list(e.attrs)!r}")
    parts.append(f"stk={_stack_brief(e.stack)}")
    return " ".join(parts)


def _field_diff(a: GoEvent, b: GoEvent) -> str:
    out = []
    for name in _FIELDS:
        va, vb = getattr(a, name), getattr(b, name)
        if va != vb:
            if name in ("stack", "tstack"):
                out.append(
                    f"  {name}: ours={_fmt_stack(va)}\n  {' ' * len(name)}    go={_fmt_stack(vb)}"
                )
            else:
                out.append(f"  {name}: ours={va!r} go={vb!r}")
    return "\n".join(out)


def _fmt_stack(stk: Stack) -> str:
    return "[" + ", ".join(f"{f.func}@{f.pc:#x} {f.file}:{f.line}" for f in stk) + "]"


def _window(evs: Sequence[GoEvent], i: int, label: str) -> str:
    lo, hi = max(0, i - CONTEXT), min(len(evs), i + CONTEXT + 1)
    lines = [f"  {label} [{lo}:{hi}] of {len(evs)}:"]
    for j in range(lo, hi):
        mark = ">>" if j == i else "  "
        lines.append(f"  {mark} {j}: {fmt_event(evs[j])}")
    if lo >= hi:
        lines.append("     (no events here)")
    return "\n".join(lines)


def _totals(ours: Sequence[GoEvent], go: Sequence[GoEvent]) -> str:
    co, cg = Counter(e.kind for e in ours), Counter(e.kind for e in go)
    kinds = sorted(set(co) | set(cg))
    diff = ", ".join(f"{k}: ours={co[k]} go={cg[k]}" for k in kinds if co[k] != cg[k])
    return f"totals: ours={len(ours)} go={len(go)}" + (
        f"; per kind differing: {diff}" if diff else ""
    )


def first_difference(ours: Sequence[GoEvent], go: Sequence[GoEvent]) -> int:
    """Index of the first differing event, or -1 when the lists are equal."""
    for i, (a, b) in enumerate(zip(ours, go, strict=False)):
        if a != b:
            return i
    if len(ours) != len(go):
        return min(len(ours), len(go))
    return -1


def assert_same_events(
    ours: Sequence[GoEvent], go: Sequence[GoEvent], what: str = "events"
) -> None:
    """Same length, same order, every field equal."""
    i = first_difference(ours, go)
    if i < 0:
        return
    msg = [f"{what} differ at index {i}; {_totals(ours, go)}"]
    if i < len(ours) and i < len(go):
        msg.append(_field_diff(ours[i], go[i]))
    else:
        msg.append("  one side ends here")
    msg.append(_window(ours, i, "ours"))
    msg.append(_window(go, i, "go"))
    raise AssertionError("\n".join(msg))


def assert_same_kind_counts(ours: Sequence[GoEvent], go: Sequence[GoEvent]) -> None:
    """Same number of events of each kind."""
    co, cg = Counter(e.kind for e in ours), Counter(e.kind for e in go)
    if co != cg:
        raise AssertionError(_totals(ours, go))


_TKey = tuple[int, str, str, str, int, int, int]


def _transitions(evs: Sequence[GoEvent]) -> dict[tuple[str, int], list[tuple[_TKey, int]]]:
    per: dict[tuple[str, int], list[tuple[_TKey, int]]] = {}
    for i, e in enumerate(evs):
        if e.kind == "StateTransition":
            key = (e.ts, e.from_state, e.to_state, e.reason, e.m, e.p, e.g)
            per.setdefault((e.resource, e.rid), []).append((key, i))
    return per


def assert_same_transitions(ours: Sequence[GoEvent], go: Sequence[GoEvent]) -> None:
    """For every goroutine and proc the same sequence of (ts, from, to,
    reason, m, p, g), and the same counts per (resource, from, to, reason)."""
    to, tg = _transitions(ours), _transitions(go)
    problems: list[str] = []
    for res in sorted(set(to) | set(tg)):
        so, sg = to.get(res, []), tg.get(res, [])
        ko, kg = [k for k, _ in so], [k for k, _ in sg]
        if ko == kg:
            continue
        pairs = enumerate(zip(ko, kg, strict=False))
        j = next((n for n, (a, b) in pairs if a != b), min(len(ko), len(kg)))
        lines = [
            f"{res[0]} {res[1]}: {len(ko)} transitions ours, {len(kg)} go; first difference at #{j}"
        ]
        for label, seq, evs in (("ours", so, ours), ("go", sg, go)):
            lo, hi = max(0, j - CONTEXT), min(len(seq), j + CONTEXT + 1)
            lines.append(f"  {label}:")
            for n in range(lo, hi):
                idx = seq[n][1]
                lines.append(f"  {'>>' if n == j else '  '} #{n} [{idx}] {fmt_event(evs[idx])}")
        problems.append("\n".join(lines))
        if len(problems) >= 3:
            break
    co = Counter(
        (e.resource, e.from_state, e.to_state, e.reason)
        for e in ours
        if e.kind == "StateTransition"
    )
    cg = Counter(
        (e.resource, e.from_state, e.to_state, e.reason) for e in go if e.kind == "StateTransition"
    )
    if co != cg:
        keys = sorted(set(co) | set(cg))
        diff = [f"  {k}: ours={co[k]} go={cg[k]}" for k in keys if co[k] != cg[k]]
        problems.append(
            "transition counts differ per (resource, from, to, reason):\n" + "\n".join(diff[:20])
        )
    if problems:
        n_o = sum(co.values())
        n_g = sum(cg.values())
        raise AssertionError(
            f"state transitions differ (ours={n_o}, go={n_g}):\n" + "\n".join(problems)
        )
