/* gmpscope library: trace uploads in chunks to the ingest API (docs/upload.md).
 *
 * Dash renders the page (app/pages/library.py); this script only listens on
 * `document` (the layout appears after load and is replaced on navigation):
 * files dropped on #library-dropzone or picked in #library-file-input (which it
 * adds to #library-picker) are sliced with File.slice and PUT in order, with
 * retries that resume from where the server says the upload stands; the ingest
 * job is then followed until it is done, and the trace table is refreshed by
 * bumping the `library-refresh` store. Ingest jobs this tab did not start (an
 * upload from another tab or client, or this tab before a reload) that are queued or
 * running when the library is shown are found with GET /api/jobs and followed the
 * same way. Delete buttons call the JSON API with the token typed in #library-token.
 * Every server or trace string is set with textContent, never as HTML.
 */
(function () {
  "use strict";

  var DEFAULT_CHUNK = 8 * 1024 * 1024;
  var RETRIES = 6;           // consecutive failures of one step before giving up
  var POLL_MS = 500;         // job status polling

  // ---------------------------------------------------------------- helpers

  function $(id) { return document.getElementById(id); }

  function sleep(ms) { return new Promise(function (r) { setTimeout(r, ms); }); }

  function fmtBytes(n) {
    var units = [["GB", 1e9], ["MB", 1e6], ["kB", 1e3]];
    for (var i = 0; i < units.length; i++) {
      if (n >= units[i][1]) return (n / units[i][1]).toPrecision(3) + " " + units[i][0];
    }
    return n + " B";
  }

  function fmtCount(n) { return Number(n).toLocaleString("en-US"); }

  function authHeaders() {
    var el = $("library-token");
    var tok = el && el.value ? el.value.trim() : "";
    return tok ? { "Authorization": "Bearer " + tok } : {};
  }

  /** An API failure: `retry` when trying again (after asking where the upload stands) may help. */
  function ApiError(message, status, retry) {
    this.message = message; this.status = status; this.retry = retry;
  }

  function explain(status, msg) {
    if (status === 401) return "the server needs a token: type it in the Token field and try again (" + msg + ")";
    if (status === 403) return "the server needs the write token for this: type it in the Token field and try again (" + msg + ")";
    if (status === 413) return "too large: " + msg;
    return msg;
  }

  /** fetch + JSON; throws ApiError with the server's own message. */
  function call(method, url, body) {
    return fetch(url, { method: method, headers: authHeaders(), body: body, cache: "no-store" })
      .then(function (resp) {
        return resp.text().then(function (text) {
          var data = null;
          try { data = text ? JSON.parse(text) : {}; } catch (e) { data = null; }
          if (resp.ok && data) return data;
          var msg = (data && data.error) || ("HTTP " + resp.status + " " + resp.statusText);
          var retry = resp.status === 409 || (resp.status >= 500 && resp.status !== 507);
          throw new ApiError(explain(resp.status, msg), resp.status, retry);
        });
      }, function (err) {
        throw new ApiError("network error: " + (err && err.message ? err.message : err), 0, true);
      });
  }

  function refreshTable() {
    var dc = window.dash_clientside;
    if (dc && dc.set_props && $("library-table")) {  // the store itself has no DOM element
      dc.set_props("library-refresh", { data: Date.now() });
    }
  }

  // ------------------------------------------------------------ progress UI

  // Every row of this tab, newest first: put back when the library is shown again.
  var rows = [];
  var active = 0;  // uploads and ingests in progress

  function Row(name, size) {
    var list = $("library-progress");
    this.el = document.createElement("div");
    this.el.className = "upload-row";
    var head = document.createElement("div");
    head.className = "upload-head";
    var title = document.createElement("span");
    title.className = "upload-name";
    title.textContent = name + " (" + fmtBytes(size) + ")";
    this.status = document.createElement("span");
    this.status.className = "upload-status";
    head.appendChild(title);
    head.appendChild(this.status);
    this.bar = document.createElement("progress");
    this.bar.className = "upload-bar";
    this.bar.max = 1;
    this.bar.value = 0;
    this.el.appendChild(head);
    this.el.appendChild(this.bar);
    if (list) list.insertBefore(this.el, list.firstChild);
    rows.unshift(this.el);
    this.state("waiting", "waiting");
  }
  Row.prototype.state = function (state, text) {
    this.el.setAttribute("data-state", state);
    this.status.textContent = text;
  };
  Row.prototype.progress = function (state, done, total, text) {
    if (total > 0) { this.bar.max = total; this.bar.value = Math.min(done, total); }
    else { this.bar.removeAttribute("value"); }  // indeterminate
    this.state(state, text);
  };
  Row.prototype.fail = function (message) {
    this.bar.max = 1; this.bar.value = 0;
    this.state("failed", "");
    var err = document.createElement("div");
    err.className = "error-box upload-error";
    err.setAttribute("role", "alert");
    err.textContent = message;
    this.el.appendChild(err);
  };
  Row.prototype.done = function (job) {
    this.bar.max = 1; this.bar.value = 1;
    var r = job.result || {};
    var text = job.existing ? "already stored as trace " + job.trace_id
      : "stored as trace " + job.trace_id + " (Go " + (r.go_version || "?") + ", " +
        fmtCount(r.events || 0) + " events, " + fmtCount(r.goroutines || 0) + " goroutines)";
    this.state("done", text + " ");
    var link = document.createElement("a");
    link.className = "upload-open";
    link.href = "/traces/" + encodeURIComponent(job.trace_id) + "/overview";
    link.textContent = "Open";
    this.status.appendChild(link);
  };

  // ---------------------------------------------------------------- uploads

  /** Run `step` until it succeeds, retrying retryable failures; `resync` runs before a retry. */
  async function persist(row, step, resync) {
    var failures = 0;
    for (;;) {
      try {
        return await step();
      } catch (err) {
        if (!(err instanceof ApiError) || !err.retry || ++failures > RETRIES) throw err;
        row.state(row.el.getAttribute("data-state"), err.message + "; retrying (" + failures + "/" + RETRIES + ")");
        await sleep(Math.min(500 * Math.pow(2, failures - 1), 8000));
        if (resync) {
          try { await resync(); } catch (e2) { /* counted by the next attempt */ }
        }
      }
    }
  }

  async function send(file, row) {
    var zone = $("library-dropzone");
    var chunk = (zone && parseInt(zone.getAttribute("data-chunk"), 10)) || DEFAULT_CHUNK;
    var limit = zone && parseInt(zone.getAttribute("data-limit"), 10);
    if (file.size === 0) throw new ApiError(file.name + " is empty", 400, false);
    if (limit && file.size > limit) {
      throw new ApiError("too large: " + fmtBytes(file.size) + " is over the server's limit of " + fmtBytes(limit), 413, false);
    }
    var created = await call("POST", "/api/uploads?name=" + encodeURIComponent(file.name) + "&size=" + file.size);
    var id = encodeURIComponent(created.upload_id);
    var offset = 0;
    row.progress("uploading", 0, file.size, "sending");
    try {
      while (offset < file.size) {
        var st = await persist(row, function () {
          var end = Math.min(offset + chunk, file.size);
          return call("PUT", "/api/uploads/" + id + "?offset=" + offset, file.slice(offset, end));
        }, async function () {
          offset = (await call("GET", "/api/uploads/" + id)).received;
        });
        offset = st.received;
        row.progress("uploading", offset, file.size, fmtBytes(offset) + " of " + fmtBytes(file.size) + " sent");
      }
      completing++;  // until its job is known as this tab's (listJobs must not adopt it)
      try {
        var done = await persist(row, function () {
          return call("POST", "/api/uploads/" + id + "/complete");
        }, null);
        seen[done.job_id] = true;
        return done.job_id;
      } finally {
        completing--;
      }
    } catch (err) {
      // Free the server's spool; ignore a failure (it is swept later anyway).
      call("DELETE", "/api/uploads/" + id).catch(function () {});
      throw err;
    }
  }

  var STAGES = { queued: "queued behind other ingests", hash: "checking", decode: "decoding", load: "storing" };
  var COUNTED = { hash: " bytes", load: " rows" };  // stages that report done/total

  async function follow(jobId, row) {
    for (;;) {
      var job = await persist(row, function () {
        return call("GET", "/api/jobs/" + encodeURIComponent(jobId));
      }, null);
      if (job.state === "done") { row.done(job); refreshTable(); return; }
      if (job.state === "failed") { throw new ApiError(job.error || "the ingest failed", 400, false); }
      var label = STAGES[job.stage] || job.stage;
      if (COUNTED[job.stage] && job.total > 0) {
        label += COUNTED[job.stage] + ": " + Math.floor(100 * job.done / job.total) + "%";
        row.progress("ingesting", job.done, job.total, label);
      } else {
        row.progress("ingesting", 0, 0, label);
      }
      await sleep(POLL_MS);
    }
  }

  // ------------------------------------------- ingests this tab did not start

  var seen = {};       // job id -> true: this tab's own, or already shown
  var completing = 0;  // this tab's uploads waiting for their job id

  /** Each time the library is shown: every job GET /api/jobs lists as queued or
   * running that this tab is not following gets a row followed as this tab's own
   * (phase, percent, outcome). Asked once per showing, not polled: a server that
   * goes away leaves the page quiet. */
  async function listJobs() {
    if (completing > 0) return;  // its own job is about to be known: the next showing
    var jobs;
    try {
      jobs = (await call("GET", "/api/jobs")).jobs || [];
    } catch (e) {
      return;  // a token-protected or unreachable server: shown again, asked again
    }
    jobs.slice().reverse().forEach(function (job) {  // oldest first: the newest row on top
      if (seen[job.job_id] || (job.state !== "queued" && job.state !== "running")) return;
      seen[job.job_id] = true;
      var row = new Row(job.name, job.size);
      row.el.classList.add("upload-elsewhere");
      row.el.setAttribute("data-job-id", job.job_id);
      row.progress("ingesting", 0, 0, "loading on the server");
      follow(job.job_id, row).catch(function (err) {
        row.fail(err && err.message ? err.message : String(err));
      });
    });
  }

  // Uploads go one at a time (they share the connection); ingests follow in parallel.
  var queue = Promise.resolve();

  function start(files) {
    Array.prototype.forEach.call(files, function (file) {
      var row = new Row(file.name, file.size);
      active++;
      queue = queue.then(async function () {
        var jobId;
        try {
          jobId = await send(file, row);
        } catch (err) {
          active--;
          row.fail("upload failed: " + (err && err.message ? err.message : err));
          return;
        }
        row.el.setAttribute("data-job-id", jobId);
        row.progress("ingesting", 0, 0, "queued");
        follow(jobId, row).catch(function (err) {
          row.fail(err && err.message ? err.message : String(err));  // names the file already
        }).finally(function () { active--; });
      });
    });
  }

  // ----------------------------------------------------------------- delete

  async function remove(button) {
    var id = button.getAttribute("data-trace-id");
    var name = button.getAttribute("data-trace-name") || "";
    var status = $("library-status");
    if (!window.confirm("Delete trace " + id + " (" + name + ") and everything derived from it?")) return;
    button.disabled = true;
    try {
      await call("DELETE", "/api/traces/" + encodeURIComponent(id));
      if (status) { status.className = "muted"; status.textContent = "Deleted trace " + id + " (" + name + ")."; }
      refreshTable();
    } catch (err) {
      button.disabled = false;
      if (status) { status.className = "error-box"; status.textContent = "Could not delete trace " + id + ": " + err.message; }
    }
  }

  // ----------------------------------------------------------------- wiring

  function reattach() {
    var list = $("library-progress");
    if (!list) return;
    for (var i = 0; i < rows.length; i++) {
      if (rows[i].parentNode !== list) list.appendChild(rows[i]);
    }
  }

  function ensurePicker() {
    reattach();
    var list = $("library-progress");
    if (list && !list.hasAttribute("data-jobs-listed")) {  // a new showing of the library
      list.setAttribute("data-jobs-listed", "");
      listJobs();
    }
    var holder = $("library-picker");
    if (!holder || $("library-file-input")) return;
    var label = document.createElement("label");
    label.className = "button secondary";
    label.textContent = "choose files";
    var input = document.createElement("input");
    input.type = "file";
    input.id = "library-file-input";
    input.multiple = true;
    input.className = "visually-hidden";
    label.appendChild(input);
    holder.appendChild(label);
  }

  window.addEventListener("beforeunload", function (e) {
    if (active > 0) { e.preventDefault(); e.returnValue = ""; }
  });

  new MutationObserver(ensurePicker).observe(document.documentElement, { childList: true, subtree: true });

  document.addEventListener("change", function (e) {
    if (e.target && e.target.id === "library-file-input" && e.target.files.length) {
      start(e.target.files);
      e.target.value = "";  // picking the same file again fires change again
    }
  });

  function inZone(e) { return e.target && e.target.closest && e.target.closest("#library-dropzone"); }

  document.addEventListener("dragover", function (e) {
    if (!$("library-dropzone")) return;
    e.preventDefault();  // on the library, a file dropped beside the zone must not open in the tab
    var zone = inZone(e);
    if (zone) { zone.classList.add("over"); e.dataTransfer.dropEffect = "copy"; }
    else if (e.dataTransfer) { e.dataTransfer.dropEffect = "none"; }
  });
  document.addEventListener("dragleave", function (e) {
    var zone = inZone(e);
    if (zone && !zone.contains(e.relatedTarget)) zone.classList.remove("over");
  });
  document.addEventListener("drop", function (e) {
    if (!$("library-dropzone")) return;
    e.preventDefault();
    var zone = inZone(e);
    if (!zone) return;
    zone.classList.remove("over");
    if (e.dataTransfer && e.dataTransfer.files.length) start(e.dataTransfer.files);
  });
  document.addEventListener("keydown", function (e) {
    if ((e.key === "Enter" || e.key === " ") && e.target && e.target.id === "library-dropzone") {
      e.preventDefault();
      var input = $("library-file-input");
      if (input) input.click();
    }
  });
  document.addEventListener("click", function (e) {
    var button = e.target && e.target.closest && e.target.closest(".library-delete");
    if (button) { e.preventDefault(); remove(button); return; }
    // "Open" of a finished upload: navigate inside the app as dcc.Link does, so that
    // uploads still running in this tab go on (a plain click would reload the page).
    var link = e.target && e.target.closest && e.target.closest("a.upload-open");
    if (link && e.button === 0 && !e.ctrlKey && !e.metaKey && !e.shiftKey && !e.altKey) {
      e.preventDefault();
      window.history.pushState({}, "", link.getAttribute("href"));
      window.dispatchEvent(new CustomEvent("_dashprivate_pushstate"));
      window.scrollTo(0, 0);
    }
  });
})();
