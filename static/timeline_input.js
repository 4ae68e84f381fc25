/*
 * The timeline canvas's input: hit testing (the shape or OS mark under the
 * pointer), selection and stepping through spans, the mouse (wheel, drag,
 * Shift+drag, clicks) and the keys. Part of the view of timeline_canvas.js,
 * which loads first (docs/timeline.md).
 */
(function () {
    "use strict";

    var tl = window.gmpscopeTimeline, I = tl && tl._internal;
    if (!I) return;
    var View = I.View, LANE_H = I.LANE_H, AXIS_H = I.AXIS_H, LABEL_W = I.LABEL_W;
    var ZOOM_PER_PX = I.ZOOM_PER_PX, absNs = I.absNs, relNs = I.relNs, api = tl;

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

    /** Select interval ``ref`` as a click on it would (then select-span): its lane
     *  (by G its goroutine's, by P or M the one it began on) revealed first.
     *  Resolves to false when this mode has no lane for it. */
    View.prototype.selectRef = function (ref) {
        var self = this;
        return fetch("/api/traces/" + this.traceId + "/span?ref=" + ref).then(function (r) {
            return r.json().then(function (j) { if (!r.ok) throw new Error(j.error); return j; });
        }).then(function (span) {
            var id = {g: span.goroutine, p: span.p, m: span.m}[self.mode];
            if (id == null || id < 0 || !self.alive) return false;
            var key = self.mode + id;
            return self.revealLane(key).then(function (lane) {
                if (lane < 0 || !self.alive) return false;
                var l = self.lane(lane);
                self.select({lane: lane, laneKey: key, laneLabel: l ? l.label : key, cut: false,
                             r1: relNs(self.first, span.start_ts),
                             r2: relNs(self.first, span.end_ts),
                             d: Number(span.end_ts) - Number(span.start_ts), cat: -1,
                             state: span.state, n: 1, ref: Number(ref),
                             g: span.goroutine != null ? span.goroutine : -1, kind: -1, cover: 1,
                             mix: null, level: -1});
                return true;
            });
        });
    };

    /** The next (dir 1) or previous (-1) shape on the focused lane, from the drawn tiles. */
    View.prototype.stepSpan = function (dir) {
        var lane = this.focusLane;
        if (lane < 0) return;
        var from = this.selected && this.selected.lane === lane ? this.selected : null;
        var t0 = from ? from.r1 : (dir > 0 ? this.v1 - 1 : this.v2 + 1);
        // A tile holds its part of an interval: the parts of the selected one are not "next".
        var skip = from && from.n === 1 ? from.ref : null;
        var best = null, bestT = dir > 0 ? Infinity : -Infinity;
        var tiles = (this.drawnTiles || []).filter(function (t) { return t.laneAt[lane]; });
        tiles.sort(function (a, b) { return b.level - a.level; });
        if (!tiles.length) return;
        var L = tiles[0].level, self = this;
        tiles.filter(function (t) { return t.level === L; }).forEach(function (t) {
            var r = t.laneAt[lane], c = t.cols;
            for (var i = r[0]; i < r[1]; i++) {
                var s = t.r1 + c.s[i];
                if (skip !== null && c.n[i] === 1 && c.ref[i] === skip) continue;
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
})();
