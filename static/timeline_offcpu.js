/*
 * The kernel's scheduling of each M on the timeline's M lanes (issue 26,
 * docs/offcpu.md): when the trace has a scheduling recording (sched.parquet,
 * `gmpscope record --backend ebpf`), a strip along the top of each thread's
 * lane shows, per pixel column of the window:
 *
 * - magenta (Syscall is red on M lanes): a goroutine Running for the Go
 *   runtime while the kernel had its thread off the CPU (waiting for one, or
 *   asleep): time the runtime cannot see;
 * - amber: the thread waiting for a CPU (runnable, not running);
 * - grey: the thread asleep.
 *
 * Colour strength is the column's share in that state. Data:
 * /api/traces/<id>/offcpu/lanes?t1=&t2=&px= (ingest/api/offcpu.py), fetched
 * for the visible window when the page says the trace has a recording
 * (#timeline-root's data-offcpu). Drawn through
 * the canvas interface's addLayer (docs/timeline.md, "Canvas interface"), so
 * it runs only on the timeline page, by M. window.gmpscopeOffcpu exposes the
 * state to tests.
 */
(function () {
    "use strict";

    var tl = window.gmpscopeTimeline;
    if (!tl) return;

    var STRIP = 4;  // px along the top of a lane (the OS marks sit at its bottom)
    var COLORS = {running_offcpu: [230, 0, 126], waiting: [232, 163, 61], asleep: [150, 156, 166]};
    var WAIT_MS = 120;  // a moving view asks once it pauses
    var state = {traceId: null, missing: false, data: null, asked: null, timer: null,
                 errors: 0, remover: null};
    window.gmpscopeOffcpu = state;

    function wanted(v) {
        return v.traceId + ":" + v.t1 + ":" + v.t2 + ":" + Math.round(v.plotWidth);
    }

    function fetchFor(v) {
        var key = wanted(v);
        if (state.asked === key) return;
        state.asked = key;
        var q = new URLSearchParams({t1: v.t1, t2: v.t2,
                                     px: String(Math.max(1, Math.round(v.plotWidth)))});
        fetch("/api/traces/" + v.traceId + "/offcpu/lanes?" + q.toString())
            .then(function (r) {
                if (r.status === 404) { state.missing = true; legend(); return null; }
                return r.json().then(function (j) {
                    if (!r.ok) throw new Error(j.error || r.statusText);
                    return j;
                });
            })
            .then(function (j) {
                if (!j || state.asked !== key) return;
                var byM = {};
                j.lanes.forEach(function (l) { byM["m" + l.m] = l; });
                state.data = {columnNs: Number(j.column_ns), px: j.px, byM: byM, raw: j};
                legend();
                if (tl.current) tl.current.invalidate();
            })
            .catch(function (e) { state.errors++; console.error("off-CPU lanes:", e); });
    }

    function onView(v) {
        if (!v) return;
        if (state.traceId !== v.traceId) {
            var root = document.getElementById("timeline-root");
            state.traceId = v.traceId;
            // The page says whether the trace has a scheduling recording.
            state.missing = !(root && root.dataset.offcpu === "1");
            state.data = null;
            state.asked = null;
        }
        legend();
        if (v.mode !== "m" || state.missing) return;
        clearTimeout(state.timer);
        state.timer = setTimeout(function () { fetchFor(tl.getView() || v); }, WAIT_MS);
    }

    function draw(ctx, h) {
        var d = state.data;
        if (h.mode !== "m" || !d) return;
        var kinds = ["asleep", "waiting", "running_offcpu"];  // the last drawn wins a pixel
        // The data's window in today's pixels (h.x takes whole ns; columns are
        // fractions of them), then each column a px-th of it.
        var xa = h.x(String(d.raw.t1)), xb = h.x(String(d.raw.t2)), step = (xb - xa) / d.px;
        h.lanes().forEach(function (lane) {
            var l = d.byM[lane.key];
            if (!l) return;
            var n = l.running_offcpu.length;
            for (var k = 0; k < kinds.length; k++) {
                var kind = kinds[k];
                var ns = kind === "running_offcpu" ? l.running_offcpu : l.columns[kind];
                if (!ns) continue;
                var rgb = COLORS[kind];
                for (var i = 0; i < n; i++) {
                    if (!ns[i]) continue;
                    var x1 = xa + i * step, x2 = x1 + step;
                    if (x2 < h.left || x1 > h.left + h.width) continue;
                    // Never fainter than a third: a short stretch stays visible.
                    var share = Math.min(1, ns[i] / d.columnNs);
                    ctx.fillStyle = "rgba(" + rgb.join(",") + "," +
                        (0.35 + 0.65 * share).toFixed(3) + ")";
                    ctx.fillRect(x1, lane.y, Math.max(1, x2 - x1), STRIP);
                }
            }
        });
    }

    function legend() {
        var root = document.getElementById("timeline-root");
        if (!root) return;
        var box = document.getElementById("timeline-offcpu-legend");
        var v = tl.getView();
        var show = v && v.mode === "m" && state.data && !state.missing;
        if (!show) {
            if (box) box.remove();
            return;
        }
        if (!box) {
            box = document.createElement("div");
            box.id = "timeline-offcpu-legend";
            box.className = "timeline-offcpu-legend";
            var main = root.querySelector(".timeline-main");
            root.insertBefore(box, main ? main.nextSibling : null);
        }
        var sum = 0;
        Object.keys(state.data.byM).forEach(function (m) {
            state.data.byM[m].running_offcpu.forEach(function (x) { sum += x; });
        });
        box.textContent = "";
        var title = document.createElement("b");
        title.textContent = "Kernel scheduling (OS recording): ";
        box.appendChild(title);
        [["running_offcpu", "a goroutine Running while its thread was off the CPU"],
         ["waiting", "thread waiting for a CPU"], ["asleep", "thread asleep"]]
            .forEach(function (p) {
                var sw = document.createElement("span");
                sw.className = "timeline-offcpu-swatch";
                sw.style.background = "rgb(" + COLORS[p[0]].join(",") + ")";
                box.appendChild(sw);
                box.appendChild(document.createTextNode(p[1] + "  "));
            });
        box.appendChild(document.createTextNode(
            "· in this window: " + (tl.fmtNs ? tl.fmtNs(sum) : sum + " ns") +
            " Running off-CPU (strip along the top of each M lane)"));
    }

    state.remover = tl.addLayer(draw);
    tl.on("ready", onView);
    tl.on("view", onView);
}());
