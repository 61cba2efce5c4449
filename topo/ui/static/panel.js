// A node's panel: its state, host, pid, restarts with their reasons and tracebacks,
// uptime, CPU and memory, the RPC calls it serves and makes, its metrics and its live
// log (follow, search).
"use strict";
(function () {
  const T = window.Topo;
  let node = null;
  let logOffset = 0;
  let logLoaded = false; // the first lines are in: following may begin
  let searching = false;
  let timer = null;
  let procFigures = null;
  const $ = (id) => document.getElementById(id);

  function esc(s) {
    return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
  }

  function bytes(n) {
    if (n == null) return "–";
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return `${n.toFixed(i ? 1 : 0)} ${u[i]}`;
  }

  function open(id) {
    if (!T.nodes[id]) return;
    node = id;
    $("panel").hidden = false;
    document.querySelector("#panel .panel-body").scrollTop = 0;
    $("log").textContent = "";
    shown = [];
    $("log-search").value = "";
    searching = false;
    logOffset = 0;
    logLoaded = false;
    procFigures = null;
    render();
    loadLog();
    clearInterval(timer);
    timer = setInterval(tick, 1000);
    tick();
    T.graph.paint();
  }

  function close() {
    node = null;
    $("panel").hidden = true;
    clearInterval(timer);
    T.graph.paint();
  }

  let ticks = 0;
  async function tick() {
    if (!node) return;
    if ($("log-follow").checked && !searching && logLoaded) follow();
    if (ticks++ % 2 === 0) {
      try { procFigures = await T.get("/api/process?node=" + encodeURIComponent(node)); } catch (e) { procFigures = null; }
      renderFacts();
    }
  }

  function fact(k, v) { return `<tr><td>${esc(k)}</td><td>${v}</td></tr>`; }

  function renderFacts() {
    const n = T.nodes[node];
    if (!n) return;
    const p = procFigures;
    let cpu = "–", mem = "–";
    if (p && p.where === "remote") { cpu = mem = `remote (${esc(p.host || "another host")})`; }
    else if (p && p.where === "local") {
      cpu = `${p.cpu_percent.toFixed(1)} %` + (p.shared ? " (the launcher's process: threads backend)" : "");
      mem = `${bytes(p.rss)} resident · ${p.threads} threads`;
    } else if (p && p.where === "gone") { cpu = mem = "no process"; }
    const up = n.since && ["running", "starting"].includes(n.state) ? T.duration(Date.now() / 1000 - n.since) : "–";
    $("panel-facts").innerHTML = [
      fact("state", `<span class="st-${T.graph.shown(n)}">${esc(T.graph.shown(n))}</span>` + (n.phase ? ` · ${esc(n.phase)}` : "")
        + (n.stalled_s ? ` · no progress for ${T.duration(n.stalled_s)}` : "") + (n.busy ? ` · ${esc(n.busy)}` : "")
        + (n.breakpoint ? ` · at ${esc(n.breakpoint)} (topo debug RUN ${esc(n.id)})` : "")),
      fact("group", esc(n.group || "")),
      fact("executable", esc(n.executable || "")),
      fact("host", esc(n.host || "this machine")),
      ...(n.device ? [fact("device", esc(n.device))] : []),
      fact("pid", n.pid ? String(n.pid) : "–"),
      fact("restarts", String(n.restarts || 0)),
      fact("uptime", up),
      fact("CPU", cpu),
      fact("memory", mem),
    ].join("");
  }

  // the history drawn last: for which node, which T.events and how long it was
  let history = { node: null, list: null, seen: -1 };

  function renderHistory() {
    if (history.node === node && history.list === T.events && history.seen === T.events.length) return;
    history = { node, list: T.events, seen: T.events.length };
    const items = T.events.filter((e) => (e.node === node || (e.executable && e.executable === (T.nodes[node] || {}).executable))
      && ["failed", "restarting", "exited", "killed", "stalled", "busy"].includes(e.kind));
    const el = $("panel-history");
    if (!items.length) { el.innerHTML = "<span class=muted>none</span>"; return; }
    el.innerHTML = items.slice(-50).reverse().map((e) => {
      const tb = e.traceback ? `<details><summary>traceback</summary><pre class=tb>${esc(e.traceback)}</pre></details>` : "";
      return `<div class=item><span class=muted>${T.clock(e.time)}</span> <b class="st-${esc(e.kind === "exited" ? "finished" : e.kind)}">${esc(e.kind)}</b> ${esc(e.message || "")}${tb}</div>`;
    }).join("");
  }

  function rpcTable(rows, made) {
    if (!rows || !rows.length) return "<span class=muted>none</span>";
    const head = `<tr>${made ? "<th>peer</th>" : ""}<th>method</th><th class=num>calls</th><th class=num>errors</th><th class=num>calls/s</th><th class=num>mean ms</th><th class=num>max ms</th></tr>`;
    const f = (v) => (v == null ? "–" : T.charts.fmt(v));
    const body = rows.slice().sort((a, b) => b.calls - a.calls).map((r) => `<tr>${made ? `<td>${esc(r.peer)}</td>` : ""}<td>${esc(r.method)}</td>`
      + `<td class=num>${r.calls}</td><td class=num>${r.errors}</td><td class=num>${f(r.rate)}</td><td class=num>${f(r.mean_ms)}</td><td class=num>${f(r.max_ms)}</td></tr>`).join("");
    return `<table class=grid>${head}${body}</table>`;
  }

  function renderRpc() {
    const r = (T.nodes[node] || {}).rpc;
    if (!r) { $("panel-rpc").innerHTML = "<span class=muted>no calls reported yet</span>"; return; }
    $("panel-rpc").innerHTML = `<div class=muted>served</div>${rpcTable(r.served, false)}<div class=muted>made</div>${rpcTable(r.made, true)}`;
  }

  function renderMetrics() {
    const n = T.nodes[node] || {};
    const m = n.metrics || {};
    const keys = Object.keys(m);
    const el = $("panel-metrics");
    if (!keys.length) { el.innerHTML = "<span class=muted>none</span>"; return; }
    let box = el.querySelector(".mini");
    if (!box) {
      el.innerHTML = "<table class=facts-table></table><div class=mini></div>";
      box = el.querySelector(".mini");
    }
    el.querySelector("table").innerHTML = keys.map((k) => fact(k, esc(typeof m[k] === "number" ? T.charts.fmt(m[k]) : m[k]))).join("");
    T.curves.nodeCharts(box, node);
  }

  function render() {
    if (!node) return;
    const n = T.nodes[node];
    $("panel-title").textContent = node;
    const st = T.graph.shown(n);
    $("panel-state").className = `badge st-${st}`;
    $("panel-state").textContent = st;
    $("act-restart").disabled = !T.actions || !["running", "starting", "restarting"].includes(n.state);
    renderFacts(); renderHistory(); renderRpc(); renderMetrics();
  }

  function lineHtml(line, needle) {
    const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}) /.exec(line);
    let text = m ? line.slice(m[0].length) : line;
    text = esc(text);
    if (needle) {
      const re = new RegExp(needle.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "gi");
      text = text.replace(re, (s) => `<mark>${s}</mark>`);
    }
    return (m ? `<span class=ts>${m[1].slice(11)}</span> ` : "") + text;
  }

  // The log view keeps the last LOG_LINES lines (their HTML kept here too): new lines are
  // added at the end, and it is drawn whole again, cut back to LOG_LINES, only once
  // LOG_SLACK more have come (it used to be read back and redrawn at every new line).
  const LOG_LINES = 5000, LOG_SLACK = 1000;
  let shown = [];

  function show(lines, append, needle) {
    const el = $("log");
    const atEnd = el.scrollTop + el.clientHeight >= el.scrollHeight - 4;
    const html = lines.map((l) => lineHtml(l, needle));
    if (append && el.innerHTML && shown.length && shown.length + html.length <= LOG_LINES + LOG_SLACK) {
      if (html.length) el.insertAdjacentHTML("beforeend", "\n" + html.join("\n"));
      shown.push(...html);
    } else {
      shown = (append ? shown.concat(html) : html).slice(-LOG_LINES);
      el.innerHTML = shown.join("\n");
    }
    el.dataset.lines = String(shown.length);
    if (atEnd || !append) el.scrollTop = el.scrollHeight;
  }

  async function loadLog() {
    const id = node;
    const r = await T.get(`/api/logs?node=${encodeURIComponent(id)}&tail=500`);
    if (id !== node) return;
    logOffset = r.offset;
    logLoaded = true;
    show(r.lines, false, "");
    $("log-note").textContent = r.missing ? "no log yet" : "";
  }

  let following = false;
  async function follow() {
    if (following) return;
    following = true;
    try { await followOnce(); } finally { following = false; }
  }

  async function followOnce() {
    const id = node;
    const r = await T.get(`/api/logs?node=${encodeURIComponent(id)}&offset=${logOffset}`);
    if (id !== node || searching) return;
    logOffset = r.offset;
    if (r.reset) show(r.lines, false, "");
    else if (r.lines.length) show(r.lines, true, "");
  }

  async function search(text) {
    if (!text) { searching = false; logLoaded = false; loadLog(); return; }
    searching = true;
    const r = await T.get(`/api/logs?node=${encodeURIComponent(node)}&search=${encodeURIComponent(text)}`);
    show(r.lines, false, text);
    $("log-note").textContent = `${r.matches} matching line(s)` + (r.matches > r.lines.length ? `, the last ${r.lines.length} shown` : "") + " — clear the search to follow again";
  }

  function init() {
    $("panel-close").addEventListener("click", close);
    $("log-search").addEventListener("keydown", (e) => { if (e.key === "Enter") search(e.target.value.trim()); });
    $("log-search").addEventListener("search", (e) => { if (!e.target.value) search(""); });
    $("act-restart").addEventListener("click", () => T.act("restart", node));
    document.addEventListener("keydown", (e) => { if (e.key === "Escape" && node) close(); });
  }

  T.panel = { open, close, render, init, current: () => node };
})();
