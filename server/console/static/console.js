// cubequeue console: polls /api/v1/live once a second and redraws without reloading.
// Every value from the store is written with textContent (never innerHTML), so a path
// such as q:<img src=x onerror=alert(1)> shows as text.
"use strict";

(function () {
  const POLL_MS = 1000;
  const MAX_POINTS = 900;
  // One hue per prefix; pending in its dark shade (solid), active in its light shade
  // (dashed), so the two read apart even where the lines cross.
  const HUES = [225, 20, 135, 285, 190, 40, 335, 90, 255, 0, 165, 310, 205, 60, 350, 115,
                30, 270, 180, 10];
  const pendingColor = (i) => "hsl(" + HUES[i % HUES.length] + ", 70%, 38%)";
  const activeColor = (i) => "hsl(" + HUES[i % HUES.length] + ", 85%, 62%)";
  // Items are whole: the y axis steps by whole numbers only.
  const INTEGER_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4,
                         1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7];

  const state = {
    filter: "",
    prefix: null,   // the drilled-down prefix, from location.hash
    since: 0,       // the last depth sample seen
    keys: [],       // the prefixes the chart draws
    xs: [],         // sample times, seconds
    cols: [],       // per series: pending then active of each key
    chart: null,
    chartFor: "",   // the filter and opened prefix the chart was drawn for
    timer: null,
    lastOk: null,   // when the server last answered
    previewId: null, // the item whose preview is open
    busy: false,    // a poll is in flight
    again: false,   // poll once more as soon as it ends (the filter or hash changed)
  };

  const $ = (id) => document.getElementById(id);

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  function fmtInt(n) {
    return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US");
  }

  function fmtAge(ms) {
    if (ms === null || ms === undefined) return "–";
    if (ms < 1000) return ms + " ms";
    const s = ms / 1000;
    if (s < 60) return s.toFixed(1) + " s";
    const m = Math.floor(s / 60);
    if (m < 60) return m + " m " + Math.floor(s % 60) + " s";
    const h = Math.floor(m / 60);
    if (h < 48) return h + " h " + (m % 60) + " m";
    return Math.floor(h / 24) + " d " + (h % 24) + " h";
  }

  function fmtBytes(n) {
    if (n === null || n === undefined) return "–";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let v = n, i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i === 0 ? v : v.toFixed(1)) + " " + units[i];
  }

  function fmtUptime(s) { return fmtAge(Math.round(s * 1000)); }

  function replaceRows(tbody, rows) {
    tbody.replaceChildren(...rows);
  }

  // -- overview --------------------------------------------------------------------------

  function card(label, value) {
    const c = el("div", null, "card");
    c.append(el("div", label, "label"), el("div", value, "value"));
    c.dataset.label = label;
    return c;
  }

  function renderOverview(o) {
    const conns = Object.entries(o.connections || {})
      .map(([wire, n]) => wire + " " + n).join(" · ") || "0";
    const cps = o.commands_per_second;
    // Over the PostgreSQL store every front end counts only its own clients and commands.
    const shared = o.store.kind === "postgresql";
    const own = shared ? " (this front end)" : "";
    $("frontend-note").hidden = !shared;
    $("overview").replaceChildren(
      card("store", o.store.kind),
      card("persistence", o.store.persistence === "memory" ? "none (in memory)" : o.store.persistence),
      card("uptime", fmtUptime(o.uptime_s)),
      card("items", fmtInt(o.queue.items)),
      card("prefixes", fmtInt(o.queue.prefixes)),
      card("results", fmtInt(o.queue.results)),
      card("waiters", fmtInt(o.queue.waiters)),
      card("cache keys", fmtInt(o.cache.keys)),
      card("cache bytes", fmtBytes(o.cache.bytes)),
      card("connections" + own, conns),
      card("commands / s" + own, cps === null || cps === undefined ? "–" : cps.toFixed(1)),
      card("resident memory", fmtBytes(o.resident_bytes)),
    );
  }

  // -- recovery (a durable store replaying its log: nothing else can be read) --------------

  function renderRecovery(r) {
    const recovering = Boolean(r && r.recovering);
    $("recovery").hidden = !recovering;
    document.body.dataset.recovering = recovering ? "1" : "0";
    if (!recovering) return;
    $("recovery-bar").value = r.percent;
    const left = r.eta_s === null || r.eta_s === undefined ? "unknown" : r.eta_s.toFixed(1) + " s";
    $("recovery-text").textContent = r.phase + ": " + fmtInt(r.records) + " records replayed, " +
      fmtBytes(r.bytes_done) + " of " + fmtBytes(r.bytes_total) + " (" + r.percent.toFixed(0) +
      "%), " + left + " left";
  }

  // -- prefixes --------------------------------------------------------------------------

  function openPrefix(prefix) {
    location.hash = "prefix=" + encodeURIComponent(prefix);
  }

  function renderPrefixes(p) {
    $("prefix-count").textContent = p.shown < p.matched
      ? "the " + p.shown + " deepest of " + p.matched : p.matched + " shown";
    const rows = p.prefixes.map((r) => {
      const tr = el("tr");
      tr.dataset.prefix = r.prefix;
      if (r.stalled) tr.classList.add("stalled");
      else if (r.orphan_prone) tr.classList.add("orphan-prone");
      const name = el("td", null, "mono");
      const link = el("button", r.prefix === "" ? "(empty prefix)" : r.prefix, "link");
      link.type = "button";
      link.addEventListener("click", () => openPrefix(r.prefix));
      name.append(link);
      const flags = el("td");
      if (r.stalled) flags.append(el("span", "stalled", "badge stalled"));
      if (r.orphan_prone) flags.append(el("span", "orphan-prone", "badge orphan-prone"));
      if (!r.stalled && !r.orphan_prone) flags.append(el("span", "ok", "badge ok"));
      flags.title = "timeouts: heartbeat " + fmtAge(r.heartbeat_timeout_ms) + ", orphaned " +
        fmtAge(r.orphaned_timeout_ms) + (r.timeouts_from === "client" ? " (from the client's TO_CANCEL)" : " (Cube's defaults)");
      tr.append(name,
        el("td", fmtInt(r.pending), "num"), el("td", fmtInt(r.active), "num"),
        el("td", fmtAge(r.oldest_pending_ms), "num"), el("td", fmtAge(r.max_heartbeat_age_ms), "num"),
        el("td", fmtInt(r.last_concurrency), "num"), el("td", fmtInt(r.results), "num"), flags);
      return tr;
    });
    if (rows.length === 0) {
      const tr = el("tr");
      const td = el("td", state.filter ? "no prefix matches the filter" : "the queue is empty", "hint");
      td.colSpan = 8;
      tr.append(td);
      rows.push(tr);
    }
    replaceRows($("prefix-rows"), rows);
  }

  // -- depth chart -----------------------------------------------------------------------

  function sameKeys(a, b) {
    return a.length === b.length && a.every((k, i) => k === b[i]);
  }

  function buildChart() {
    const host = $("depth-chart");
    if (state.chart) { state.chart.destroy(); state.chart = null; }
    if (typeof uPlot === "undefined") return;
    const series = [{}];
    const noPoints = { show: false };
    state.keys.forEach((key, i) => {
      const label = key === "" ? "(empty)" : key;
      series.push({ label: label + " pending", stroke: pendingColor(i), width: 2,
                    spanGaps: false, points: noPoints });
      series.push({ label: label + " active", stroke: activeColor(i), width: 2,
                    dash: [6, 4], points: noPoints });
    });
    const opts = {
      width: Math.max(320, host.clientWidth || 900),
      height: 260,
      series: series,
      axes: [{}, { label: "items", incrs: INTEGER_STEPS,
                   values: (u, splits) => splits.map((v) => fmtInt(v)) }],
      scales: { y: { range: (u, min, max) => [0, Math.max(1, max)] } },
      legend: { live: false },
    };
    state.chart = new uPlot(opts, [state.xs, ...state.cols], host);
  }

  function renderDepth(d) {
    const full = state.since === 0;
    if (!full && !sameKeys(d.prefixes, state.keys)) {
      state.since = 0; // the busiest set changed: fetch the whole window next time
      return;
    }
    if (full) {
      state.keys = d.prefixes.slice();
      state.xs = [];
      state.cols = [];
      state.keys.forEach(() => { state.cols.push([], []); });
    }
    d.at_ms.forEach((t, i) => {
      state.xs.push(t / 1000);
      state.keys.forEach((key, k) => {
        state.cols[2 * k].push(d.pending[key][i]);
        state.cols[2 * k + 1].push(d.active[key][i]);
      });
    });
    const excess = state.xs.length - MAX_POINTS;
    if (excess > 0) {
      state.xs.splice(0, excess);
      state.cols.forEach((c) => c.splice(0, excess));
    }
    state.since = d.last_seq;
    const host = $("depth-chart");
    host.dataset.points = String(state.xs.length);
    host.dataset.series = String(state.keys.length);
    $("depth-empty").hidden = state.xs.length > 0;
    if (full || !state.chart) buildChart();
    else state.chart.setData([state.xs, ...state.cols]);
  }

  // -- one prefix ------------------------------------------------------------------------

  // A payload or extra that is JSON is shown indented; anything else (or a cut one) as sent.
  function pretty(text, cut) {
    if (text === null) return "NULL";
    if (cut) return text;
    try { return JSON.stringify(JSON.parse(text), null, 2); } catch (e) { return text; }
  }

  // The preview opens as a row right under the item it shows, and scrolls into view.
  function placePreview(id) {
    const row = document.querySelector("#item-rows tr[data-id='" + CSS.escape(String(id)) + "']");
    const holder = $("preview-row");
    if (row) row.after(holder);
    else $("item-rows").append(holder);
    holder.dataset.for = String(id);
    holder.hidden = false;
    $("preview").hidden = false;
    holder.scrollIntoView({ block: "nearest" });
  }

  async function showPreview(id) {
    state.previewId = id;
    const reply = await fetch("/api/v1/item?id=" + encodeURIComponent(id), { credentials: "same-origin" });
    const body = await reply.json();
    placePreview(id);
    if (!reply.ok) {
      $("preview-id").textContent = String(id);
      $("preview-payload").textContent = body.error || "unavailable";
      $("preview-extra").textContent = "";
      $("preview-payload-note").textContent = "";
      $("preview-extra-note").textContent = "";
      return;
    }
    $("preview-id").textContent = body.id + " · " + body.key;
    $("preview-payload").textContent = pretty(body.payload, body.payload_truncated);
    $("preview-extra").textContent = pretty(body.extra, body.extra_truncated);
    $("preview-payload-note").textContent = body.payload_truncated ? "(first " + body.limit + " characters)" : "";
    $("preview-extra-note").textContent = body.extra_truncated ? "(first " + body.limit + " characters)" : "";
  }

  function renderDrill(items, departures) {
    $("item-count").textContent = (items.shown < items.total
      ? "the first " + items.shown + " of " + items.total : items.total + " in the queue") +
      ", in the order they will be claimed: active, then pending by priority and age";
    const rows = items.items.map((it) => {
      const tr = el("tr");
      tr.dataset.id = String(it.id);
      const show = el("button", "preview", "link");
      show.type = "button";
      show.addEventListener("click", () => { showPreview(it.id); });
      const cell = el("td");
      cell.append(show);
      tr.append(el("td", it.id, "num"), el("td", it.key, "mono wrap"), el("td", it.status),
        el("td", fmtInt(it.priority), "num"), el("td", fmtAge(it.age_ms), "num"),
        el("td", fmtAge(it.heartbeat_age_ms), "num"), el("td", it.process_id === null ? "–" : it.process_id, "mono"),
        el("td", it.external_id === null ? "–" : it.external_id, "mono"),
        el("td", fmtBytes(it.payload_bytes), "num"), cell);
      return tr;
    });
    const holder = $("preview-row");
    replaceRows($("item-rows"), rows);
    if (state.previewId !== null && !holder.hidden) {
      // keep the open preview under its item across redraws (or at the end if it left)
      const row = $("item-rows").querySelector("tr[data-id='" + CSS.escape(String(state.previewId)) + "']");
      if (row) row.after(holder); else $("item-rows").append(holder);
    }
    const gone = departures.departures.map((d) => {
      const tr = el("tr");
      tr.append(el("td", d.id, "num"), el("td", d.path, "mono wrap"), el("td", d.reason),
        el("td", fmtAge(d.ago_ms), "num"), el("td", fmtAge(d.queued_ms), "num"),
        el("td", fmtAge(d.active_ms), "num"));
      return tr;
    });
    if (gone.length === 0) {
      const tr = el("tr");
      const td = el("td", "no item of this prefix has left the queue yet", "hint");
      td.colSpan = 6;
      tr.append(td);
      gone.push(tr);
    }
    replaceRows($("departure-rows"), gone);
  }

  // -- the loop --------------------------------------------------------------------------

  function readHash() {
    const m = /^#prefix=(.*)$/.exec(location.hash);
    state.prefix = m ? decodeURIComponent(m[1]) : null;
    $("drill").hidden = state.prefix === null;
    $("prefixes-panel").hidden = state.prefix !== null;
    $("preview").hidden = true;
    $("preview-row").hidden = true;
    state.previewId = null;
    $("drill-prefix").textContent = state.prefix === null ? "" : state.prefix;
  }

  async function poll() {
    if (state.busy) { state.again = true; return; }
    state.busy = true;
    const chartFor = state.filter + "\u0000" + (state.prefix === null ? "" : state.prefix);
    if (chartFor !== state.chartFor) { state.chartFor = chartFor; state.since = 0; }
    const params = new URLSearchParams({ filter: state.filter, since: String(state.since) });
    if (state.prefix !== null) params.set("prefix", state.prefix);
    try {
      const reply = await fetch("/api/v1/live?" + params.toString(), { credentials: "same-origin" });
      if (!reply.ok) throw new Error("HTTP " + reply.status);
      const body = await reply.json();
      renderOverview(body.overview);
      renderRecovery(body.overview.recovery);
      if (body.prefixes) renderPrefixes(body.prefixes);
      if (body.depth) renderDepth(body.depth);
      if (body.items && state.prefix !== null) renderDrill(body.items, body.departures);
      const status = $("status");
      state.lastOk = new Date();
      status.textContent = "live · updated " + state.lastOk.toLocaleTimeString();
      status.classList.remove("error");
      document.body.classList.remove("stale");
      $("stale").hidden = true;
      document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
    } catch (err) {
      const status = $("status");
      status.textContent = "cannot reach the server (" + err.message + "); retrying";
      status.classList.add("error");
      // Every figure on the page is now old: dim it and say since when.
      document.body.classList.add("stale");
      $("stale").hidden = false;
      $("stale-since").textContent = state.lastOk === null ? "never updated"
        : "last updated " + state.lastOk.toLocaleTimeString();
    }
    state.busy = false;
    if (state.again) { state.again = false; poll(); return; }
    state.timer = setTimeout(poll, POLL_MS);
  }

  function pollNow() {
    if (state.timer !== null) clearTimeout(state.timer);
    state.timer = null;
    poll();
  }

  window.addEventListener("hashchange", () => { readHash(); pollNow(); });
  window.addEventListener("resize", () => {
    if (state.chart) state.chart.setSize({ width: Math.max(320, $("depth-chart").clientWidth), height: 260 });
  });
  $("filter").addEventListener("input", (ev) => { state.filter = ev.target.value; pollNow(); });
  readHash();
  poll();
})();
