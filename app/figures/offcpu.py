"""Figures of off-CPU time under the runtime (ingest/views/offcpu.py): pure
functions of the views' data."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go  # type: ignore[import-untyped]

#: The thread's states while the goroutine was Running.
KIND_LABELS = {"waiting": "thread waiting for a CPU", "asleep": "thread asleep"}
KIND_COLORS = {"waiting": "#d62728", "asleep": "#7f7f7f"}


def goroutine_offcpu_figure(off: dict[str, Any], origin: int) -> go.Figure:
    """One goroutine's Running stretches while its thread was off-CPU: one row
    per M, a segment per stretch (the longest, as the view returns them),
    coloured by the thread's state; x in ms since ``origin``."""
    st = off["stretches"]
    ms_ = sorted({int(x["m"]) for x in st})
    row = {m: i for i, m in enumerate(ms_)}
    fig = go.Figure()
    for kind, label in KIND_LABELS.items():
        mine = [x for x in st if x["kind"] == kind]
        if not mine:
            continue
        k = len(mine)
        x = np.full(3 * k, np.nan)
        x[0::3] = [(r["start_ts"] - origin) / 1e6 for r in mine]
        x[1::3] = [(max(r["end_ts"], r["start_ts"] + 1) - origin) / 1e6 for r in mine]
        y = np.repeat([row[int(r["m"])] for r in mine], 3).astype(np.int32)
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=label, connectgaps=False,
                                 line={"color": KIND_COLORS[kind], "width": 14},
                                 hovertemplate="%{x:.3f} ms<extra>" + label + "</extra>"))
    title = (f"Goroutine {off['goid']}: Running while its thread was off-CPU "
             f"({off['share']:.0%} of {off['running_ns'] / 1e6:.1f} ms Running recorded)")
    if off["stretches_total"] > len(st):
        title += f"; longest {len(st)} of {off['stretches_total']} stretches"
    fig.update_layout(height=max(180, 60 + 28 * len(ms_)),
                      margin={"l": 10, "r": 10, "t": 30, "b": 40},
                      legend={"orientation": "h", "y": -0.35},
                      xaxis_title="ms since the trace's start",
                      title={"text": title, "font": {"size": 13}})
    fig.update_yaxes(tickvals=list(row.values()), ticktext=[f"M{m}" for m in ms_],
                     range=[-0.5, max(0.5, len(ms_) - 0.5)], automargin=True, showgrid=False,
                     zeroline=False)
    return fig
