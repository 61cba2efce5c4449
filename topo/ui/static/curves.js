// Learning curves: the nodes' topo.metrics rows as live charts, one per metric, a line
// per node (and per run, when runs are compared), against time or any logged counter.
"use strict";
(function () {
  const T = window.Topo;
  const runs = {}; // run id ("" for this run) -> {offsets, rows: {file: [rows]}, start}
  const PREFERRED = ["return", "reward", "loss", "steps_per_s", "sps", "fps", "step", "episode"];
  let compared = [];
  const $ = (id) => document.getElementById(id);

  function rank(key) {
    const low = key.toLowerCase();
    const i = PREFERRED.findIndex((f) => low.includes(f));
    return i < 0 ? PREFERRED.length : i;
  }

  async function fetchRun(id) {
    const r = runs[id] || (runs[id] = { offsets: {}, rows: {}, start: null });
    const offsets = Object.entries(r.offsets).map(([k, v]) => `${k}:${v}`).join(",");
    const d = await T.get(`/api/metrics?run=${encodeURIComponent(id)}&offsets=${encodeURIComponent(offsets)}`);
    let grew = false;
    for (const [file, part] of Object.entries(d.files)) {
      r.offsets[file] = part.offset;
      (r.rows[file] = r.rows[file] || []).push(...part.rows);
      if (part.rows.length) grew = true;
      for (const row of part.rows) if (typeof row.time === "number" && (r.start === null || row.time < r.start)) r.start = row.time;
    }
    return grew;
  }

  async function refresh() {
    let grew = false;
    for (const id of ["", ...compared]) {
      try { grew = (await fetchRun(id)) || grew; } catch (e) { /* shown by the link dot */ }
    }
    if (grew) { keys(); if (T.tab === "curves") render(); if (T.panel.current()) T.panel.render(); }
  }

  function allKeys() {
    const found = new Set();
    for (const r of Object.values(runs)) for (const rows of Object.values(r.rows)) for (const row of rows)
      for (const k of Object.keys(row)) if (k !== "node" && k !== "time") found.add(k);
    return [...found];
  }

  // the x-axis choices: time, and every key (a step counter is one of them)
  function keys() {
    const sel = $("curve-x");
    const have = new Set([...sel.options].map((o) => o.value));
    for (const k of allKeys().sort()) if (!have.has(k)) sel.add(new Option(k, k));
  }

  function start(id) {
    if (id === "" && T.run.started) return T.run.started;
    return runs[id].start || 0;
  }

  // series of one metric: [{label, colour, points}] from the rows of the chosen runs
  function series(key, x, nodeFilter, onlyNode) {
    const out = [];
    let i = 0;
    for (const id of ["", ...compared]) {
      const r = runs[id];
      if (!r) continue;
      const t0 = start(id);
      for (const file of Object.keys(r.rows).sort()) {
        const rows = r.rows[file];
        const nodeId = (rows[0] && rows[0].node) || file;
        if (onlyNode && (id !== "" || nodeId !== onlyNode)) continue;
        if (nodeFilter && !nodeId.includes(nodeFilter)) continue;
        const points = [];
        for (const row of rows) {
          const y = row[key];
          const xv = x === "time" ? row.time - t0 : row[x];
          if (typeof y === "number" && typeof xv === "number") points.push([xv, y]);
        }
        if (!points.length) continue;
        if (x !== "time") points.sort((a, b) => a[0] - b[0]);
        const label = id ? `${nodeId} @${id}` : nodeId;
        out.push({ label, colour: T.charts.colour(i++), points });
      }
    }
    return out;
  }

  function render() {
    const box = $("charts");
    const x = $("curve-x").value;
    const filter = $("curve-keys").value.trim().toLowerCase();
    const nodeFilter = $("curve-nodes").value.trim();
    const wanted = allKeys().filter((k) => k !== x && (!filter || k.toLowerCase().includes(filter)))
      .sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
    if (!wanted.length) { if (!box.querySelector(".chart")) return; }
    else box.querySelector("p.muted")?.remove();
    for (const el of [...box.querySelectorAll(".chart")]) if (!wanted.includes(el.dataset.chart)) el.remove();
    for (const key of wanted.slice(0, 24)) {
      const s = series(key, x, nodeFilter, null);
      if (!s.length) { box.querySelector(`[data-chart="${CSS.escape(key)}"]`)?.remove(); continue; }
      const el = T.charts.chart(box, key, key);
      box.appendChild(el); // in rank order: returns and losses first
      T.charts.fill(el, s, x === "time" ? "seconds" : x);
    }
  }

  // the panel's charts: the node's own metrics against time
  function nodeCharts(box, node) {
    const ks = allKeys().filter((k) => series(k, "time", "", node).length).sort((a, b) => rank(a) - rank(b)).slice(0, 4);
    for (const el of [...box.querySelectorAll(".chart")]) if (!ks.includes(el.dataset.chart)) el.remove();
    for (const k of ks) T.charts.fill(T.charts.chart(box, k, k), series(k, "time", "", node), "seconds");
  }

  async function runList() {
    const d = await T.get("/api/runs");
    const sel = $("curve-add-run");
    sel.length = 1;
    for (const r of d.runs) if (!r.this && !compared.includes(r.id)) sel.add(new Option(`${r.name} ${r.id} (${r.state})`, r.id));
  }

  function chips() {
    const el = $("curve-runs");
    el.textContent = "";
    for (const id of compared) {
      const c = document.createElement("span");
      c.className = "chip"; c.textContent = `run ${id}`;
      c.addEventListener("click", () => { compared = compared.filter((x) => x !== id); delete runs[id]; chips(); runList(); render(); });
      el.appendChild(c);
    }
  }

  function init() {
    for (const id of ["curve-x", "curve-keys", "curve-nodes"]) $(id).addEventListener("input", render);
    $("curve-add-run").addEventListener("focus", runList);
    $("curve-add-run").addEventListener("change", async (e) => {
      const id = e.target.value;
      if (!id) return;
      compared.push(id); chips(); e.target.value = "";
      await fetchRun(id); keys(); render(); runList();
    });
    refresh();
    setInterval(refresh, 2000);
  }

  T.curves = { init, render, nodeCharts, refresh };
})();
