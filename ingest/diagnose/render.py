"""Text and Markdown renderings of a diagnose report (the JSON is the report
itself). Trace strings (function names, files) are escaped in Markdown so a
hostile name cannot inject markup."""

from __future__ import annotations

import re
from typing import Any

# Inline markup only: our lines never let a trace string start a line (lists
# and headings are prefixed), and "(" only matters right after an escaped "]".
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|<>&~])")


def md_escape(s: str) -> str:
    """Backslash-escape Markdown's inline special characters (and <, >, &
    for HTML); line breaks become spaces."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(s.splitlines()))


def _frame(fr: dict[str, Any]) -> str:
    # One line whatever the strings hold: frames go into indented code blocks.
    return " ".join(f"{fr['function']} {fr['file']}:{fr['line']}".splitlines())


def _rule_lines(report: dict[str, Any]) -> list[str]:
    out = []
    for r in report["rules"]:
        extra = f" ({r['reason']})" if r.get("reason") else ""
        out.append(f"{r['rule']}: {r['status']}{extra}")
    return out


def render_text(report: dict[str, Any], base_url: str = "", stack_depth: int = 8) -> str:
    """Plain text for a terminal."""
    fs = report["findings"]
    lines = [f"trace {report['trace_id']}: {len(fs)} finding{'s' if len(fs) != 1 else ''}"]
    for i, f in enumerate(fs, 1):
        lines += ["", f"[{i}] {f['severity'].upper()} {f['rule']}: {f['title']}",
                  f"    {f['summary']}", f"    timeline: {base_url}{f['link']}"]
        if f["ranges"]:
            lines.append("    evidence:")
            lines += [f"      {r['label']}  [{r['t1']}, {r['t2']})  {base_url}{r['link']}"
                      for r in f["ranges"]]
        if f["goroutines"]:
            lines.append("    goroutines:")
            lines += [f"      {g['label']}  {base_url}{g['link']}" for g in f["goroutines"]]
        if f["threads"]:
            lines.append("    threads: " + ", ".join(f"M{m}" for m in f["threads"]))
        for s in f["stacks"][:3]:
            lines.append(f"    stack {s['stack_id']} ({s['label']}; {s['count']}x, "
                         f"{s['total_ns']} ns):")
            lines += [f"      {_frame(fr)}" for fr in s["frames"][:stack_depth]]
    lines += ["", "rules:"] + [f"  {x}" for x in _rule_lines(report)]
    return "\n".join(lines) + "\n"


def render_markdown(report: dict[str, Any], base_url: str = "", stack_depth: int = 8) -> str:
    """Markdown (for issues and chat); trace strings escaped."""
    fs = report["findings"]
    lines = [f"# Findings for trace {report['trace_id']}", ""]
    if not fs:
        lines += ["No findings.", ""]
    for f in fs:
        lines += [f"## {f['severity'].upper()} `{f['rule']}`: {md_escape(f['title'])}", "",
                  md_escape(f["summary"]), "",
                  f"[Open in timeline]({base_url}{f['link']})", ""]
        if f["ranges"]:
            lines.append("Evidence:")
            lines += [f"- [{md_escape(r['label'])}]({base_url}{r['link']})"
                      for r in f["ranges"]]
            lines.append("")
        if f["goroutines"]:
            lines.append("Goroutines:")
            lines += [f"- [{md_escape(g['label'])}]({base_url}{g['link']})"
                      for g in f["goroutines"]]
            lines.append("")
        if f["threads"]:
            lines += ["Threads: " + ", ".join(f"M{m}" for m in f["threads"]), ""]
        for s in f["stacks"][:3]:
            lines.append(f"Stack {s['stack_id']} ({md_escape(s['label'])}; {s['count']}x):")
            lines += [f"    {_frame(fr)}" for fr in s["frames"][:stack_depth]]
            lines.append("")
    lines += ["## Rules", ""] + [f"- {md_escape(x)}" for x in _rule_lines(report)]
    return "\n".join(lines) + "\n"
