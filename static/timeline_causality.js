/*
 * The timeline's causality panels (docs/causality.md), over the canvas
 * interface window.gmpscopeTimeline (docs/timeline.md, "Canvas interface"):
 *
 * - flows: a selected goroutine span shows who woke it (the waker and its
 *   stack at the wake-up) and whom it woke, as arrows on the lanes; F (or
 *   the button) follows the arrow to the waker's span;
 * - search: a goroutine id, a start function or any stack function; matches
 *   are outlined on every lane, Enter / Shift+Enter step through them;
 * - area: Shift+drag over time and lanes shows the time per state, goroutine
 *   group and function of the area, with links to the analysis pages;
 * - critical path: C (or the button) draws the chain of wake-ups the selected
 *   goroutine's time depended on, across lanes, with each link's time.
 *
 * Data: /api/traces/<id>/flows, /search, /area, /critical-path (ingest/api/causality.py).
 * Runs only on the timeline page (when #timeline-root and the interface exist;
 * Dash loads assets in name order, so timeline_canvas.js has published it).
 * window.gmpscopeCausality exposes the panels' state to tests.
 */
(function () {
    "use strict";

    var tl = window.gmpscopeTimeline;
    if (!tl) return;

    var PAGE = 200;  // search matches fetched at a time
    var state = null;

    function root() { return document.getElementById("timeline-root"); }
    function el(tag, cls, text) {
        var e = document.createElement(tag);
        if (cls) e.className = cls;
        if (text != null) e.textContent = text;
        return e;
    }
    function fmt(ns) { return tl.fmtNs ? tl.fmtNs(Number(ns)) : Number(ns) + " ns"; }
    function api(path, params) {
        var q = new URLSearchParams();
        Object.keys(params || {}).forEach(function (k) {
            var v = params[k];
            if (Array.isArray(v)) v.forEach(function (x) { q.append(k, x); });
            else if (v != null && v !== "") q.set(k, v);
        });
        return fetch("/api/traces/" + state.traceId + "/" + path + "?" + q.toString())
            .then(function (r) {
                return r.json().then(function (j) {
                    if (!r.ok) throw new Error(j.error || r.statusText);
                    return j;
                });
            });
    }
    function mode() { var v = tl.getView(); return v ? v.mode : "p"; }
    function section(id, title) {
        var s = el("section", "causality-section");
        s.id = id;
        s.appendChild(el("h3", null, title));
        var body = el("div", "causality-body");
        s.appendChild(body);
        return s;
    }
    function body(id) {
        var s = document.getElementById(id);
        return s ? s.querySelector(".causality-body") : null;
    }
    function stackText(frames) {
        return (frames || []).map(function (f) {
            return f.function + "\n    " + f.file + ":" + f.line;
        }).join("\n");
    }
    function link(href, text) {
        var a = el("a", null, text);
        a.href = href;
        return a;
    }
    function button(text, title, fn) {
        var b = el("button", "secondary", text);
        if (title) b.title = title;
        b.onclick = fn;
        return b;
    }

    // ------------------------------------------------------------------
    // the panel

    function build(v) {
        var r = root();
        if (!r) return;
        var old = document.getElementById("timeline-causality");
        if (old) old.remove();
        // Outlines and arrows per source (the selection's flows, the search, the
        // critical path), drawn together.
        state = {traceId: v.traceId, sel: null, flows: null, path: null, search: null,
                 arrows: [], highlights: [], layers: {flows: [[], []], search: [[], []],
                                                      path: [[], []]}};
        var box = el("div", "timeline-causality");
        box.id = "timeline-causality";

        var s = section("causality-search", "Search");
        var row = el("div", "causality-search-row");
        var input = el("input", "causality-search-input");
        input.id = "causality-search-input";
        input.type = "search";
        input.placeholder = "goroutine id, start function or any function ⏎ (⇧⏎ back)";
        input.setAttribute("aria-label", "Search spans");
        input.addEventListener("keydown", function (e) {
            if (e.key === "Enter") { e.preventDefault(); step(e.shiftKey ? -1 : 1); }
            else if (e.key === "Escape") { clearSearch(); input.blur(); }
        });
        row.appendChild(input);
        row.appendChild(button("◀", "previous match (Shift+Enter)", function () { step(-1); }));
        row.appendChild(button("▶", "next match (Enter)", function () { step(1); }));
        s.querySelector(".causality-body").appendChild(row);
        var st = el("div", "causality-status muted", "");
        st.id = "causality-search-status";
        st.setAttribute("aria-live", "polite");
        s.querySelector(".causality-body").appendChild(st);
        box.appendChild(s);

        var f = section("causality-flows", "Wake-ups");
        f.querySelector(".causality-body").appendChild(
            el("p", "muted", "Select a goroutine's span: who woke it, and whom it woke (F follows)."));
        box.appendChild(f);

        var c = section("causality-path", "Critical path");
        var cb = c.querySelector(".causality-body");
        var pr = el("div", "causality-search-row");
        var pbtn = button("Critical path", "of the selected goroutine (C)", function () { criticalPath(); });
        pbtn.id = "causality-path-button";
        pr.appendChild(pbtn);
        var task = el("input", "causality-task-input");
        task.id = "causality-task-input";
        task.placeholder = "or task id ⏎";
        task.setAttribute("aria-label", "Task id");
        task.addEventListener("keydown", function (e) {
            if (e.key === "Enter" && task.value.trim()) {
                e.preventDefault();
                criticalPath({task: task.value.trim()});
            }
        });
        pr.appendChild(task);
        cb.appendChild(pr);
        var out = el("div", "causality-path-out");
        out.id = "causality-path-out";
        cb.appendChild(out);
        box.appendChild(c);

        var a = section("causality-area", "Area");
        a.querySelector(".causality-body").appendChild(
            el("p", "muted", "Shift+drag over time and lanes for its time per state, group and function."));
        box.appendChild(a);

        var main = r.querySelector(".timeline-main");
        if (main && main.nextSibling) r.insertBefore(box, main.nextSibling);
        else r.appendChild(box);
    }

    /** Set one source's outlines and arrows, and draw every source's. */
    function redraw(source, highlights, arrows) {
        if (source) state.layers[source] = [highlights || [], arrows || []];
        var ls = state.layers, order = ["search", "path", "flows"];
        state.highlights = [].concat.apply([], order.map(function (k) { return ls[k][0]; }));
        state.arrows = [].concat.apply([], order.map(function (k) { return ls[k][1]; }));
        tl.setArrows(state.arrows);
        tl.highlight(state.highlights);
    }

    // ------------------------------------------------------------------
    // flows

    /** Where an arrow ends: the woken goroutine at its wake-up by G, where it
     *  next ran by P or M (a goroutine that is not running has no P/M shape). */
    function arrowTo(goroutine, ts, runnable) {
        var t = mode() === "g" || !runnable ? ts : runnable.end_ts;
        return {toGoroutine: goroutine, toTs: String(t)};
    }

    function showFlows(d) {
        state.flows = d;
        var b = body("causality-flows");
        if (!b) return;
        b.textContent = "";
        var sp = d.span;
        b.appendChild(el("div", "causality-head",
            "G" + sp.goroutine + " " + sp.state + (sp.reason ? " (" + sp.reason + ")" : "") +
            ", " + fmt(sp.duration_ns)));
        var by = d.woken_by;
        var arrows = [];
        if (!by) {
            b.appendChild(el("p", "muted", "Not woken by a wake-up in the trace (running since it " +
                             "was created, or since before the trace)."));
        } else {
            var who = by.waker == null ? "the runtime (no goroutine: a timer, the netpoller)"
                : "G" + by.waker;
            var p = el("p", "causality-woken-by");
            p.id = "causality-woken-by";
            p.appendChild(document.createTextNode("Woken by " + who + " at +" +
                fmt(by.ts - tl.getView().firstTs) +
                (by.wait ? " after " + fmt(by.wait.duration_ns) + " waiting" +
                 (by.wait.reason ? " (" + by.wait.reason + ")" : "") : "")));
            b.appendChild(p);
            if (by.waker != null) {
                var fb = button("Follow to G" + by.waker + " ⟵", "the waker's span (F)", follow);
                fb.id = "causality-follow";
                b.appendChild(fb);
                var a = arrowTo(by.goroutine, by.ts, by.runnable);
                arrows.push({fromGoroutine: by.waker, fromTs: String(by.ts), toGoroutine: a.toGoroutine,
                             toTs: a.toTs, label: "G" + by.waker + " woke G" + by.goroutine,
                             color: "#d62728"});
            }
            if (by.stack && by.stack.length) {
                b.appendChild(el("h4", null, "Waker's stack at the wake-up"));
                b.appendChild(el("pre", "stack", stackText(by.stack)));
            }
        }
        b.appendChild(el("h4", null, d.woke_total ? "Woke " + d.woke_total + " goroutine" +
                         (d.woke_total > 1 ? "s" : "") + " in this span" : "Woke nobody in this span"));
        var ul = el("ul", "causality-woke");
        ul.id = "causality-woke";
        d.woke.forEach(function (w) {
            var li = el("li");
            var fb = button("G" + w.goroutine, "follow to its run", function () {
                goTo(w.runnable.ref, w.runnable.start_ts, w.runnable.end_ts, w.goroutine);
            });
            li.appendChild(fb);
            li.appendChild(document.createTextNode(" at +" + fmt(w.ts - tl.getView().firstTs) +
                (w.wait ? ", after " + fmt(w.wait.duration_ns) + " waiting" : "") +
                (w.stack && w.stack.length ? " · " + w.stack[0].function : "")));
            ul.appendChild(li);
            var a = arrowTo(w.goroutine, w.ts, w.runnable);
            arrows.push({fromGoroutine: sp.goroutine, fromTs: String(w.ts), toGoroutine: a.toGoroutine,
                         toTs: a.toTs, label: "", color: "#2ca02c"});
        });
        b.appendChild(ul);
        redraw("flows", [{goroutine: sp.goroutine, t1: String(sp.start_ts), t2: String(sp.end_ts)}],
               arrows);
    }

    function loadFlows(params) {
        return api("flows", params).then(showFlows).catch(function (e) {
            var b = body("causality-flows");
            if (b) b.textContent = "No wake-ups: " + e.message;
        });
    }

    /** Show a span (by its ref) in the window, keeping the zoom where it fits. */
    function goTo(ref, t1, t2, goroutine) {
        var v = tl.getView();
        var w = Number(v.t2) - Number(v.t1), d = Number(t2) - Number(t1);
        if (d * 2 > w) w = d * 3;
        var mid = (Number(t1) + Number(t2)) / 2;
        tl.goto(Math.max(Number(v.firstTs), Math.round(mid - w / 2)), Math.round(mid + w / 2));
        if (goroutine != null && tl.laneKeyForGoroutine(goroutine) && tl.revealLane) {
            tl.revealLane(tl.laneKeyForGoroutine(goroutine));
        }
        state.sel = {ref: ref, goroutine: goroutine, shown: true};
        // The canvas's own selection and details panel move to the span too (its
        // select-span then finds this span's flows already asked for).
        if (tl.selectRef) tl.selectRef(ref).catch(function () { /* no lane for it here */ });
        return loadFlows({ref: ref});
    }

    function follow() {
        var by = state.flows && state.flows.woken_by;
        if (!by || by.waker == null || !by.waker_span) return;
        var s = by.waker_span;
        goTo(s.ref, s.start_ts, s.end_ts, s.goroutine);
    }

    tl.on("select-span", function (d) {
        if (!state) return;
        if (d.goroutine == null || d.ref == null || d.ref < 0) {
            var b = body("causality-flows");
            if (b) b.textContent = "Not a goroutine's span: no wake-ups.";
            state.sel = null;
            return;
        }
        if (state.sel && state.sel.shown && state.sel.ref === d.ref) return;  // goTo's
        state.sel = {ref: d.ref, goroutine: d.goroutine};
        loadFlows({ref: d.ref});
    });

    // ------------------------------------------------------------------
    // search

    function status(text) {
        var s = document.getElementById("causality-search-status");
        if (s) s.textContent = text;
    }

    function clearSearch() {
        if (!state) return;
        state.search = null;
        status("");
        redraw("search", [], []);
    }

    function fetchPage(q, params) {
        return api("search", Object.assign({q: q, limit: PAGE}, params));
    }

    function showMatch() {
        var s = state.search, m = s.page.spans[s.index - s.page.offset];
        if (!m) return;
        status("match " + (s.index + 1).toLocaleString() + " of " + s.total.toLocaleString() +
               " (" + s.goroutines.toLocaleString() + " goroutines): G" + m.goroutine + " " + m.state +
               " +" + fmt(m.start_ts - tl.getView().firstTs) + ", " + fmt(m.duration_ns) +
               " · by " + m.matched_by.replace("_", " "));
        redraw("search", s.page.spans.map(function (x) {
            return {goroutine: x.goroutine, t1: String(x.start_ts), t2: String(x.end_ts)};
        }), []);
        goTo(m.ref, m.start_ts, m.end_ts, m.goroutine);
    }

    function step(dir) {
        var input = document.getElementById("causality-search-input");
        if (!input || !state) return;
        var q = input.value.trim();
        if (!q) { clearSearch(); return; }
        var s = state.search;
        if (!s || s.q !== q) {
            var v = tl.getView();
            return fetchPage(q, {at: v.t1}).then(function (d) {
                if (!d.total) { state.search = null; status("no match for " + q); return; }
                var idx = Math.min(d.offset, d.total - 1);
                state.search = {q: q, total: d.total, goroutines: d.goroutines, index: idx, page: d};
                if (idx < d.offset) {
                    return fetchPage(q, {offset: Math.max(0, idx - PAGE + 1)}).then(function (p) {
                        state.search.page = p;
                        showMatch();
                    });
                }
                showMatch();
            }).catch(function (e) { status(e.message); });
        }
        var next = (s.index + dir + s.total) % s.total;
        s.index = next;
        if (next >= s.page.offset && next < s.page.offset + s.page.spans.length) {
            showMatch();
            return;
        }
        var off = dir > 0 ? next : Math.max(0, next - PAGE + 1);
        return fetchPage(q, {offset: off}).then(function (p) { s.page = p; showMatch(); })
            .catch(function (e) { status(e.message); });
    }

    // ------------------------------------------------------------------
    // area

    function table(rows, head) {
        var t = el("table", "data causality-table");
        var tr = el("tr");
        head.forEach(function (h) { tr.appendChild(el("th", null, h)); });
        t.appendChild(tr);
        rows.forEach(function (r) {
            var row = el("tr");
            r.forEach(function (c) {
                var td = el("td");
                if (c instanceof Node) td.appendChild(c); else td.textContent = c;
                row.appendChild(td);
            });
            t.appendChild(row);
        });
        return t;
    }

    function share(ns, total) { return total ? (100 * ns / total).toFixed(1) + "%" : ""; }

    function showArea(d) {
        var b = body("causality-area");
        if (!b) return;
        b.textContent = "";
        var head = el("div", "causality-head", fmt(d.t2 - d.t1) + " from +" +
                      fmt(d.t1 - tl.getView().firstTs) + " · " + d.lanes.length + " lanes · " +
                      d.goroutine_count + " goroutines · " + fmt(d.total_ns) + " of goroutine time");
        head.id = "causality-area-head";
        b.appendChild(head);
        b.appendChild(el("h4", null, "Time per state"));
        var st = table(d.states.map(function (s) {
            return [s.state, fmt(s.ns), share(s.ns, d.total_ns)];
        }), ["state", "time", "share"]);
        st.id = "causality-area-states";
        b.appendChild(st);
        var procs = Object.keys(d.proc_states || {});
        if (procs.length) {
            b.appendChild(el("h4", null, "Procs"));
            b.appendChild(table(procs.map(function (k) { return [k, fmt(d.proc_states[k])]; }),
                                ["proc state", "time"]));
        }
        b.appendChild(el("h4", null, "Per goroutine group"));
        b.appendChild(table(d.groups.slice(0, 12).map(function (g) {
            return [link(g.href, g.start_function), String(g.goroutines), fmt(g.ns)];
        }), ["start function", "goroutines", "time"]));
        b.appendChild(el("h4", null, "Per function"));
        b.appendChild(table(d.functions.slice(0, 12).map(function (f) {
            var by = Object.keys(f.states).map(function (k) { return k + " " + fmt(f.states[k]); });
            return [f.function, fmt(f.ns), by.join(", ")];
        }), ["function", "time", "by state"]));
        if (d.cpu_samples && d.cpu_samples.length) {
            b.appendChild(el("h4", null, "CPU samples"));
            b.appendChild(table(d.cpu_samples.slice(0, 12).map(function (c) {
                return [c.function, String(c.samples)];
            }), ["function", "samples"]));
        }
        var links = el("p", "causality-links");
        links.id = "causality-area-links";
        [["latency", "latency"], ["syscalls", "syscalls"], ["flame_sync", "flame: sync"],
         ["flame_chan", "flame: chan"], ["flame_net", "flame: net"], ["flame_sched", "flame: sched"],
         ["flame_syscall", "flame: syscall"], ["flame_cpu", "flame: cpu"]].forEach(function (k, i) {
            if (!d.links[k[0]]) return;
            if (i) links.appendChild(document.createTextNode(" · "));
            links.appendChild(link(d.links[k[0]], k[1]));
        });
        b.appendChild(links);
    }

    tl.on("select-area", function (d) {
        if (!state) return;
        var b = body("causality-area");
        if (b) b.textContent = "…";
        api("area", {t1: d.t1, t2: d.t2, lane: d.lanes}).then(showArea).catch(function (e) {
            if (b) b.textContent = "No statistics: " + e.message;
        });
    });

    // ------------------------------------------------------------------
    // critical path

    function criticalPath(params) {
        if (!state) return;
        var out = document.getElementById("causality-path-out");
        if (!params) {
            if (!state.sel || state.sel.goroutine == null) {
                if (out) out.textContent = "Select a goroutine's span first (or give a task id).";
                return;
            }
            params = {g: state.sel.goroutine};
        }
        if (out) out.textContent = "…";
        return api("critical-path", params).then(showPath).catch(function (e) {
            if (out) out.textContent = "No critical path: " + e.message;
        });
    }

    function showPath(d) {
        state.path = d;
        var out = document.getElementById("causality-path-out");
        if (!out) return;
        out.textContent = "";
        var title = (d.task ? "Task " + d.task.id + " (" + d.task.name + ")" : "G" + d.goroutine) +
            ": " + fmt(d.total_ns) + " · chain " + d.chain.map(function (g) { return "G" + g; }).join(" ← ");
        var head = el("div", "causality-head", title);
        head.id = "causality-path-head";
        out.appendChild(head);
        out.appendChild(button("Show the whole path", "zoom to it", function () {
            var pad = Math.round((d.t2 - d.t1) * 0.06), v = tl.getView();
            tl.goto(Math.max(Number(v.firstTs), d.t1 - pad), Math.min(Number(v.lastTs), d.t2 + pad));
        }));
        out.appendChild(el("h4", null, "Time on the path per goroutine"));
        out.appendChild(table(d.goroutines.map(function (g) {
            return ["G" + g.goroutine, g.start_function, fmt(g.ns), share(g.ns, d.total_ns)];
        }), ["goroutine", "start function", "time", "share"]));
        out.appendChild(el("h4", null, "Links (latest last)"));
        var merged = [];
        d.links.forEach(function (l) {
            var last = merged[merged.length - 1];
            if (last && last.goroutine === l.goroutine && last.state === l.state) {
                last.end_ts = l.end_ts;
                last.ns += l.duration_ns;
            } else {
                merged.push({goroutine: l.goroutine, state: l.state, reason: l.reason,
                             start_ts: l.start_ts, end_ts: l.end_ts, ns: l.duration_ns,
                             fn: l.function});
            }
        });
        var t = table(merged.slice(-60).map(function (l) {
            return ["G" + l.goroutine, l.state + (l.reason ? " (" + l.reason + ")" : ""),
                    "+" + fmt(l.start_ts - tl.getView().firstTs), fmt(l.ns), l.fn || ""];
        }), ["goroutine", "state", "from", "time", "function"]);
        t.id = "causality-path-links";
        out.appendChild(t);
        var outlines = d.links.map(function (l) {
            return {goroutine: l.goroutine, t1: String(l.start_ts), t2: String(l.end_ts)};
        });
        var arrows = d.hops.map(function (h) {
            var run = d.links.filter(function (l) {
                return l.goroutine === h.to && l.start_ts >= h.ts && l.state === "Running";
            })[0];
            var to = mode() === "g" || !run ? h.ts : run.start_ts;
            var waited = h.wait ? Math.min(h.wait.end_ts, d.t2) - Math.max(h.wait.start_ts, d.t1) : 0;
            return {fromGoroutine: h.from, fromTs: String(h.ts), toGoroutine: h.to, toTs: String(to),
                    label: "G" + h.from + " → G" + h.to + (waited > 0 ? " (" + fmt(waited) + ")" : ""),
                    color: "#9467bd"};
        });
        redraw("path", outlines, arrows);
    }

    // ------------------------------------------------------------------
    // keys and life cycle

    document.addEventListener("keydown", function (e) {
        if (!state || !root() || e.ctrlKey || e.metaKey || e.altKey) return;
        var tag = (e.target && e.target.tagName) || "";
        if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") return;
        if (e.key === "f" || e.key === "F") { follow(); e.preventDefault(); }
        else if (e.key === "c" || e.key === "C") { criticalPath(); e.preventDefault(); }
        else if (e.key === "/") {
            var i = document.getElementById("causality-search-input");
            if (i) { i.focus(); e.preventDefault(); }
        }
    });

    tl.on("ready", function (v) { build(v); });
    tl.on("escape", function () {
        var b = body("causality-area");
        if (b && state) b.textContent = "";
    });
    var v0 = tl.getView();
    if (v0 && root()) build(v0);

    /** For tests and other scripts: the panels' state (read-only use). */
    window.gmpscopeCausality = {state: function () { return state; }, follow: follow, step: step,
                                criticalPath: criticalPath};
})();
