"""Figures as files: SVG, PNG (Kaleido), standalone HTML, and state graphs as
Mermaid or Graphviz DOT text. Shared by ``gmpscope export`` and the export API.

SVG and PNG come from Kaleido, which renders the figure with plotly.js in a
headless Chromium: Debian's ``/usr/bin/chromium`` unless ``$BROWSER_PATH`` names
another; MathJax is off (no network needed). HTML embeds plotly.js, so the file
works offline. Mermaid/DOT exist for the state-graph diagrams only and are the
text that :mod:`ingest.views.states` renders.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import plotly.graph_objects as go  # type: ignore[import-untyped]

from app.figures.registry import UnknownDiagram, build_figure, collect
from app.figures.source import DiagramSource
from ingest.api.files import safe_filename

#: Formats a figure exports to, and the text formats of state graphs.
IMAGE_FORMATS = ("svg", "png")
FIGURE_FORMATS = (*IMAGE_FORMATS, "html")
GRAPH_TEXT_FORMATS = ("mermaid", "dot")
FORMATS = (*FIGURE_FORMATS, *GRAPH_TEXT_FORMATS)

MIMETYPES = {
    "svg": "image/svg+xml",
    "png": "image/png",
    "html": "text/html; charset=utf-8",
    "mermaid": "text/plain; charset=utf-8",
    "dot": "text/vnd.graphviz; charset=utf-8",
    "csv": "text/csv; charset=utf-8",
    "parquet": "application/vnd.apache.parquet",
}
EXTENSIONS = {"svg": "svg", "png": "png", "html": "html", "mermaid": "mmd", "dot": "dot",
              "csv": "csv", "parquet": "parquet"}

DEFAULT_BROWSER = "/usr/bin/chromium"
#: Image size when neither the options nor the figure's layout give one.
DEFAULT_WIDTH = 1400
DEFAULT_HEIGHT = 800
#: Options that size the image rather than select data (not passed to builders).
SIZE_OPTIONS = ("width", "height", "scale")


class ExportError(Exception):
    """The export cannot be made (bad format or option, no browser): a clear message."""


@dataclass(frozen=True)
class Exported:
    """A finished export: its bytes, MIME type and file extension."""

    data: bytes
    mimetype: str
    extension: str


def is_state_diagram(diagram: str) -> bool:
    """Whether ``diagram`` is a state graph (Mermaid/DOT exportable)."""
    return diagram == "states" or diagram.startswith("states-")


def _int_option(options: Mapping[str, str], key: str) -> int | None:
    raw = options.get(key)
    if raw is None or raw == "":
        return None
    try:
        v = int(raw)
    except ValueError:
        raise ExportError(f"option {key} must be an integer, not {raw!r}") from None
    if v <= 0:
        raise ExportError(f"option {key} must be positive, not {v}")
    return v


def image_size(fig: go.Figure, options: Mapping[str, str]) -> tuple[int, int, float]:
    """(width, height, scale) of the image: options, else the layout, else defaults."""
    width = _int_option(options, "width") or fig.layout.width or DEFAULT_WIDTH
    height = _int_option(options, "height") or fig.layout.height or DEFAULT_HEIGHT
    raw = options.get("scale") or "1"
    try:
        scale = float(raw)
    except ValueError:
        raise ExportError(f"option scale must be a number, not {raw!r}") from None
    if not 0 < scale <= 8 or width > 20000 or height > 20000:
        raise ExportError("image too large: width and height at most 20000, scale 0..8")
    return int(width), int(height), scale


def browser_path() -> str:
    """The Chromium Kaleido drives ($BROWSER_PATH or Debian's)."""
    return os.environ.get("BROWSER_PATH") or DEFAULT_BROWSER


def figure_image(fig: go.Figure, fmt: str, options: Mapping[str, str] | None = None) -> bytes:
    """SVG or PNG bytes of ``fig`` rendered by Kaleido in a headless Chromium."""
    import kaleido  # type: ignore[import-untyped]

    if fmt not in IMAGE_FORMATS:
        raise ExportError(f"image format must be svg or png, not {fmt!r}")
    width, height, scale = image_size(fig, options or {})
    path = browser_path()
    if not Path(path).exists():
        raise ExportError(f"no Chromium at {path} for SVG/PNG export: install Debian's "
                          "chromium (apt-get install chromium) or set BROWSER_PATH")
    opts = {"format": fmt, "width": width, "height": height, "scale": scale}
    kopts = {"mathjax": False, "path": path}
    try:
        data: Any = kaleido.calc_fig_sync(fig, opts=opts, kopts=kopts)
    except Exception as e:
        if not _page_not_ready(e):
            raise
        # Kaleido 1.x can run its script in the tab before its page has
        # loaded ("kaleido_scopes is not defined"; seen once in a loaded CI
        # run): a fresh browser renders it.
        data = kaleido.calc_fig_sync(fig, opts=opts, kopts=kopts)
    if isinstance(data, str):
        data = data.encode("utf-8")
    return bytes(data)


def _page_not_ready(e: BaseException) -> bool:
    """Kaleido's error for a render sent before its page's script was there."""
    return type(e).__name__ == "JavascriptError" and "kaleido_scopes is not defined" in str(e)


def figure_html(fig: go.Figure, title: str = "gmpscope") -> bytes:
    """A standalone HTML page with the figure and plotly.js embedded (works offline)."""
    import html

    page: str = fig.to_html(include_plotlyjs=True, full_html=True,
                            config={"displaylogo": False, "responsive": True})
    # to_html has no title; the figure's own strings are already escaped by plotly.
    page = page.replace("<head>", f"<head><title>{html.escape(title)}</title>", 1)
    return page.encode("utf-8")


#: Options of the state-graph text exports (as the states page and /api/.../states).
GRAPH_OPTIONS = ("resource", "group", "t1", "t2", "split_reasons")


def _parse_ns(options: Mapping[str, str], key: str) -> int | None:
    raw = options.get(key)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ExportError(f"option {key} must be trace ns (an integer), not {raw!r}") from None


def state_graph_text(source: DiagramSource, trace_id: int, fmt: str,
                     options: Mapping[str, str]) -> str:
    """Mermaid or DOT text of a trace's state graph, as :mod:`ingest.views.states`
    renders it. Options: ``resource`` (goroutine, proc, thread; default goroutine),
    ``group`` (start function), ``t1``/``t2`` (trace ns), ``split_reasons`` (1)."""
    from ingest.store.traces import get_trace
    from ingest.views.states import RESOURCES, render, state_graph

    if fmt not in GRAPH_TEXT_FORMATS:
        raise ExportError(f"state graph text format must be mermaid or dot, not {fmt!r}")
    unknown = sorted(k for k in options if k not in (*GRAPH_OPTIONS, *SIZE_OPTIONS))
    if unknown:
        raise ExportError(f"unknown state-graph option(s) {', '.join(unknown)}; "
                          f"options: {', '.join(GRAPH_OPTIONS)}")
    resource = options.get("resource") or "goroutine"
    group = options.get("group") or None
    t1, t2 = _parse_ns(options, "t1"), _parse_ns(options, "t2")
    split = options.get("split_reasons", "").lower() in ("1", "true", "yes", "on")
    if get_trace(source.engine, trace_id) is None:
        raise LookupError(f"no trace with id {trace_id}")
    if resource in RESOURCES and group is None and t1 is None and t2 is None and not split:
        graph = state_graph(source.engine, trace_id, resource)
    else:
        # Filtered and thread graphs come from the frames (the states page's own query).
        from ingest.views.states_frames import graph_for

        try:
            graph = graph_for(source.engine, source.frames, trace_id, resource, group=group,
                              t1=t1, t2=t2, split_reasons=split)
        except ValueError as e:
            raise ExportError(str(e)) from None
    out = render(graph, fmt)
    assert isinstance(out, str)
    return out


def export_diagram(source: DiagramSource, trace_id: int, diagram: str, fmt: str,
                   options: Mapping[str, str] | None = None) -> Exported:
    """Export ``diagram`` of a trace as ``fmt``.

    Raises UnknownDiagram (a LookupError) for an unknown name, LookupError for a
    missing trace, ExportError / ValueError for a bad format or option.
    """
    opts = dict(options or {})
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; formats: {', '.join(FORMATS)}")
    if fmt in GRAPH_TEXT_FORMATS:
        if not is_state_diagram(diagram):
            collect().builder(diagram)  # an unknown name says so first
            raise ExportError(f"{fmt} export is only for state graphs (diagram 'states'), "
                              f"not {diagram!r}")
        text = state_graph_text(source, trace_id, fmt, opts)
        return Exported(text.encode("utf-8"), MIMETYPES[fmt], EXTENSIONS[fmt])
    builder_opts = {k: v for k, v in opts.items() if k not in SIZE_OPTIONS}
    fig = build_figure(source, trace_id, diagram, builder_opts)
    if fmt == "html":
        data = figure_html(fig, title=f"gmpscope trace {trace_id}: {diagram}")
    else:
        data = figure_image(fig, fmt, opts)
    return Exported(data, MIMETYPES[fmt], EXTENSIONS[fmt])


__all__ = ["ExportError", "Exported", "UnknownDiagram", "export_diagram", "figure_html",
           "figure_image", "safe_filename", "state_graph_text", "FORMATS"]
