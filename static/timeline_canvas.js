/*
 * The timeline page's lanes, drawn on a <canvas> from cached tiles
 * (docs/timeline.md; data: /api/traces/<id>/timeline/lanes and /tiles).
 *
 * Runs only on the timeline page: it starts when an element #timeline-root
 * appears (Dash renders pages after load) and stops when it goes. The view is
 * a window [v1, v2) in ns since the trace's first timestamp and a first
 * scrolled lane. Each frame draws, for every visible block of 64 lanes, the
 * tiles of the level whose bucket is at most a pixel; a tile not yet here is
 * drawn from the finest cached coarser tile that covers it (so a zoom shows at
 * once and sharpens when the finer tiles arrive).
 *
 * window.gmpscopeTimeline is the published interface (docs/timeline.md,
 * "Canvas interface"); it exists from the moment this script runs, so other
 * scripts may subscribe before the page is shown. This file holds the
 * interface, the tiles and their cache, and the view's state and movements;
 * timeline_draw.js draws a frame, timeline_input.js reads the mouse and keys;
 * the page's toolbar, details panel and URL live in timeline_ui.js.
 */
(function () {
    "use strict";

    var LANE_H = 18, BAR_H = 14, AXIS_H = 24, LABEL_W = 210, BLOCK = 64;
    var TILE_CACHE_BYTES = 96 * 1024 * 1024, MAX_INFLIGHT = 6;
    var ZOOM_PER_PX = 0.0025, MIN_SPAN = 200;  // ns: the narrowest window
    var TYPES = {i32: Int32Array, f32: Float32Array, f64: Float64Array, u8: Uint8Array};

    // ------------------------------------------------------------------
    // the published interface (stable: see docs/timeline.md)

    var listeners = {};
    var api = {
        version: 1,
        view: null,  // the running view (internal; use the methods below)
        on: function (name, fn) {
            (listeners[name] = listeners[name] || []).push(fn);
            return function () { api.off(name, fn); };
        },
        off: function (name, fn) {
            listeners[name] = (listeners[name] || []).filter(function (f) { return f !== fn; });
        },
        emit: function (name, detail) {
            (listeners[name] || []).slice().forEach(function (fn) {
                try { fn(detail); } catch (e) { console.error(e); }  // one bad listener stays one
            });
        },
        /** The view: trace, mode, window (absolute trace ns as strings and numbers). */
        getView: function () { return api.view ? api.view.describe() : null; },
        /** Show [t1, t2) (absolute trace ns, numbers or strings). */
        goto: function (t1, t2) { if (api.view) api.view.gotoAbs(t1, t2); },
        /** Outline spans: [{lane | goroutine, t1, t2}] (absolute ns); [] clears. */
        highlight: function (spans) { if (api.view) api.view.setHighlights(spans || []); },
        /** Arrows over the lanes: [{fromLane | fromGoroutine, fromTs, toLane | toGoroutine,
         *  toTs, label}] (absolute ns); [] clears. */
        setArrows: function (list) { if (api.view) api.view.setArrows(list || []); },
        /** The lane key that shows goroutine g in this mode ("g<id>" by G; by P or M
         *  a goroutine moves between lanes: null, and spans given by goroutine are
         *  matched to the P/M lanes whose shapes ran it). */
        laneKeyForGoroutine: function (g) {
            return api.view && api.view.mode === "g" ? "g" + g : null;
        },
        /** Select interval ref as a click would (select-span follows); resolves to
         *  false when this mode has no lane for it. */
        selectRef: function (ref) {
            return api.view ? api.view.selectRef(ref) : Promise.resolve(false);
        },
        /** Scroll a lane (key) into view; resolves to its index, or -1. */
        revealLane: function (key) {
            return api.view ? api.view.revealLane(key) : Promise.resolve(-1);
        },
        /** Extra drawing over the lanes each frame: fn(ctx, helpers); returns a remover. */
        addLayer: function (fn) {
            layers.push(fn);
            if (api.view) api.view.invalidate();
            return function () {
                layers = layers.filter(function (f) { return f !== fn; });
                if (api.view) api.view.invalidate();
            };
        }
    };
    var layers = [];
    window.gmpscopeTimeline = api;

    // ------------------------------------------------------------------
    // tiles

    function decodeTile(buf) {
        var magic = new TextDecoder().decode(new Uint8Array(buf, 0, 8));
        if (magic !== "GMPTILE1") throw new Error("not a timeline tile");
        var n = new DataView(buf).getUint32(8, true);
        var head = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 12, n)));
        var off = 12 + n, cols = {};
        head.columns.forEach(function (c) {
            var T = TYPES[c[1]];
            cols[c[0]] = new T(buf, off, c[2]);
            off += Math.ceil(c[2] * T.BYTES_PER_ELEMENT / 8) * 8;
        });
        head.cols = cols;
        head.bytes = buf.byteLength;
        // Each lane's shapes (they come sorted by lane, then start).
        var laneAt = {}, lane = cols.lane, len = lane.length, i = 0;
        while (i < len) {
            var j = i, l = lane[i];
            while (j < len && lane[j] === l) j++;
            laneAt[l] = [i, j];
            i = j;
        }
        head.laneAt = laneAt;
        return head;
    }

    function TileCache(limit) {
        this.limit = limit;
        this.bytes = 0;
        this.map = new Map();
    }
    TileCache.prototype.get = function (key) {
        var t = this.map.get(key);
        if (t) { this.map.delete(key); this.map.set(key, t); }  // most recently used last
        return t;
    };
    TileCache.prototype.peek = function (key) { return this.map.get(key); };
    TileCache.prototype.put = function (key, t) {
        if (this.map.has(key)) this.bytes -= this.map.get(key).bytes;
        this.map.set(key, t);
        this.bytes += t.bytes;
        var it = this.map.keys();
        while (this.bytes > this.limit && this.map.size > 1) {
            var k = it.next().value;
            this.bytes -= this.map.get(k).bytes;
            this.map.delete(k);
        }
    };

    // ------------------------------------------------------------------
    // formatting

    function fmtNs(ns) {
        var a = Math.abs(ns);
        if (a >= 1e9) return (ns / 1e9).toPrecision(3) + " s";
        if (a >= 1e6) return (ns / 1e6).toPrecision(3) + " ms";
        if (a >= 1e3) return (ns / 1e3).toPrecision(3) + " µs";
        return Math.round(ns) + " ns";
    }

    /** An axis label: t in the unit of the step, with the decimals the step needs. */
    function fmtTick(t, step) {
        var units = [[1e9, "s"], [1e6, "ms"], [1e3, "µs"], [1, "ns"]], u = units[3];
        for (var i = 0; i < units.length; i++) if (step >= units[i][0] / 10 || i === 3) { u = units[i]; break; }
        var dec = Math.max(0, Math.min(9, Math.ceil(-Math.log10(step / u[0]) - 1e-9)));
        return (t / u[0]).toFixed(dec) + " " + u[1];
    }

    function niceStep(ns) {
        var p = Math.pow(10, Math.floor(Math.log10(ns))), m = ns / p;
        return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
    }

    function absNs(first, rel) { return (BigInt(first) + BigInt(Math.round(rel))).toString(); }
    function relNs(first, abs) { return Number(BigInt(String(abs)) - BigInt(first)); }

    // ------------------------------------------------------------------
    // the view

    function View(root) {
        var d = root.dataset;
        this.root = root;
        this.traceId = d.trace;
        this.mode = d.mode || "p";
        this.group = d.group || "";
        this.focusId = d.focus || "";  // g, m or p id named in the link
        this.first = d.first;  // absolute ns, as a string (BigInt arithmetic)
        this.span = relNs(d.first, d.last) || 1;
        this.colors = JSON.parse(d.colors);
        this.v1 = d.t1 ? Math.max(0, relNs(d.first, d.t1)) : 0;
        this.v2 = d.t2 ? Math.min(this.span, relNs(d.first, d.t2)) : this.span;
        if (!(this.v2 > this.v1)) { this.v1 = 0; this.v2 = this.span; }
        this.scrollRow = Math.max(0, parseInt(d.offset || "0", 10) || 0);
        this.total = 0;
        this.meta = null;  // first lanes answer: categories, kinds, levels, groups
        this.laneBlocks = new Map();  // block of 500 lanes -> lanes fields
        this.pinned = [];  // lane indexes shown above the scrolled lanes (sorted)
        this.cache = new TileCache(TILE_CACHE_BYTES);
        this.inflight = new Map();
        this.failed = new Set();
        this.highlights = [];
        this.arrows = [];
        this.selected = null;  // {lane, t (rel ns), shape info}
        this.focusLane = -1;  // the keyboard's lane
        this.area = null;  // {r1, r2, rowA, rowB}
        this.held = {};
        this.dirty = false;
        this.alive = true;
        this.build();
        this.load();
    }

    View.prototype.build = function () {
        var self = this;
        var wrap = document.createElement("div");
        wrap.className = "timeline-canvas-wrap";
        var canvas = document.createElement("canvas");
        canvas.id = "timeline-canvas";
        canvas.tabIndex = 0;
        canvas.setAttribute("role", "application");
        canvas.setAttribute("aria-label", "Timeline lanes: W/S zoom, A/D pan, arrows move " +
                            "between lanes and spans, ? for all keys");
        var bar = document.createElement("div");
        bar.className = "timeline-vscroll";
        var spacer = document.createElement("div");
        bar.appendChild(spacer);
        var tip = document.createElement("div");
        tip.className = "timeline-tooltip";
        tip.hidden = true;
        wrap.appendChild(canvas);
        wrap.appendChild(bar);
        wrap.appendChild(tip);
        var host = this.root.querySelector(".timeline-canvas-host") || this.root;
        host.appendChild(wrap);
        this.wrap = wrap;
        this.canvas = canvas;
        this.ctx = canvas.getContext("2d");
        this.vbar = bar;
        this.spacer = spacer;
        this.tip = tip;
        bar.addEventListener("scroll", function () {
            var row = Math.round(bar.scrollTop / LANE_H);
            if (row !== self.scrollRow) { self.scrollRow = row; self.viewMoved(); }
        });
        this.bindInput();
        this.onResize = function () { self.resize(); };
        window.addEventListener("resize", this.onResize);
    };

    View.prototype.destroy = function () {
        this.alive = false;
        window.removeEventListener("resize", this.onResize);
        if (this.raf) cancelAnimationFrame(this.raf);
        if (api.view === this) api.view = null;
    };

    View.prototype.url = function (path, q) {
        var p = new URLSearchParams(q);
        return "/api/traces/" + this.traceId + "/timeline/" + path + "?" + p.toString();
    };

    View.prototype.baseQuery = function () {
        var q = {mode: this.mode};
        if (this.group && this.mode === "g") q.group = this.group;
        return q;
    };

    View.prototype.load = function () {
        var self = this, q = this.baseQuery();
        q.offset = 0;
        q.limit = 500;
        if (this.focusId !== "") q[this.mode] = this.focusId;
        fetch(this.url("lanes", q)).then(function (r) {
            return r.ok ? r.json() : r.json().then(function (e) { throw new Error(e.error); });
        }).then(function (meta) {
            if (!self.alive) return;
            self.meta = meta;
            self.total = meta.total;
            self.laneBlocks.set(0, meta.lanes);
            // The GC/STW/sweep/assist lanes stay on top while the others scroll, unless
            // the link names the pinned lanes (pin=, lane indexes).
            meta.lanes.type.forEach(function (t, i) { if (t === "range") self.pinned.push(i); });
            self.defaultPins = self.pinned.join(",");
            var pin = self.root.dataset.pin;
            if (pin != null && pin !== "") {
                self.pinned = pin.split(",").map(Number).filter(function (i) {
                    return Number.isInteger(i) && i >= 0 && i < meta.total;
                }).sort(function (a, b) { return a - b; })
                    .filter(function (i, k, a) { return k === 0 || a[k - 1] !== i; });
            } else if (pin === "") {
                self.pinned = [];
            }
            if (meta.focus >= 0) {
                self.focusLane = meta.focus;
                self.scrollRow = Math.max(0, self.rowOfLane(meta.focus) - 3);
            }
            self.resize();
            api.view = self;
            api.emit("ready", self.describe());
            self.viewMoved();
        }).catch(function (e) {
            self.root.querySelector(".timeline-status").textContent = "Timeline: " + e.message;
        });
    };

    // lanes ------------------------------------------------------------

    View.prototype.lane = function (i) {
        var b = this.laneBlocks.get(Math.floor(i / 500));
        if (!b) { this.fetchLanes(Math.floor(i / 500)); return null; }
        var k = i % 500;
        return {index: i, key: b.key[k], label: b.label[k], type: b.type[k], id: b.id[k]};
    };

    View.prototype.fetchLanes = function (blk) {
        var self = this, key = "lanes" + blk;
        if (this.inflight.has(key) || this.laneBlocks.has(blk)) return;
        var q = this.baseQuery();
        q.offset = blk * 500;
        q.limit = 500;
        this.inflight.set(key, fetch(this.url("lanes", q)).then(function (r) { return r.json(); })
            .then(function (m) { self.laneBlocks.set(blk, m.lanes); })
            .finally(function () { self.inflight.delete(key); self.invalidate(); }));
    };

    /** Rows scrolled below the pinned lanes: every lane that is not pinned. */
    View.prototype.scrollRows = function () { return this.total - this.pinned.length; };

    View.prototype.laneOfRow = function (r) {
        var lane = r;
        for (var i = 0; i < this.pinned.length; i++) {
            if (this.pinned[i] <= lane) lane++; else break;
        }
        return lane;
    };

    View.prototype.rowOfLane = function (lane) {
        var r = lane;
        for (var i = 0; i < this.pinned.length; i++) if (this.pinned[i] < lane) r--;
        return r;
    };

    View.prototype.visibleRows = function () {
        return Math.max(1, Math.floor((this.h - AXIS_H) / LANE_H) - this.pinned.length);
    };

    /** [{lane, y}] of the lanes drawn now: pinned first, then the scrolled ones. */
    View.prototype.drawnLanes = function () {
        var out = [], y = AXIS_H, i;
        for (i = 0; i < this.pinned.length; i++, y += LANE_H) out.push({lane: this.pinned[i], y: y});
        this.pinnedEnd = y;
        var n = Math.min(this.visibleRows(), this.scrollRows() - this.scrollRow);
        for (i = 0; i < n; i++, y += LANE_H) out.push({lane: this.laneOfRow(this.scrollRow + i), y: y});
        return out;
    };

    View.prototype.togglePin = function (lane) {
        var at = this.pinned.indexOf(lane);
        if (at >= 0) this.pinned.splice(at, 1); else this.pinned.push(lane);
        this.pinned.sort(function (a, b) { return a - b; });
        this.resize();
        this.viewMoved();
    };

    View.prototype.revealLane = function (key) {
        var self = this, m = /^(?:[pmg])(\d+)$/.exec(key);
        var known = this.findLoadedLane(key);
        if (known >= 0) { this.scrollToLane(known); return Promise.resolve(known); }
        if (!m || key[0] !== this.mode) return Promise.resolve(-1);
        var q = this.baseQuery();
        q[this.mode] = m[1];
        q.limit = 1;
        return fetch(this.url("lanes", q)).then(function (r) { return r.json(); })
            .then(function (a) { if (a.focus >= 0) self.scrollToLane(a.focus); return a.focus; });
    };

    View.prototype.findLoadedLane = function (key) {
        var found = -1;
        this.laneBlocks.forEach(function (b, blk) {
            var k = b.key.indexOf(key);
            if (k >= 0 && found < 0) found = blk * 500 + k;
        });
        return found;
    };

    View.prototype.scrollToLane = function (lane) {
        this.focusLane = lane;
        if (this.pinned.indexOf(lane) < 0) {
            var r = this.rowOfLane(lane), vis = this.visibleRows();
            if (r < this.scrollRow) this.scrollRow = r;
            else if (r >= this.scrollRow + vis) this.scrollRow = r - vis + 1;
        }
        this.viewMoved();
    };

    // geometry ------------------------------------------------------------

    View.prototype.resize = function () {
        var dpr = window.devicePixelRatio || 1;
        var w = Math.max(300, this.wrap.clientWidth - 16);
        var rows = this.total || 8;
        var want = AXIS_H + rows * LANE_H + 4;
        var h = Math.max(160, Math.min(want, Math.round(window.innerHeight * 0.7)));
        this.w = w;
        this.h = h;
        this.canvas.style.width = w + "px";
        this.canvas.style.height = h + "px";
        this.canvas.width = Math.round(w * dpr);
        this.canvas.height = Math.round(h * dpr);
        this.dpr = dpr;
        this.vbar.style.height = h + "px";
        this.vbar.style.display = this.scrollRows() > this.visibleRows() ? "" : "none";
        this.spacer.style.height = (this.scrollRows() * LANE_H + (h - this.visibleRows() * LANE_H)) + "px";
        this.invalidate();
    };

    View.prototype.plotW = function () { return this.w - LABEL_W; };
    View.prototype.xOf = function (t) { return LABEL_W + (t - this.v1) * this.plotW() / (this.v2 - this.v1); };
    View.prototype.tOf = function (x) { return this.v1 + (x - LABEL_W) * (this.v2 - this.v1) / this.plotW(); };

    View.prototype.level = function () {
        var nsPerPx = (this.v2 - this.v1) / this.plotW();
        var want = Math.ceil(Math.log2(this.span / (this.meta.tile_buckets * nsPerPx)));
        return Math.max(0, Math.min(this.meta.max_level, want));
    };

    /** Tile i of level L: [r1, r2) in ns since the first timestamp (as the server cuts it). */
    View.prototype.tileSpan = function (L, i) {
        var s = BigInt(Math.round(this.span));
        return [Number((BigInt(i) * s) >> BigInt(L)), Number((BigInt(i + 1) * s) >> BigInt(L))];
    };

    View.prototype.tileRange = function (L) {
        var n = Math.pow(2, L);
        var a = Math.max(0, Math.floor(this.v1 * n / this.span));
        var b = Math.min(n - 1, Math.floor(Math.max(this.v1, this.v2 - 1) * n / this.span));
        return [a, b];
    };

    View.prototype.tileKey = function (L, i, blk) {
        return [this.mode, this.group, L, i, blk].join("|");
    };

    // moving ------------------------------------------------------------

    View.prototype.setWindow = function (v1, v2) {
        var span = Math.max(MIN_SPAN, v2 - v1);
        if (span >= this.span) { v1 = 0; v2 = this.span; } else {
            v1 = Math.min(Math.max(0, v1), this.span - span);
            v2 = v1 + span;
        }
        if (v1 === this.v1 && v2 === this.v2) return;
        this.v1 = v1;
        this.v2 = v2;
        this.viewMoved();
    };

    View.prototype.zoomAt = function (x, factor) {
        var t = this.tOf(Math.max(LABEL_W, x));
        this.setWindow(t - (t - this.v1) * factor, t + (this.v2 - t) * factor);
    };

    View.prototype.panPx = function (dx) {
        var d = dx * (this.v2 - this.v1) / this.plotW();
        this.setWindow(this.v1 + d, this.v2 + d);
    };

    View.prototype.whole = function () { this.area = null; this.setWindow(0, this.span); };

    View.prototype.gotoAbs = function (t1, t2) {
        this.setWindow(relNs(this.first, t1), relNs(this.first, t2));
    };

    View.prototype.scrollBy = function (rows) {
        var max = Math.max(0, this.scrollRows() - this.visibleRows());
        var r = Math.max(0, Math.min(max, this.scrollRow + rows));
        if (r !== this.scrollRow) { this.scrollRow = r; this.viewMoved(); }
    };

    View.prototype.viewMoved = function () {
        var max = Math.max(0, this.scrollRows() - this.visibleRows());
        this.scrollRow = Math.max(0, Math.min(this.scrollRow, max));
        if (Math.round(this.vbar.scrollTop / LANE_H) !== this.scrollRow) {
            this.vbar.scrollTop = this.scrollRow * LANE_H;
        }
        this.invalidate();
        api.emit("view", this.describe());
    };

    View.prototype.describe = function () {
        return {traceId: Number(this.traceId), mode: this.mode, group: this.group || null,
                t1: absNs(this.first, this.v1), t2: absNs(this.first, this.v2),
                firstTs: this.first, lastTs: absNs(this.first, this.span),
                offset: this.scrollRow, focus: this.focusId, lanes: this.total,
                pinned: this.pinned.map(function (i) { return i; }),
                pinnedDefault: this.pinned.join(",") === this.defaultPins,
                // Where the plot is on the canvas (CSS px): t1 at plotLeft, t2 at its end.
                plotLeft: LABEL_W, plotWidth: this.plotW(), laneHeight: LANE_H,
                devicePixelRatio: this.dpr};
    };

    View.prototype.invalidate = function () {
        var self = this;
        if (this.dirty || !this.alive) return;
        this.dirty = true;
        this.raf = requestAnimationFrame(function (ts) { self.dirty = false; self.frame(ts); });
    };

    // fetching ------------------------------------------------------------

    /** Ask for a tile unless cached or on its way; with every slot taken, the frame
     *  that the next arrival draws asks again. (A request the view no longer needs
     *  is not aborted: the server computes it all the same, so aborting only lets
     *  more requests pile up there; the tile is kept for a zoom back.) */
    View.prototype.request = function (L, i, blk) {
        var key = this.tileKey(L, i, blk), self = this;
        if (this.cache.peek(key) || this.inflight.has(key) || this.failed.has(key)) return;
        if (this.inflight.size >= MAX_INFLIGHT) return;
        var q = this.baseQuery();
        q.level = L;
        q.index = i;
        q.lanes = (blk * BLOCK) + "-" + Math.min(this.total, (blk + 1) * BLOCK);
        var p = fetch(this.url("tiles", q)).then(function (r) {
            if (!r.ok) throw new Error("tile " + r.status);
            return r.arrayBuffer();
        }).then(function (buf) {
            self.cache.put(key, decodeTile(buf));
        }).catch(function () {
            self.failed.add(key);
        }).finally(function () {
            self.inflight.delete(key);
            self.invalidate();
        });
        this.inflight.set(key, p);
    };

    /** The cached tile to draw for tile i of level L and block blk: itself, or the
     *  finest cached ancestor (coarser level covering it). */
    View.prototype.bestTile = function (L, i, blk) {
        for (var l = L; l >= 0; l--) {
            var t = this.cache.get(this.tileKey(l, i >> (L - l), blk));
            if (t) return t;
        }
        return null;
    };

    // ------------------------------------------------------------------
    // for the view's other modules (timeline_draw.js, timeline_input.js): not an
    // interface, they load with this one

    api._internal = {
        View: View, LANE_H: LANE_H, BAR_H: BAR_H, AXIS_H: AXIS_H, LABEL_W: LABEL_W, BLOCK: BLOCK,
        ZOOM_PER_PX: ZOOM_PER_PX, fmtTick: fmtTick, niceStep: niceStep, absNs: absNs,
        relNs: relNs, layers: function () { return layers; }
    };
    // ------------------------------------------------------------------
    // life cycle: one view per #timeline-root element

    var current = null;

    function check() {
        var root = document.getElementById("timeline-root");
        if (current && current.root === root && root) return;
        if (current) { current.destroy(); current = null; }
        if (root && root.dataset.trace) {
            current = new View(root);
            api.current = current;
        }
    }

    /** Rebuild the view from #timeline-root's data attributes (mode, window, ...). */
    api.restart = function () {
        if (current) { current.destroy(); current.wrap.remove(); current = null; }
        check();
    };
    api.fmtNs = fmtNs;
    api.decodeTile = decodeTile;  // for bench/timeline_canvas.py's format measures
    api.absNs = function (rel) { return current ? absNs(current.first, rel) : null; };
    // The page's element appears when Dash renders it, after every script of the
    // page has run (the draw and input modules included); the first look waits
    // for the document to be loaded for the same reason.
    new MutationObserver(check).observe(document.documentElement, {childList: true, subtree: true});
    if (document.readyState === "complete") check();
    else window.addEventListener("load", check);
})();
