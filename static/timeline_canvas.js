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
 * scripts may subscribe before the page is shown. The page's toolbar, details
 * panel and URL live in timeline_ui.js, which uses the same object.
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

    View.prototype.request = function (L, i, blk) {
        var key = this.tileKey(L, i, blk), self = this;
        if (this.cache.peek(key) || this.inflight.has(key) || this.failed.has(key)) return;
        // Full: asked again by the frame that the next arrival draws.
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

    // drawing ------------------------------------------------------------

    View.prototype.frame = function (ts) {
        if (!this.alive || !this.meta) return;
        this.stepKeys(ts);
        var ctx = this.ctx, dpr = this.dpr;
        ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
        ctx.clearRect(0, 0, this.w, this.h);
        var lanes = this.drawnLanes();
        var L = this.level(), range = this.tileRange(L);
        var blocks = {};
        lanes.forEach(function (l) { blocks[Math.floor(l.lane / BLOCK)] = true; });
        var complete = true, drawnTiles = [];
        var rowY = {};
        lanes.forEach(function (l) { rowY[l.lane] = l.y; });
        this.rowY = rowY;
        this.drawLaneBackground(ctx, lanes);
        ctx.save();
        ctx.beginPath();
        ctx.rect(LABEL_W, AXIS_H, this.plotW(), this.h - AXIS_H);
        ctx.clip();
        for (var b in blocks) {
            var blk = Number(b), seen = new Set();
            // Coarsest level first: a view always has its whole-trace tile to fall back on.
            this.request(0, 0, blk);
            for (var i = range[0]; i <= range[1]; i++) {
                this.request(L, i, blk);
                var t = this.bestTile(L, i, blk);
                if (!t || t.level !== L) complete = false;
                if (t && !seen.has(t)) { seen.add(t); drawnTiles.push(t); }
            }
        }
        // Coarse tiles under fine ones: where a fine tile is missing the coarse one shows.
        drawnTiles.sort(function (a, b) { return a.level - b.level; });
        this.coarsest = drawnTiles.length ? drawnTiles[0].level : 0;
        for (var k = 0; k < drawnTiles.length; k++) this.drawTile(ctx, drawnTiles[k], rowY);
        this.drawnTiles = drawnTiles;
        this.drawHighlights(ctx, lanes);
        this.drawArea(ctx);
        var helpers = this.layerHelpers();
        layers.forEach(function (fn) {
            try { ctx.save(); fn(ctx, helpers); } catch (e) { console.error(e); } finally { ctx.restore(); }
        });
        this.drawArrows(ctx);
        ctx.restore();
        this.drawAxis(ctx);
        this.drawLabels(ctx, lanes);
        this.lastFrame = {ts: ts, complete: complete, level: L, tiles: drawnTiles.length};
        api.emit("frame", {ts: ts, drawnAt: performance.now(), complete: complete, level: L});
        if (this.keysHeld()) this.invalidate();
    };

    View.prototype.drawLaneBackground = function (ctx, lanes) {
        var self = this;
        this.rowBg = {};
        lanes.forEach(function (l, n) {
            var lane = self.lane(l.lane);
            var bg = lane && lane.type === "group" ? "#eef1f6"
                : l.lane === self.focusLane ? "#eaf3fa" : n % 2 ? "#fbfcfd" : "#ffffff";
            self.rowBg[l.lane] = bg;
            ctx.fillStyle = bg;
            ctx.fillRect(0, l.y, self.w, LANE_H);
        });
        if (this.pinned.length) {
            ctx.fillStyle = "#c9ced6";
            ctx.fillRect(0, this.pinnedEnd - 1, this.w, 1);
        }
    };

    View.prototype.shapeColor = function (cat, n, g) {
        var c = this.colors;
        if (n === 1 && g >= 0 && this.mode !== "g" && this.meta.categories[cat] === "Running") {
            return c.goroutines[g % c.goroutines.length];
        }
        return c.categories[this.meta.categories[cat]] || "#999999";
    };

    View.prototype.drawTile = function (ctx, t, rowY) {
        var c = t.cols, scale = this.plotW() / (this.v2 - this.v1), dpr = this.dpr;
        var base = LABEL_W + (t.r1 - this.v1) * scale;
        var minX = LABEL_W - 1, maxX = this.w + 1, last = null;
        if (t.level > this.coarsest) {
            // A finer tile over a coarser one: its span shows its own shapes only.
            var x0 = Math.round(Math.max(LABEL_W, base) * dpr) / dpr;
            var x9 = Math.round(Math.min(this.w, base + (t.r2 - t.r1) * scale) * dpr) / dpr;
            for (var ln = t.lanes[0]; ln < t.lanes[1]; ln++) {
                var yy = rowY[ln];
                if (yy === undefined) continue;
                ctx.fillStyle = this.rowBg[ln];
                ctx.fillRect(x0, yy, x9 - x0, LANE_H);
            }
        }
        for (var lane in t.laneAt) {
            var y = rowY[lane];
            if (y === undefined) continue;
            var r = t.laneAt[lane], yb = y + (LANE_H + BAR_H) / 2;
            for (var i = r[0]; i < r[1]; i++) {
                var x = base + c.s[i] * scale, x2 = x + c.d[i] * scale;
                if (x > maxX || x2 < minX) continue;
                // Whole device pixels: tiles meet without seams; at least one pixel wide.
                x = Math.round(x * dpr) / dpr;
                x2 = Math.max(x + 1 / dpr, Math.round(x2 * dpr) / dpr);
                var n = c.n[i], hgt = n > 1 ? Math.max(1, BAR_H * c.cover[i]) : BAR_H;
                var col = this.shapeColor(c.cat[i], n, c.g[i]);
                if (col !== last) { ctx.fillStyle = col; last = col; }
                ctx.fillRect(x, yb - hgt, x2 - x, hgt);
            }
        }
        if (t.marks && t.marks.length) this.drawMarks(ctx, t, rowY, base, scale);
    };

    View.prototype.drawMarks = function (ctx, t, rowY, base, scale) {
        t.marks.forEach(function (mk) {
            var y = rowY[mk.lane];
            if (y === undefined) return;
            var x = base + mk.s * scale;
            ctx.fillStyle = mk.errno && mk.errno !== "EAGAIN" ? "#c44e52" : "#18202c";
            ctx.beginPath();
            ctx.moveTo(x, y + LANE_H - 9);  // a triangle pointing up at the call's start
            ctx.lineTo(x - 3.5, y + LANE_H - 2);
            ctx.lineTo(x + 3.5, y + LANE_H - 2);
            ctx.fill();
        });
    };

    View.prototype.drawAxis = function (ctx) {
        ctx.fillStyle = "#ffffff";
        ctx.fillRect(0, 0, this.w, AXIS_H);
        ctx.fillStyle = "#c9ced6";
        ctx.fillRect(0, AXIS_H - 1, this.w, 1);
        var span = this.v2 - this.v1, step = niceStep(span / 8);
        ctx.font = "11px system-ui, sans-serif";
        ctx.textBaseline = "middle";
        ctx.fillStyle = "#5a6472";
        ctx.fillText("since trace start", 6, AXIS_H / 2);
        for (var t = Math.ceil(this.v1 / step) * step; t < this.v2; t += step) {
            var x = Math.round(this.xOf(t)) + 0.5;
            ctx.fillStyle = "#c9ced6";
            ctx.fillRect(x, AXIS_H - 6, 1, 6);
            ctx.fillStyle = "#2a3f5f";
            ctx.fillText(fmtTick(t, step), x + 3, AXIS_H / 2);
        }
    };

    View.prototype.drawLabels = function (ctx, lanes) {
        var self = this;
        ctx.fillStyle = "#ffffff";
        ctx.fillRect(0, AXIS_H, LABEL_W, this.h - AXIS_H);
        ctx.font = "12px system-ui, sans-serif";
        ctx.textBaseline = "middle";
        lanes.forEach(function (l) {
            var lane = self.lane(l.lane), text = lane ? lane.label : "…";
            var bold = lane && (lane.type === "group" || lane.type === "range");
            ctx.font = (bold ? "600 " : "") + "12px system-ui, sans-serif";
            ctx.fillStyle = l.lane === self.focusLane ? "#1f6fb0" : "#2a3f5f";
            if (self.pinned.indexOf(l.lane) >= 0) {  // pinned: a mark at the lane's left edge
                ctx.fillStyle = "#2f8fd0";
                ctx.fillRect(0, l.y + 3, 3, LANE_H - 6);
                ctx.fillStyle = l.lane === self.focusLane ? "#1f6fb0" : "#2a3f5f";
            }
            var max = LABEL_W - 10;
            text = (l.lane === self.focusLane ? "▶ " : "") + text;
            while (text.length > 4 && ctx.measureText(text).width > max) text = "…" + text.slice(2);
            ctx.fillText(text, 6, l.y + LANE_H / 2);
        });
        ctx.fillStyle = "#c9ced6";
        ctx.fillRect(LABEL_W - 1, AXIS_H, 1, this.h - AXIS_H);
    };

    View.prototype.drawArea = function (ctx) {
        if (!this.area) return;
        var a = this.area, x1 = this.xOf(Math.min(a.r1, a.r2)), x2 = this.xOf(Math.max(a.r1, a.r2));
        var ys = this.areaLanes().map(function (l) { return l.y; });
        if (!ys.length) return;
        var y1 = Math.min.apply(null, ys), y2 = Math.max.apply(null, ys) + LANE_H;
        ctx.fillStyle = "rgba(47,143,208,0.15)";
        ctx.fillRect(x1, y1, x2 - x1, y2 - y1);
        ctx.strokeStyle = "#2f8fd0";
        ctx.lineWidth = 1;
        ctx.strokeRect(x1 + 0.5, y1 + 0.5, x2 - x1 - 1, y2 - y1 - 1);
    };

    /** Drawn lanes inside the area selection's rows (pinned ones by their position). */
    View.prototype.areaLanes = function () {
        var a = this.area, lo = Math.min(a.y1, a.y2), hi = Math.max(a.y1, a.y2);
        return this.drawnLanes().filter(function (l) { return l.y + LANE_H > lo && l.y < hi; });
    };

    // lanes of goroutines in P/M modes: the drawn shapes that ran them --------

    /** [{y, x1, x2}] where goroutine g's spans overlapping [r1, r2] are drawn. */
    View.prototype.goroutineBoxes = function (g, r1, r2) {
        var out = [], self = this, scale = this.plotW() / (this.v2 - this.v1);
        var key = this.mode === "g" ? this.findLoadedLane("g" + g) : -1;
        if (this.mode === "g") {
            var y = key >= 0 ? this.rowY[key] : undefined;
            if (y !== undefined) out.push({y: y, x1: this.xOf(r1), x2: this.xOf(r2)});
            return out;
        }
        (this.drawnTiles || []).forEach(function (t) {
            var c = t.cols, base = LABEL_W + (t.r1 - self.v1) * scale;
            for (var lane in t.laneAt) {
                var y = self.rowY[lane];
                if (y === undefined) continue;
                var r = t.laneAt[lane];
                for (var i = r[0]; i < r[1]; i++) {
                    if (c.g[i] !== g) continue;
                    var s = t.r1 + c.s[i], e = s + c.d[i];
                    if (e < r1 || s > r2) continue;
                    out.push({y: y, x1: base + c.s[i] * scale, x2: base + (c.s[i] + c.d[i]) * scale});
                }
            }
        });
        return out;
    };

    View.prototype.boxesOf = function (item, prefix) {
        var lane = item[prefix ? prefix + "Lane" : "lane"];
        var g = item[prefix ? prefix + "Goroutine" : "goroutine"];
        var r1 = relNs(this.first, prefix ? item[prefix + "Ts"] : item.t1);
        var r2 = prefix ? r1 : relNs(this.first, item.t2);
        if (lane != null) {
            var i = this.findLoadedLane(String(lane));
            var y = i >= 0 ? this.rowY[i] : undefined;
            return y === undefined ? [] : [{y: y, x1: this.xOf(r1), x2: this.xOf(r2)}];
        }
        return g != null ? this.goroutineBoxes(Number(g), r1, r2) : [];
    };

    View.prototype.setHighlights = function (spans) { this.highlights = spans; this.invalidate(); };
    View.prototype.setArrows = function (list) { this.arrows = list; this.invalidate(); };

    View.prototype.drawHighlights = function (ctx) {
        var self = this;
        ctx.strokeStyle = "#ff7f0e";
        ctx.lineWidth = 2;
        this.highlights.forEach(function (h) {
            self.boxesOf(h, "").forEach(function (b) {
                ctx.strokeRect(b.x1 - 1, b.y + 1, Math.max(2, b.x2 - b.x1) + 2, LANE_H - 2);
            });
        });
        if (this.selected) {
            var s = this.selected, y = this.rowY[s.lane];
            if (y !== undefined) {
                ctx.strokeStyle = "#111111";
                ctx.lineWidth = 1.5;
                var x1 = this.xOf(s.r1), x2 = this.xOf(s.r2);
                ctx.strokeRect(x1 - 1, y + 0.5, Math.max(2, x2 - x1) + 2, LANE_H - 1);
            }
        }
    };

    View.prototype.drawArrows = function (ctx) {
        var self = this;
        ctx.lineWidth = 1.5;
        ctx.font = "11px system-ui, sans-serif";
        this.arrows.forEach(function (a) {
            var from = self.boxesOf(a, "from")[0], to = self.boxesOf(a, "to")[0];
            if (!from || !to) return;
            var x1 = from.x1, y1 = from.y + LANE_H / 2, x2 = to.x1, y2 = to.y + LANE_H / 2;
            ctx.strokeStyle = ctx.fillStyle = a.color || "#d62728";
            ctx.beginPath();
            ctx.moveTo(x1, y1);
            ctx.bezierCurveTo(x1 + 30, y1, x2 - 30, y2, x2, y2);
            ctx.stroke();
            var ang = Math.atan2(y2 - y1, 30);
            ctx.beginPath();
            ctx.moveTo(x2, y2);
            ctx.lineTo(x2 - 7 * Math.cos(ang - 0.4), y2 - 7 * Math.sin(ang - 0.4));
            ctx.lineTo(x2 - 7 * Math.cos(ang + 0.4), y2 - 7 * Math.sin(ang + 0.4));
            ctx.fill();
            if (a.label) ctx.fillText(a.label, (x1 + x2) / 2 + 4, (y1 + y2) / 2 - 4);
        });
    };

    View.prototype.layerHelpers = function () {
        var self = this;
        return {
            mode: this.mode, laneHeight: LANE_H, left: LABEL_W, width: this.w, height: this.h,
            t1: absNs(this.first, this.v1), t2: absNs(this.first, this.v2),
            /** x (CSS px) of an absolute trace ns. */
            x: function (abs) { return self.xOf(relNs(self.first, abs)); },
            /** Top y of a lane (key) if drawn now, else null. */
            laneY: function (key) {
                var i = self.findLoadedLane(String(key));
                var y = i >= 0 ? self.rowY[i] : undefined;
                return y === undefined ? null : y;
            },
            /** [{y, x1, x2}] where goroutine g runs in [t1, t2] (absolute ns). */
            goroutineBoxes: function (g, t1, t2) {
                return self.goroutineBoxes(Number(g), relNs(self.first, t1), relNs(self.first, t2));
            },
            lanes: function () {
                return self.drawnLanes().map(function (l) {
                    var lane = self.lane(l.lane);
                    return {index: l.lane, key: lane ? lane.key : null, y: l.y};
                });
            }
        };
    };

    // hit testing ------------------------------------------------------------

    View.prototype.laneAtY = function (y) {
        var lanes = this.drawnLanes();
        for (var i = 0; i < lanes.length; i++) {
            if (y >= lanes[i].y && y < lanes[i].y + LANE_H) return lanes[i].lane;
        }
        return -1;
    };

    /** The OS mark (M lanes, a poller recording's call) drawn at (x, y), or null. */
    View.prototype.markAt = function (x, y) {
        var lane = this.laneAtY(y), scale = this.plotW() / (this.v2 - this.v1);
        if (lane < 0 || y < this.rowY[lane] + LANE_H - 10) return null;
        var tiles = this.drawnTiles || [];
        for (var k = tiles.length - 1; k >= 0; k--) {
            var t = tiles[k], base = LABEL_W + (t.r1 - this.v1) * scale;
            for (var i = 0; i < (t.marks || []).length; i++) {
                var mk = t.marks[i];
                if (mk.lane === lane && Math.abs(base + mk.s * scale - x) <= 4) return mk;
            }
        }
        return null;
    };

    /** The shape drawn at (x, y): the finest drawn tile's shape under the pointer. */
    View.prototype.shapeAt = function (x, y) {
        var lane = this.laneAtY(y);
        if (lane < 0 || x < LABEL_W) return null;
        var scale = this.plotW() / (this.v2 - this.v1), best = null;
        var tiles = (this.drawnTiles || []).slice().reverse();  // finest first
        for (var k = 0; k < tiles.length && !best; k++) {
            var t = tiles[k], r = t.laneAt[lane];
            if (!r) continue;
            var c = t.cols, base = LABEL_W + (t.r1 - this.v1) * scale, bestD = 3;
            for (var i = r[0]; i < r[1]; i++) {
                var x1 = base + c.s[i] * scale, x2 = x1 + Math.max(1, c.d[i] * scale);
                var dist = x < x1 ? x1 - x : x > x2 ? x - x2 : 0;
                if (dist < bestD) { bestD = dist; best = this.shapeInfo(t, i, lane); }
                if (x1 > x + 3) break;
            }
        }
        return best;
    };

    View.prototype.shapeInfo = function (t, i, lane) {
        var c = t.cols, mix = [];
        for (var j = c.mix_off[i]; j < c.mix_off[i + 1]; j++) mix.push([c.mix_cat[j], c.mix_ns[j]]);
        var l = this.lane(lane), r1 = t.r1 + c.s[i], r2 = r1 + c.d[i], cut = false;
        if (c.n[i] === 1) {
            // A tile holds the part of an interval inside its span: join the parts
            // the drawn tiles hold (the span's own answer has its whole extent).
            (this.drawnTiles || []).forEach(function (u) {
                var q = u.laneAt[lane];
                if (!q || u === t) return;
                for (var j = q[0]; j < q[1]; j++) {
                    if (u.cols.ref[j] !== c.ref[i] || u.cols.n[j] !== 1) continue;
                    r1 = Math.min(r1, u.r1 + u.cols.s[j]);
                    r2 = Math.max(r2, u.r1 + u.cols.s[j] + u.cols.d[j]);
                }
            });
            var tiles = this.drawnTiles || [];
            var lo = Math.min.apply(null, tiles.map(function (u) { return u.r1; }));
            var hi = Math.max.apply(null, tiles.map(function (u) { return u.r2; }));
            cut = (r1 <= lo && lo > 0) || (r2 >= hi && hi < this.span);
        }
        return {lane: lane, laneKey: l ? l.key : null, laneLabel: l ? l.label : "", cut: cut,
                r1: r1, r2: r2, d: r2 - r1, cat: c.cat[i],
                state: this.meta.categories[c.cat[i]], n: c.n[i], ref: c.ref[i], g: c.g[i],
                kind: c.kind[i], cover: c.cover[i], mix: mix, level: t.level};
    };

    /** Select a shape: a single span's details are fetched (its whole extent and
     *  stacks) and then announced as select-span; a merged shape as select-merged. */
    View.prototype.select = function (info) {
        var self = this, seq = this.selectSeq = (this.selectSeq || 0) + 1;
        this.selected = info;
        if (info) this.focusLane = info.lane;
        this.invalidate();
        if (!info) return;
        var detail = {ref: info.n === 1 ? info.ref : -1, goroutine: info.g >= 0 ? info.g : null,
                      t1: absNs(this.first, info.r1), t2: absNs(this.first, info.r2),
                      lane: info.laneKey, laneIndex: info.lane, state: info.state, n: info.n,
                      shape: info, span: null};
        if (info.n !== 1) { api.emit("select-merged", detail); return; }
        api.emit("select-start", detail);
        fetch("/api/traces/" + this.traceId + "/span?ref=" + info.ref).then(function (r) {
            return r.json().then(function (j) { if (!r.ok) throw new Error(j.error); return j; });
        }).then(function (span) {
            if (seq !== self.selectSeq || !self.alive) return;
            detail.span = span;
            detail.t1 = String(span.start_ts);
            detail.t2 = String(span.end_ts);
            if (span.goroutine != null && span.goroutine >= 0) detail.goroutine = span.goroutine;
            info.r1 = relNs(self.first, span.start_ts);
            info.r2 = relNs(self.first, span.end_ts);
            self.invalidate();
            api.emit("select-span", detail);
        }).catch(function (e) {
            if (seq === self.selectSeq) api.emit("select-error", {message: e.message});
        });
    };

    /** The next (dir 1) or previous (-1) shape on the focused lane, from the drawn tiles. */
    View.prototype.stepSpan = function (dir) {
        var lane = this.focusLane;
        if (lane < 0) return;
        var from = this.selected && this.selected.lane === lane ? this.selected : null;
        var t0 = from ? (dir > 0 ? from.r1 : from.r1) : (dir > 0 ? this.v1 - 1 : this.v2 + 1);
        var best = null, bestT = dir > 0 ? Infinity : -Infinity;
        var tiles = (this.drawnTiles || []).filter(function (t) { return t.laneAt[lane]; });
        tiles.sort(function (a, b) { return b.level - a.level; });
        if (!tiles.length) return;
        var L = tiles[0].level, self = this;
        tiles.filter(function (t) { return t.level === L; }).forEach(function (t) {
            var r = t.laneAt[lane], c = t.cols;
            for (var i = r[0]; i < r[1]; i++) {
                var s = t.r1 + c.s[i];
                if ((dir > 0 && s > t0 && s < bestT) || (dir < 0 && s < t0 && s > bestT)) {
                    bestT = s;
                    best = self.shapeInfo(t, i, lane);
                }
            }
        });
        if (!best) return;
        var span = this.v2 - this.v1;
        if (best.r1 < this.v1 || best.r2 > this.v2) {
            var mid = (best.r1 + best.r2) / 2;
            this.setWindow(mid - span / 2, mid + span / 2);
        }
        this.select(best);
    };

    // input ------------------------------------------------------------

    View.prototype.bindInput = function () {
        var self = this, c = this.canvas, drag = null;
        function pos(e) {
            var r = c.getBoundingClientRect();
            return {x: e.clientX - r.left, y: e.clientY - r.top};
        }
        c.addEventListener("wheel", function (e) {
            if (!self.meta) return;
            var p = pos(e), dy = e.deltaY * (e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? 400 : 1);
            e.preventDefault();
            self.inputAt = performance.now();
            api.emit("hover", null);
            if (p.x < LABEL_W) { self.scrollBy(Math.round(dy / LANE_H) || Math.sign(dy)); return; }
            if (Math.abs(e.deltaX) > Math.abs(dy)) { self.panPx(e.deltaX); return; }
            self.zoomAt(p.x, Math.exp(dy * ZOOM_PER_PX));
        }, {passive: false});
        c.addEventListener("mousedown", function (e) {
            if (e.button !== 0 || !self.meta) return;
            var p = pos(e);
            c.focus();
            if (p.x < LABEL_W) {
                var lane = self.laneAtY(p.y);
                if (lane >= 0) { self.focusLane = lane; self.togglePin(lane); }
                return;
            }
            drag = {x: p.x, y: p.y, x0: p.x, y0: p.y, moved: false, area: e.shiftKey,
                    row: self.scrollRow};
            if (drag.area) self.area = {r1: self.tOf(p.x), r2: self.tOf(p.x), y1: p.y, y2: p.y};
            e.preventDefault();
        });
        this.onMove = function (e) {
            if (!drag) return;
            var p = pos(e);
            if (Math.abs(p.x - drag.x0) + Math.abs(p.y - drag.y0) > 3) drag.moved = true;
            if (drag.area) {
                self.area.r2 = self.tOf(Math.max(LABEL_W, Math.min(self.w, p.x)));
                self.area.y2 = p.y;
                self.invalidate();
            } else if (drag.moved) {
                self.inputAt = performance.now();
                self.panPx(drag.x - p.x);
                self.scrollRow = drag.row - Math.round((p.y - drag.y0) / LANE_H);
                self.viewMoved();
            }
            drag.x = p.x;
            drag.y = p.y;
        };
        this.onUp = function (e) {
            if (!drag) return;
            var d = drag, p = pos(e);
            drag = null;
            if (d.area) {
                if (!d.moved) { self.area = null; self.invalidate(); return; }
                self.emitArea();
                return;
            }
            if (!d.moved) self.select(self.shapeAt(p.x, p.y));
        };
        window.addEventListener("mousemove", this.onMove);
        window.addEventListener("mouseup", this.onUp);
        c.addEventListener("mousemove", function (e) {
            var p = pos(e);
            self.mouseX = p.x >= LABEL_W ? p.x : null;
            if (drag || !self.meta) return;
            var mark = self.markAt(p.x, p.y), info = mark ? null : self.shapeAt(p.x, p.y);
            api.emit("hover", mark ? {mark: mark, x: p.x, y: p.y}
                     : info ? {shape: info, x: p.x, y: p.y} : null);
        });
        c.addEventListener("mouseleave", function () { api.emit("hover", null); });
        c.addEventListener("dblclick", function (e) { e.preventDefault(); self.whole(); });
        c.addEventListener("keydown", function (e) { self.keyDown(e); });
        c.addEventListener("keyup", function (e) { delete self.held[e.key.toLowerCase()]; });
        c.addEventListener("blur", function () { self.held = {}; });
        var origDestroy = this.destroy;
        this.destroy = function () {
            window.removeEventListener("mousemove", self.onMove);
            window.removeEventListener("mouseup", self.onUp);
            origDestroy.call(self);
        };
    };

    /** The keyboard's area: Shift+Enter selects the visible window over the focused
     *  lane, Shift+Down/Up take in the next lane below/above; each is announced. */
    View.prototype.keyArea = function (k) {
        if (this.focusLane < 0) this.focusLane = this.drawnLanes()[0].lane;
        var y = this.rowY[this.focusLane];
        if (y === undefined) return;
        if (k === "Enter") {
            this.area = {r1: this.v1, r2: this.v2, y1: y + 1, y2: y + LANE_H - 1, keys: true};
        } else if (k === "ArrowDown") {
            this.area.y2 = Math.min(this.h - 1, this.area.y2 + LANE_H);
        } else {
            this.area.y1 = Math.max(AXIS_H + 1, this.area.y1 - LANE_H);
        }
        this.invalidate();
        this.emitArea();
    };

    View.prototype.emitArea = function () {
        var self = this, a = this.area;
        var lanes = this.areaLanes().map(function (l) {
            var lane = self.lane(l.lane);
            return lane ? lane.key : null;
        }).filter(function (key) { return key; });
        api.emit("select-area", {t1: absNs(this.first, Math.min(a.r1, a.r2)),
                                 t2: absNs(this.first, Math.max(a.r1, a.r2)), lanes: lanes});
    };

    View.prototype.keysHeld = function () {
        var h = this.held;
        return h.w || h.s || h.a || h.d;
    };

    /** W/S/A/D held: zoom or pan a little every frame, as in Perfetto. */
    View.prototype.stepKeys = function (ts) {
        var dt = this.lastKeyTs ? Math.min(50, ts - this.lastKeyTs) : 16;
        this.lastKeyTs = ts;
        var h = this.held, mid = this.mouseX || (LABEL_W + this.plotW() / 2);
        if (!this.keysHeld()) { this.lastKeyTs = 0; return; }
        if (h.w) this.zoomAt(mid, Math.exp(-dt * 0.004));
        if (h.s) this.zoomAt(mid, Math.exp(dt * 0.004));
        if (h.a) this.panPx(-dt * 0.6);
        if (h.d) this.panPx(dt * 0.6);
    };

    View.prototype.keyDown = function (e) {
        if (e.ctrlKey || e.metaKey || e.altKey) return;
        var k = e.key, lk = k.toLowerCase();
        var handled = true;
        if (e.shiftKey && (k === "Enter" || (this.area && this.area.keys &&
                                             (k === "ArrowDown" || k === "ArrowUp")))) {
            this.keyArea(k);
        } else if ("wsad".indexOf(lk) >= 0 && lk.length === 1) {
            this.inputAt = performance.now();
            this.held[lk] = true;
            this.invalidate();
        } else if (k === "Escape") {
            if (this.area) { this.area = null; this.invalidate(); } else this.whole();
            api.emit("escape", {});
        } else if (k === "ArrowDown" || k === "ArrowUp") {
            var lanes = this.drawnLanes().map(function (l) { return l.lane; });
            var at = lanes.indexOf(this.focusLane), dir = k === "ArrowDown" ? 1 : -1;
            if (at < 0) this.scrollToLane(lanes[0] || 0);
            else if (at + dir >= 0 && at + dir < lanes.length) this.scrollToLane(lanes[at + dir]);
            else if (dir > 0 && this.focusLane + 1 < this.total) { this.scrollBy(1); this.scrollToLane(this.laneOfRow(this.scrollRow + this.visibleRows() - 1)); }
            else if (dir < 0) { this.scrollBy(-1); this.scrollToLane(this.laneOfRow(this.scrollRow)); }
            this.selected = null;
        } else if (k === "ArrowRight" || k === "ArrowLeft") {
            if (this.focusLane < 0) this.scrollToLane(this.drawnLanes()[0].lane);
            this.stepSpan(k === "ArrowRight" ? 1 : -1);
        } else if (k === "PageDown" || k === "PageUp") {
            this.scrollBy((k === "PageDown" ? 1 : -1) * this.visibleRows());
        } else if (k === "Home") {
            this.scrollBy(-this.total);
        } else if (k === "End") {
            this.scrollBy(this.total);
        } else if (k === "Enter" && this.selected && this.selected.n > 1) {
            this.setWindow(this.selected.r1, this.selected.r2);
        } else if (lk === "p" && this.focusLane >= 0) {
            this.togglePin(this.focusLane);
        } else if (k === "+" || k === "=") {
            this.zoomAt(LABEL_W + this.plotW() / 2, 0.5);
        } else if (k === "-") {
            this.zoomAt(LABEL_W + this.plotW() / 2, 2);
        } else {
            handled = false;
        }
        if (handled) e.preventDefault();
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
    new MutationObserver(check).observe(document.documentElement, {childList: true, subtree: true});
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", check);
    else check();
})();
