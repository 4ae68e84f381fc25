/*
 * The timeline page around the canvas (timeline_canvas.js): mode and filter
 * controls, the status line, the hover tooltip, the details panel (a span's
 * /api/traces/<id>/span answer, or a merged shape's mix), the keyboard help
 * overlay, and the page's URL, which always carries the visible window
 * (history.replaceState as the view moves: a reload shows the same view).
 *
 * Uses only window.gmpscopeTimeline; runs on the timeline page only (its
 * listeners do nothing until a view of #timeline-root is ready).
 */
(function () {
    "use strict";

    var tl = window.gmpscopeTimeline;
    if (!tl) return;
    var urlTimer = null;

    function root() { return document.getElementById("timeline-root"); }
    function el(tag, cls, text) {
        var e = document.createElement(tag);
        if (cls) e.className = cls;
        if (text != null) e.textContent = text;
        return e;
    }
    function fmt(ns) { return tl.fmtNs(ns); }
    function pct(x) { return (x < 0.1 ? (100 * x).toFixed(1) : (100 * x).toFixed(0)) + "%"; }

    // ------------------------------------------------------------------
    // URL and links

    function query(v) {
        var r = root(), q = new URLSearchParams();
        q.set("mode", v.mode);
        q.set("t1", v.t1);
        q.set("t2", v.t2);
        if (v.group) q.set("group", v.group);
        if (r && r.dataset.focus) q.set(v.mode, r.dataset.focus);
        if (v.offset) q.set("offset", String(v.offset));
        if (!v.pinnedDefault) q.set("pin", v.pinned.length ? v.pinned.join(",") : "none");
        return q;
    }

    function syncUrl(v) {
        var r = root();
        if (!r) return;
        var q = query(v), path = "/traces/" + v.traceId + "/timeline?" + q.toString();
        if (location.pathname + location.search !== path) history.replaceState(history.state, "", path);
        var link = document.getElementById("timeline-permalink");
        if (link) link.href = path;
        var data = document.getElementById("timeline-api");
        if (data) {
            var w = new URLSearchParams({mode: v.mode, t1: v.t1, t2: v.t2});
            if (v.group) w.set("group", v.group);
            data.href = "/api/traces/" + v.traceId + "/timeline?" + w.toString();
            data.textContent = "/api/traces/" + v.traceId + "/timeline";
        }
        var flame = document.getElementById("timeline-flame");
        if (flame && r.dataset.flame) {
            flame.href = r.dataset.flame.replace("T1", v.t1).replace("T2", v.t2);
        }
    }

    tl.on("view", function (v) {
        status(v);
        // The URL follows the view, a few times a second at most.
        if (urlTimer) return;
        urlTimer = setTimeout(function () {
            urlTimer = null;
            var now = tl.getView();
            if (now) syncUrl(now);
        }, 120);
    });

    var statusAt = 0;
    tl.on("frame", function (f) {
        // Tiles arrive between moves: the cache counts follow, 4 times a second at most.
        if (f.drawnAt - statusAt < 250 && !f.complete) return;
        statusAt = f.drawnAt;
        var v = tl.getView();
        if (v) status(v);
    });

    function status(v) {
        var r = root(), s = r && r.querySelector(".timeline-status");
        if (!s || !tl.current) return;
        var view = tl.current, span = Number(BigInt(v.t2) - BigInt(v.t1));
        var px = span / Math.max(1, view.plotW());
        var rows = view.visibleRows(), a = view.scrollRow + 1;
        var n = view.scrollRows();
        s.textContent = "Window " + fmt(span) + " · one pixel ≈ " + fmt(px) + " · lanes " +
            a + "–" + Math.min(n, view.scrollRow + rows) + " of " + n.toLocaleString() +
            (view.pinned.length ? " + " + view.pinned.length + " pinned" : "") +
            " · tiles cached " + view.cache.map.size + " (" +
            (view.cache.bytes / 1048576).toFixed(1) + " MB)";
    }

    // ------------------------------------------------------------------
    // controls

    function setup(v) {
        var r = root();
        if (!r) return;
        document.querySelectorAll(".timeline-mode-button[data-mode]").forEach(function (b) {
            b.setAttribute("aria-pressed", String(b.dataset.mode === v.mode));
            b.onclick = function () { restartWith({mode: b.dataset.mode, focus: "", group: ""}); };
        });
        var whole = document.getElementById("timeline-whole");
        if (whole) whole.onclick = function () { tl.current && tl.current.whole(); };
        var sel = document.getElementById("timeline-group");
        if (sel) {
            sel.hidden = v.mode !== "g";
            var groups = (tl.current.meta.groups || []);
            if (!v.group) {
                // The listing without a filter holds every group: keep it for the picker.
                r.groupsAll = groups;
            }
            var all = r.groupsAll || groups;
            sel.innerHTML = "";
            var o = el("option", null, "all goroutine groups");
            o.value = "";
            sel.appendChild(o);
            all.forEach(function (g) {
                var opt = el("option", null, (g.name || "(unknown start function)") + " (" +
                             g.count.toLocaleString() + ")");
                opt.value = g.name;
                sel.appendChild(opt);
            });
            sel.value = v.group || "";
            sel.onchange = function () { restartWith({mode: "g", group: sel.value, focus: ""}); };
        }
        var goid = document.getElementById("timeline-goid");
        if (goid) {
            goid.setAttribute("aria-label", "Goroutine id (Enter shows its lane)");
            goid.value = v.mode === "g" && r.dataset.focus ? r.dataset.focus : "";
            goid.onkeydown = function (e) {
                if (e.key !== "Enter") return;
                var text = goid.value.trim().replace(/^[gG]/, "");
                if (text && !/^\d+$/.test(text)) return;
                restartWith({mode: "g", focus: text, group: ""});
            };
        }
        var help = document.getElementById("timeline-help-button");
        if (help) help.onclick = toggleHelp;
    }

    function restartWith(o) {
        var r = root(), v = tl.getView();
        if (!r || !v) return;
        r.dataset.mode = o.mode;
        r.dataset.group = o.group || "";
        r.dataset.focus = o.focus || "";
        r.dataset.t1 = v.t1;
        r.dataset.t2 = v.t2;
        r.dataset.offset = "0";
        delete r.dataset.pin;  // lane indexes of another list
        tl.restart();
    }

    tl.on("ready", function (v) { setup(v); status(v); syncUrl(v); });

    // ------------------------------------------------------------------
    // tooltip

    function describe(s, meta) {
        var lines = [];
        var head = s.laneLabel;
        if (s.n > 1) {
            var parts = s.mix.map(function (m) { return [m[0], Math.min(m[1] / Math.max(s.d, 1), s.cover)]; })
                .sort(function (a, b) { return b[1] - a[1]; });
            var share = parts.filter(function (p) { return p[0] === s.cat; }).map(function (p) { return p[1]; })[0];
            lines.push(head + ": " + s.n.toLocaleString() + " intervals, " +
                       pct(share == null ? s.cover : share) + " of this span is " + s.state);
            parts.slice(0, 5).forEach(function (p) { lines.push(meta.categories[p[0]] + " " + pct(p[1])); });
            if (parts.length > 1) lines.push("any state " + pct(s.cover));
        } else {
            var kind = meta.kinds[String(s.kind)], reason = kind ? kind[3] : "";
            var who = s.g >= 0 && !/^G/.test(head) ? "G" + s.g + " " : "";
            lines.push(head + ": " + who + s.state +
                       (reason && s.state.indexOf("Waiting") < 0 ? " (" + reason + ")" : ""));
        }
        lines.push((s.cut ? "at least " : "") + fmt(s.d) + " from " + fmt(s.r1) +
                   (s.cut ? " (continues out of view)" : ""));
        return lines;
    }

    /** An OS mark's lines, as the M lanes' marks always said them. */
    function describeMark(mk) {
        var dur = mk.duration_ns == null ? "unfinished" : fmt(mk.duration_ns);
        if (mk.count > 1) return ["OS · M" + mk.m + ": " + mk.count + " calls", mk.syscall, dur + " in total"];
        var fd = mk.fd == null ? "" : "(" + mk.fd + ")";
        return ["OS · M" + mk.m + ": " + mk.syscall + fd + " = " + (mk.errno || mk.result), dur];
    }

    tl.on("hover", function (h) {
        var view = tl.current;
        if (!view) return;
        var tip = view.tip;
        if (!h) { tip.hidden = true; return; }
        tip.textContent = "";
        (h.mark ? describeMark(h.mark) : describe(h.shape, view.meta)).forEach(function (line, i) {
            var d = el("div", i ? null : "timeline-tooltip-head", line);
            tip.appendChild(d);
        });
        tip.hidden = false;
        var x = h.x + 14, y = h.y + 16;
        if (x + tip.offsetWidth > view.w) x = h.x - tip.offsetWidth - 8;
        tip.style.left = x + "px";
        tip.style.top = y + "px";
    });

    // ------------------------------------------------------------------
    // details panel

    function panel() { return document.getElementById("timeline-details"); }

    function row(table, k, v) {
        var tr = el("tr"), th = el("th", null, k), td = el("td");
        if (v instanceof Node) td.appendChild(v); else td.textContent = v;
        tr.appendChild(th);
        tr.appendChild(td);
        table.appendChild(tr);
    }

    function stackText(stack) {
        return (stack || []).map(function (f) { return f.function + "\n    " + f.file + ":" + f.line; })
            .join("\n") || "(no stack)";
    }

    function link(text, href, id) {
        var a = el("a", null, text);
        a.href = href;
        if (id) a.id = id;
        return a;
    }

    function showSpan(d, view) {
        var p = panel();
        if (!p) return;
        p.textContent = "";
        var first = BigInt(view.first), start = Number(BigInt(d.start_ts) - first);
        p.appendChild(el("h3", null, d.state + " · " + fmt(d.duration_ns)));
        var t = el("table", "data timeline-detail-table"), g = d.goroutine;
        if (g != null && g >= 0) {
            row(t, "goroutine", link("G" + g, "/traces/" + view.traceId + "/goroutines/" + g,
                                     "timeline-detail-goroutine"));
        }
        if (d.source === "proc_run") row(t, "ran on", "P" + d.p + ", M" + d.m);
        else if (d.source === "range") row(t, "range", d.state + ": " + d.reason);
        else row(t, "resource", d.resource + " " + d.id);
        row(t, "state", d.state || "");
        row(t, "reason", d.reason || "–");
        row(t, "start", (start / 1e6).toFixed(6) + " ms after trace start (ts " + d.start_ts + ")");
        row(t, "duration", fmt(d.duration_ns));
        row(t, "M / P", "M" + (d.m == null ? -1 : d.m) + " / P" + (d.p == null ? -1 : d.p));
        if (d.next) row(t, "then", d.next.state + (d.next.reason ? " (" + d.next.reason + ")" : ""));
        p.appendChild(t);
        if (g != null && g >= 0) {
            var pad = Math.max(d.duration_ns, 1000) * 5;
            var q = new URLSearchParams({mode: "g", g: String(g),
                                         t1: (BigInt(d.start_ts) - BigInt(pad)).toString(),
                                         t2: (BigInt(d.end_ts) + BigInt(pad)).toString()});
            var links = el("p", "muted");
            links.appendChild(link("this goroutine's timeline", "/traces/" + view.traceId +
                                   "/timeline?" + q.toString()));
            p.appendChild(links);
        }
        p.appendChild(el("h4", null, "Stack where it entered this state"));
        var pre = el("pre", "stack", stackText(d.stack));
        pre.id = "timeline-detail-stack";
        p.appendChild(pre);
        if (d.next && d.next.stack && d.next.stack.length) {
            p.appendChild(el("h4", null, "Stack where it left it"));
            p.appendChild(el("pre", "stack", stackText(d.next.stack)));
        }
    }

    function showMerged(s, view) {
        var p = panel();
        if (!p) return;
        p.textContent = "";
        p.appendChild(el("h3", null, s.n.toLocaleString() + " intervals merged at this zoom"));
        p.appendChild(el("pre", "stack", describe(s, view.meta).join("\n")));
        var b = el("button", "secondary", "Zoom into these");
        b.id = "timeline-zoom-merged";
        b.onclick = function () { view.setWindow(s.r1, s.r2); view.canvas.focus(); };
        p.appendChild(b);
        p.appendChild(el("span", "muted", " (Enter)"));
    }

    tl.on("select-start", function () {
        var p = panel();
        if (p) p.setAttribute("aria-busy", "true");
    });
    tl.on("select-span", function (d) {
        var p = panel();
        if (p) p.removeAttribute("aria-busy");
        if (tl.current && d.span) showSpan(d.span, tl.current);
    });
    tl.on("select-error", function (e) {
        var p = panel();
        if (p) { p.removeAttribute("aria-busy"); p.textContent = "No details: " + e.message; }
    });
    tl.on("select-merged", function (d) { if (tl.current) showMerged(d.shape, tl.current); });

    // ------------------------------------------------------------------
    // keyboard help

    var KEYS = [
        ["Tab", "focus the lanes (then these keys)"],
        ["W / S", "zoom in / out (hold)"], ["A / D", "pan left / right (hold)"],
        ["mouse wheel", "zoom about the pointer (over the labels: scroll lanes)"],
        ["drag", "pan (time and lanes)"], ["Shift + drag", "select an area (time × lanes)"],
        ["Shift + Enter", "select the visible window on the lane (then Shift + ↓ / ↑: more lanes)"],
        ["double-click / Esc", "whole trace (Esc first clears an area selection)"],
        ["↑ / ↓", "previous / next lane"], ["← / →", "previous / next span on the lane"],
        ["Enter", "zoom into the selected merged shape"],
        ["P / click a label", "pin the lane to the top (again: unpin)"],
        ["PgUp / PgDn, Home / End", "scroll lanes"], ["+ / -", "zoom in / out by 2×"],
        // The causality panels' keys (static/timeline_causality.js).
        ["F", "follow the wake-up arrow to the waker's span"],
        ["C", "critical path of the selected goroutine"],
        ["/", "search (then Enter / Shift + Enter: next / previous match)"],
        ["?", "this help"]];

    function toggleHelp() {
        var r = root();
        if (!r) return;
        var box = r.querySelector(".timeline-help");
        if (box) { box.remove(); if (tl.current) tl.current.canvas.focus(); return; }
        box = el("div", "timeline-help");
        box.setAttribute("role", "dialog");
        box.setAttribute("aria-label", "Timeline keys");
        box.appendChild(el("h3", null, "Keys"));
        var t = el("table", "data");
        KEYS.forEach(function (k) { row(t, k[0], k[1]); });
        box.appendChild(t);
        var close = el("button", "secondary", "Close (?)");
        close.onclick = toggleHelp;
        box.appendChild(close);
        r.appendChild(box);
        close.focus();
    }

    document.addEventListener("keydown", function (e) {
        if (e.key !== "?" || !root()) return;
        var tag = (e.target && e.target.tagName) || "";
        if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") return;
        e.preventDefault();
        toggleHelp();
    });
})();
