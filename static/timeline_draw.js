/*
 * The timeline canvas's drawing (a frame: lanes, tiles, marks, axis, labels, the
 * area, highlights, arrows and other scripts' layers). Part of the view of
 * timeline_canvas.js, which loads first (docs/timeline.md).
 */
(function () {
    "use strict";

    var tl = window.gmpscopeTimeline, I = tl && tl._internal;
    if (!I) return;
    var View = I.View, LANE_H = I.LANE_H, BAR_H = I.BAR_H, AXIS_H = I.AXIS_H;
    var LABEL_W = I.LABEL_W, BLOCK = I.BLOCK, fmtTick = I.fmtTick, niceStep = I.niceStep;
    var absNs = I.absNs, relNs = I.relNs, api = tl;

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
        var b, i;
        for (b in blocks) {
            var blk = Number(b), seen = new Set();
            // Coarsest level first: a view always has its whole-trace tile to fall back on.
            this.request(0, 0, blk);
            for (i = range[0]; i <= range[1]; i++) {
                this.request(L, i, blk);
                var t = this.bestTile(L, i, blk);
                if (!t || t.level !== L) complete = false;
                if (t && !seen.has(t)) { seen.add(t); drawnTiles.push(t); }
            }
        }
        if (complete && this.inflight.size === 0) {
            // Idle: the tiles on either side, for a pan.
            for (b in blocks) {
                if (range[0] > 0) this.request(L, range[0] - 1, Number(b));
                if (range[1] + 1 < Math.pow(2, L)) this.request(L, range[1] + 1, Number(b));
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
        I.layers().forEach(function (fn) {
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
})();
