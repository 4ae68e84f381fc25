"""The Findings panel: the diagnose report (ingest.diagnose) of one trace,
each finding with its severity, summary, evidence (time ranges, goroutines,
threads, stacks) and an "Open in timeline" link.

A page includes it with ``findings_panel(trace_id)`` in its layout and calls
``register_findings(dash_app)`` from its ``register``: the report is computed
in a callback behind a loading indicator, so the page renders at once.
Trace strings (function names, files, labels) are plain text children.
"""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, dcc, html

from app.components import error_box

SEVERITY_LABEL = {"critical": "Critical", "warning": "Warning", "info": "Info"}
#: Stack frames shown per stack.
STACK_DEPTH = 12


def findings_panel(trace_id: int, report: dict[str, Any] | None = None) -> html.Div:
    """The panel: with ``report`` (already kept: ingest.diagnose.kept_report)
    shown at once; without, its content arrives through the registered
    callback, behind a loading indicator (a round trip after the page)."""
    if report is not None:
        # No store for the callback to fire on: a page opened on a fresh
        # server otherwise waited for that request's answer (nothing, 0.4 s
        # from a worker's first callback) after its figures were drawn.
        body: list[Any] = [html.Div(findings_view(report), id="findings-body",
                                    className="findings-body")]
    else:
        body = [dcc.Store(id="findings-trace", data=trace_id),
                dcc.Loading(html.Div(id="findings-body", className="findings-body"))]
    return html.Div([html.H3("Findings"), *body], className="card findings-panel",
                    id="findings-panel")


def register_findings(dash_app: Dash) -> None:
    """The callback that fills the panel (call once, from the page's register)."""

    @dash_app.callback(Output("findings-body", "children"), Input("findings-trace", "data"))
    def _fill(trace_id: int) -> Any:
        # Its store is in the layout only when the page came without the report.
        from app.context import ui_context
        from ingest.derive.frames import TraceNotFound
        from ingest.diagnose import ConfigError, config_from_env, diagnose, rule_defaults

        ctx = ui_context()
        try:
            config = config_from_env(rule_defaults())
        except ConfigError as e:
            return error_box(f"diagnostics config: {e}")
        try:
            frames = ctx.frames.get(int(trace_id))
        except TraceNotFound:
            return error_box(f"no trace with id {trace_id}")
        return findings_view(diagnose(ctx.engine, frames, config))


def _stack_text(frames: list[dict[str, Any]]) -> str:
    lines = [f"{f['function']}\n    {f['file']}:{f['line']}" for f in frames[:STACK_DEPTH]]
    if len(frames) > STACK_DEPTH:
        lines.append(f"... {len(frames) - STACK_DEPTH} more frames")
    return "\n".join(lines) or "(no frames)"


def finding_view(f: dict[str, Any], index: int) -> html.Div:
    """One finding: header line, summary, timeline link, evidence."""
    details: list[Any] = []
    if f["ranges"]:
        details += [html.H4("Time ranges"), html.Ul([
            html.Li(dcc.Link(r["label"], href=r["link"], className="finding-range"))
            for r in f["ranges"]])]
    if f["goroutines"]:
        details += [html.H4("Goroutines"), html.Ul([
            html.Li(dcc.Link(g["label"], href=g["link"], className="finding-goroutine"))
            for g in f["goroutines"]])]
    if f["threads"]:
        details += [html.H4("Threads"),
                    html.P(", ".join(f"M{m}" for m in f["threads"]), className="finding-threads")]
    for s in f["stacks"]:
        details += [html.H4(f"Stack {s['stack_id']}: {s['label']} ({s['count']}x)"),
                    html.Pre(_stack_text(s["frames"]), className="stack")]
    sev = f["severity"]
    return html.Div([
        html.Div([
            html.Span(SEVERITY_LABEL.get(sev, sev), className=f"badge sev-{sev}"),
            html.Code(f["rule"], className="finding-rule"),
            html.Span(f["title"], className="finding-title"),
        ], className="finding-head"),
        html.P(f["summary"], className="finding-summary"),
        dcc.Link("Open in timeline", href=f["link"], className="finding-link"),
        html.Details([html.Summary("Evidence"), *details], className="finding-evidence"),
    ], className=f"finding finding-{sev}", id=f"finding-{index}",
        **{"data-rule": f["rule"], "data-severity": sev})


def findings_view(report: dict[str, Any]) -> list[Any]:
    """The whole panel body for a report (pure: data in, components out)."""
    fs = report["findings"]
    rules = report["rules"]
    raised = sum(1 for r in rules if r["status"] == "raised")
    skipped = [r for r in rules if r["status"] in ("skipped", "disabled")]
    tid = report["trace_id"]
    head = html.P([
        f"{len(fs)} finding{'s' if len(fs) != 1 else ''} from {len(rules)} rules "
        f"({raised} raised, {len(rules) - raised - len(skipped)} clear"
        + (f", {len(skipped)} skipped" if skipped else "") + "). ",
        html.A("JSON", href=f"/api/traces/{tid}/findings", target="_blank"), " · ",
        html.A("Markdown", href=f"/api/traces/{tid}/findings?format=markdown",
               target="_blank"),
    ], className="muted findings-count")
    body: list[Any] = [head]
    if not fs:
        body.append(html.P("No problems found by the rules.", className="findings-none"))
    body += [finding_view(f, i) for i, f in enumerate(fs)]
    if skipped:
        body.append(html.P("Not run: " + "; ".join(
            f"{r['rule']} ({r.get('reason') or r['status']})" for r in skipped),
            className="muted"))
    return body
