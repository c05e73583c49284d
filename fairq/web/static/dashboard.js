// fairq dashboard: live figures without a chart library. The server sends lifetime success
// counters; this script keeps the points and turns their differences into jobs per second.
"use strict";

(function () {
  const WINDOW_SECONDS = 120;
  const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2",
    "#db2777", "#65a30d", "#475569", "#ea580c", "#4f46e5", "#059669", "#b91c1c",
    "#0d9488", "#a16207", "#9333ea"];
  const OTHERS = "others";

  function getJSON(url) {
    return fetch(url, { credentials: "same-origin", cache: "no-store" }).then((r) => {
      if (!r.ok) throw new Error(r.status + " " + url);
      return r.json();
    });
  }

  // Poll every `ms`, or less often when the server is slow to answer (a queue of very many
  // tenants): never more than half of the time spent waiting on the dashboard.
  function every(ms, fn) {
    const tick = () => {
      const started = performance.now();
      fn().catch(() => {}).finally(() => {
        const took = performance.now() - started;
        setTimeout(tick, Math.max(ms - took, took));
      });
    };
    tick();
  }

  function fmtRate(x) {
    return x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2);
  }

  // -- the overview: throughput per queue ---------------------------------------------------
  function overview(table) {
    let last = null;
    every(2000, () => getJSON(table.dataset.poll).then((sample) => {
      for (const row of table.querySelectorAll("tbody tr")) {
        const q = sample.queues[row.dataset.queue];
        if (!q) continue;
        set(row, "ready", q.ready.toLocaleString("en"));
        set(row, "running", q.running.toLocaleString("en"));
        set(row, "succeeded", q.succeeded.toLocaleString("en"));
        if (last && last.queues[row.dataset.queue] && sample.at > last.at) {
          const done = q.succeeded - last.queues[row.dataset.queue].succeeded;
          set(row, "throughput", fmtRate(Math.max(0, done) / (sample.at - last.at)) + "/s");
        }
      }
      last = sample;
    }));
  }

  function set(row, field, text) {
    const cell = row.querySelector('[data-field="' + field + '"]');
    if (cell) cell.textContent = text;
  }

  // -- the queue page: a live line chart of per-tenant throughput ----------------------------
  function chart(canvas) {
    const legend = document.getElementById("legend");
    const series = new Map(); // name -> {color, points: [[t, rate]]}
    let colors = 0;
    let last = null;
    // Sorting, searching or paging the table reloads the page: the points survive in this
    // tab's sessionStorage, so the chart goes on where it was.
    const saved = "fairq-chart:" + canvas.dataset.src;
    restore();

    function restore() {
      try {
        const kept = JSON.parse(sessionStorage.getItem(saved) || "null");
        if (!kept || Date.now() / 1000 - kept.last.at > WINDOW_SECONDS) return;
        for (const [name, s] of kept.series) series.set(name, s);
        colors = kept.colors;
        last = kept.last;
      } catch (e) {
        sessionStorage.removeItem(saved);
      }
    }

    function save() {
      try {
        sessionStorage.setItem(saved, JSON.stringify({ series: [...series], colors, last }));
      } catch (e) { /* storage full or off: the chart just starts again next time */ }
    }

    function line(name) {
      if (!series.has(name)) {
        const color = name === OTHERS ? "#9ca3af" : PALETTE[colors++ % PALETTE.length];
        series.set(name, { color: color, points: [] });
      }
      return series.get(name);
    }

    function poll() {
      const keep = [...series.keys()].filter((n) => n !== OTHERS).slice(0, 16);
      const query = keep.map((t) => "keep=" + encodeURIComponent(t)).join("&");
      const url = canvas.dataset.src + (query ? "?" + query : "");
      return getJSON(url).then((sample) => {
        if (last && sample.at > last.at) {
          const dt = sample.at - last.at;
          let named = 0;
          for (const [tenant, done] of Object.entries(sample.tenants)) {
            if (!(tenant in last.tenants)) continue; // a newcomer: a rate needs two points
            const rate = Math.max(0, done - last.tenants[tenant]) / dt;
            named += rate;
            line(tenant).points.push([sample.at, rate]);
          }
          const total = Math.max(0, sample.total - last.total) / dt;
          line(OTHERS).points.push([sample.at, Math.max(0, total - named)]);
        }
        last = sample;
        const oldest = sample.at - WINDOW_SECONDS;
        for (const s of series.values()) {
          while (s.points.length && s.points[0][0] < oldest) s.points.shift();
        }
        draw(sample.at);
        save();
      });
    }

    function draw(now) {
      const ctx = canvas.getContext("2d");
      const w = canvas.width, h = canvas.height;
      const left = 48, bottom = 22, top = 8, right = 8;
      ctx.clearRect(0, 0, w, h);
      let max = 1;
      for (const s of series.values()) for (const p of s.points) max = Math.max(max, p[1]);
      max = niceCeil(max);
      const x = (t) => left + (w - left - right) * (1 - (now - t) / WINDOW_SECONDS);
      const y = (v) => h - bottom - (h - bottom - top) * (v / max);
      ctx.strokeStyle = "#e5e7eb";
      ctx.fillStyle = "#6b7280";
      ctx.font = "11px system-ui, sans-serif";
      ctx.lineWidth = 1;
      for (let i = 0; i <= 4; i++) {
        const v = (max * i) / 4, yy = y(v);
        ctx.beginPath(); ctx.moveTo(left, yy); ctx.lineTo(w - right, yy); ctx.stroke();
        ctx.fillText(fmtRate(v), 4, yy + 4);
      }
      for (let s = 0; s <= WINDOW_SECONDS; s += 30) {
        ctx.fillText(s === 0 ? "now" : "-" + s + "s", x(now - s) - 12, h - 6);
      }
      ctx.lineWidth = 2;
      for (const s of series.values()) {
        if (!s.points.length) continue;
        ctx.strokeStyle = s.color;
        ctx.beginPath();
        s.points.forEach((p, i) => (i ? ctx.lineTo(x(p[0]), y(p[1])) : ctx.moveTo(x(p[0]), y(p[1]))));
        ctx.stroke();
      }
      drawLegend();
    }

    function drawLegend() {
      legend.replaceChildren();
      const rows = [...series.entries()].filter(([, s]) => s.points.length);
      rows.sort((a, b) => latest(b[1]) - latest(a[1]));
      for (const [name, s] of rows) {
        const item = document.createElement("li");
        item.dataset.tenant = name;
        const swatch = document.createElement("span");
        swatch.className = "swatch";
        swatch.dataset.color = s.color;
        const label = document.createElement("span");
        label.textContent = (name.length > 40 ? name.slice(0, 39) + "…" : name) + " " + fmtRate(latest(s)) + "/s";
        item.append(swatch, label);
        legend.append(item);
        paintSwatch(swatch, s.color);
      }
    }

    every(1000, poll);
  }

  function latest(s) { return s.points.length ? s.points[s.points.length - 1][1] : 0; }

  // The CSP forbids inline styles; a tiny canvas draws each legend colour instead.
  function paintSwatch(span, color) {
    const c = document.createElement("canvas");
    c.width = 12; c.height = 12;
    const ctx = c.getContext("2d");
    ctx.fillStyle = color; ctx.fillRect(0, 0, 12, 12);
    span.append(c);
  }

  function niceCeil(v) {
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }

  document.addEventListener("DOMContentLoaded", () => {
    const table = document.getElementById("queues");
    if (table && table.dataset.poll) overview(table);
    const canvas = document.getElementById("chart");
    if (canvas && canvas.dataset.src) chart(canvas);
  });
})();
