"""The kernel's scheduling on the timeline's M lanes (static/timeline_offcpu.js)
in a real browser: the cpuquota workload (GOMAXPROCS 4 under a 0.25 CPU
quota) recorded with its scheduling, stored before the server starts. By M the
page fetches the off-CPU columns of the visible window (the same answer as the
API's for that window), draws a magenta strip along the top of an M lane where a
goroutine was Running while its thread was off the CPU, and says so in a
legend; by P nothing is drawn. A trace without a recording gets no legend and
no error. Screenshots go to the artifacts directory."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page

from ingest.store.db import make_engine
from tests.support.browser import shot
from tests.support.sched_recordings import NEEDS_BPFTRACE, record, stored, workload_bin
from tests.support.server import Served

pytestmark = [pytest.mark.slow, *NEEDS_BPFTRACE]

#: True once the view drew every tile it wants and the off-CPU columns of
#: the window it shows arrived.
LOADED_JS = """() => {
    const v = window.gmpscopeTimeline && window.gmpscopeTimeline.current;
    const o = window.gmpscopeOffcpu, view = window.gmpscopeTimeline.getView();
    return !!(v && v.lastFrame && v.lastFrame.complete && v.inflight.size === 0 && !v.dirty
              && o && o.data && view && String(o.data.raw.t1) === String(view.t1)
              && String(o.data.raw.t2) === String(view.t2));
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, int]]:
    root = tmp_path_factory.mktemp("offcpu-timeline")
    url = f"sqlite:///{root / 'db.sqlite'}"
    engine = make_engine(url)
    rec = record(workload_bin("cpuquota"), ["-duration", "400ms"], root / "quota",
                 await_stdin=True)
    tid = stored(engine, rec, root / "data")
    engine.dispose()
    with Served(root / "data", db_url=url) as srv:
        yield srv, tid


def _pixel(page: Page, x: float, y: float) -> tuple[int, int, int]:
    rgb: list[int] = page.evaluate("""([x, y]) => {
        const c = document.querySelector('#timeline-canvas');
        const dpr = window.gmpscopeTimeline.getView().devicePixelRatio;
        return [...c.getContext('2d').getImageData(Math.round(x * dpr),
                                                   Math.round(y * dpr), 1, 1).data];
    }""", [x, y])
    return rgb[0], rgb[1], rgb[2]


def _rgba(style: str) -> tuple[float, float, float, float]:
    """A canvas fillStyle as read back: '#rrggbb' (opaque) or 'rgba(r, g, b, a)'."""
    if style.startswith("#"):
        return (int(style[1:3], 16), int(style[3:5], 16), int(style[5:7], 16), 1.0)
    m = re.fullmatch(r"rgba\((\d+), (\d+), (\d+), ([\d.]+)\)", style)
    assert m, style
    return (int(m[1]), int(m[2]), int(m[3]), float(m[4]))


def _fills_of_next_frame(page: Page) -> list[tuple[str, float, float, float, float]]:
    """(fillStyle, x, y, w, h) of every fillRect of the canvas's next frame."""
    fills: list[list[Any]] = page.evaluate("""() => new Promise(done => {
        const proto = CanvasRenderingContext2D.prototype, real = proto.fillRect;
        const fills = [];
        proto.fillRect = function (x, y, w, h) {
            if (this.canvas.id === 'timeline-canvas') {
                fills.push([String(this.fillStyle), x, y, w, h]);
            }
            return real.call(this, x, y, w, h);
        };
        window.gmpscopeTimeline.current.invalidate();
        requestAnimationFrame(() => requestAnimationFrame(() => {
            proto.fillRect = real;
            done(fills);
        }));
    })""")
    return [(str(f[0]), float(f[1]), float(f[2]), float(f[3]), float(f[4])) for f in fills]


def test_m_lanes_show_running_while_off_cpu(page: Page, server: tuple[Served, int]) -> None:
    srv, tid = server
    page.goto(f"{srv.url}/traces/{tid}/timeline?mode=m")
    page.wait_for_function(LOADED_JS, polling=100)
    view: dict[str, Any] = page.evaluate("() => window.gmpscopeTimeline.getView()")
    got: dict[str, Any] = page.evaluate("() => window.gmpscopeOffcpu.data.raw")
    # What the page drew from is the API's answer for the visible window.
    api = srv.get(f"/api/traces/{tid}/offcpu/lanes",
                  params={"t1": view["t1"], "t2": view["t2"], "px": got["px"]}).json()
    assert got == api
    assert got["px"] == round(view["plotWidth"])
    # The column of the drawn lanes where a goroutine ran off the CPU longest.
    drawn = page.evaluate("""() => window.gmpscopeTimeline.current.layerHelpers().lanes()
        .map(l => [l.key, l.y])""")
    ys = {key: y for key, y in drawn}
    best = max(((lane["running_offcpu"][i], f"m{lane['m']}", i)
                for lane in got["lanes"] if f"m{lane['m']}" in ys
                for i in range(len(lane["running_offcpu"]))), default=(0, "", 0))
    ns, key, col = best
    assert ns > 0, "the quota run has goroutines Running on threads the kernel held off"
    x = view["plotLeft"] + (col + 0.5) * view["plotWidth"] / got["px"]
    # The last fill over the strip's pixel there is the magenta mark, at the
    # strength its share of the column calls for (drawn over the lane, so it
    # shows whatever the lane's colour). Read from the frame's own fill calls:
    # a column is about a pixel wide, and the canvas blends a fractional one
    # with its neighbours, so a pixel's colour alone cannot say it.
    fills = _fills_of_next_frame(page)
    y = ys[key] + 1
    last = [f for f in fills if f[1] <= x < f[1] + f[3] and f[2] <= y < f[2] + f[4]][-1]
    share = min(1.0, ns / float(got["column_ns"]))
    assert _rgba(last[0]) == pytest.approx((230, 0, 126, 0.35 + 0.65 * share), abs=0.002), \
        (last, share)
    r, g, b = _pixel(page, x, y)
    assert r > g and b > g, (r, g, b)  # and the pixel leans to magenta
    legend = page.inner_text("#timeline-offcpu-legend")
    assert "Running while its thread was off the CPU" in legend
    shot(page, "timeline-m-offcpu")
    # By P: no strip, no legend.
    page.locator("[data-mode=p]").click()
    page.wait_for_function("() => (window.gmpscopeTimeline.getView() || {}).mode === 'p'")
    assert page.locator("#timeline-offcpu-legend").count() == 0


def test_a_trace_without_a_recording_draws_nothing(
        page: Page, samples_server: Served, sample_ids: dict[str, int]) -> None:
    tid = sample_ids["go1.27-httpnet-2MB.trace"]
    page.goto(f"{samples_server.url}/traces/{tid}/timeline?mode=m")
    page.wait_for_function("() => window.gmpscopeOffcpu && window.gmpscopeOffcpu.missing",
                           polling=100)
    assert page.locator("#timeline-offcpu-legend").count() == 0
    assert page.evaluate("() => window.gmpscopeOffcpu.errors") == 0
