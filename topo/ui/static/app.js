// The dashboard page: the run's live state (Server-Sent Events from /api/stream), the
// header and its actions, the tabs (graph, nodes, learning curves, events).
"use strict";
(function () {
  const T = window.Topo;
  T.token = document.querySelector('meta[name="topo-token"]').content;
  T.nodes = {};
  T.run = {};
  T.state = "";
  T.events = [];
  T.actions = false;
  T.tab = "graph";
  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));

  T.get = async function (url) {
    const r = await fetch(url, { credentials: "same-origin" });
    if (!r.ok) throw new Error(`${url}: ${r.status}`);
    return r.json();
  };

  T.duration = function (s) {
    s = Math.max(0, Math.floor(s));
    if (s < 60) return `${s}s`;
    if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
    if (s < 86400) return `${Math.floor(s / 3600)}h${String(Math.floor(s % 3600 / 60)).padStart(2, "0")}m`;
    return `${Math.floor(s / 86400)}d${String(Math.floor(s % 86400 / 3600)).padStart(2, "0")}h`;
  };
  // one formatter for every time shown (toLocaleTimeString builds a new one per call)
  const CLOCK = new Intl.DateTimeFormat([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
  T.clock = (t) => CLOCK.format(new Date(t * 1000));

  function toast(text) {
    const el = $("toast");
    el.textContent = text; el.hidden = false;
    clearTimeout(toast.t);
    toast.t = setTimeout(() => (el.hidden = true), 6000);
  }

  const ASK = {
    stop: () => `Stop the whole program ${T.run.program || ""} (run ${T.run.id || ""})? Every node gets the stop, then its grace period.`,
    snapshot: () => "Take a snapshot of every node's state now? The nodes pause briefly.",
    restart: (node) => `Restart node ${node}? Its process is killed and started again; its nodes keep the state they have now.`,
  };

  // Every action asks first; without a yes nothing is sent.
  T.act = async function (op, node) {
    if (!window.confirm(ASK[op](node))) return;
    try {
      const r = await fetch("/api/action", {
        method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-Topo-Token": T.token },
        body: JSON.stringify({ op, node, confirmed: true }),
      });
      const a = await r.json();
      if (!a.ok) { toast(`${op} failed: ${a.error}`); return; }
      if (op === "snapshot") toast(`snapshot ${a.number} taken: ${(a.nodes || []).length} node state(s), paused ${Number(a.pause_s).toFixed(2)}s`);
      else if (op === "restart") toast(`restarting ${(a.nodes || [node]).join(", ")}${a.message ? `: ${a.message}` : ""}`);
      else toast("stopping the program");
    } catch (e) { toast(`${op} failed: ${e}`); }
  };

  // -- rendering (at most a few times a second) ---------------------------------------
  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; render(); });
  }

  function render() {
    header();
    T.graph.paint();
    if (T.tab === "nodes") table();
    if (T.tab === "events") events();
    T.panel.render();
  }

  function runState() {
    if (T.state === "ended") return T.run.exit_code ? `ended (exit ${T.run.exit_code})` : "ended";
    return T.state;
  }

  function header() {
    const r = T.run;
    $("program").textContent = r.program || "topo";
    document.title = `${r.program || "topo"} · ${runState()}`;
    const b = $("run-state");
    b.textContent = runState();
    b.className = `badge st-${T.state === "ended" ? (r.exit_code ? "failed" : "finished") : T.state}`;
    const nodes = Object.values(T.nodes);
    const up = nodes.filter((n) => n.state === "running").length;
    const restarts = nodes.reduce((a, n) => a + (n.restarts || 0), 0);
    const lost = T.state === "lost";
    const parts = [`run ${r.id || ""}`, r.backend, lost ? lostText(r, nodes) : `${up}/${nodes.length} nodes running`];
    if (restarts) parts.push(`${restarts} restart(s)`);
    // a lost run's clock stopped with its launcher's last record
    if (r.started) parts.push(`up ${T.duration((T.state === "ended" || lost ? r.updated : Date.now() / 1000) - r.started)}`);
    if (r.limiter) {
      const eta = r.limiter.eta_s != null && T.state === "running" ? ` · ~${T.duration(r.limiter.eta_s)}` : "";
      parts.push(`${r.limiter.key || "steps"} ${T.charts.fmt(r.limiter.steps || 0)}/${T.charts.fmt(r.limiter.limit || 0)}${eta}`);
    }
    if (r.generation != null) parts.push(`generation ${r.generation}`);
    if (T.state === "ended" && r.stop_reason) parts.push(`stopped: ${r.stop_reason}`);
    $("run-facts").textContent = parts.filter(Boolean).join(" · ");
    $("act-stop").disabled = !T.actions || T.state === "stopping";
    $("act-snapshot").disabled = !T.actions || T.state !== "running";
    const w = $("warnings");
    const warnings = (r.warnings || []).slice(-5);
    if (r.failure && r.failure.message) warnings.unshift(r.failure.message);
    w.hidden = !warnings.length;
    w.textContent = warnings.join("\n");
  }

  function lostText(r, nodes) {
    const pid = (r.launcher || {}).pid;
    const orphaned = nodes.filter((n) => n.state === "orphaned").length;
    let text = `run lost: its launcher${pid ? ` (pid ${pid})` : ""} ended without ending the run`;
    if (orphaned) text += ` · ${orphaned} node(s) still running unwatched`;
    return `${text} · topo stop ${r.id || ""} cleans up`;
  }

  function metricsText(m) {
    return Object.entries(m || {}).slice(0, 3).map(([k, v]) => `${k} ${typeof v === "number" ? T.charts.fmt(v) : v}`).join(" · ");
  }

  function table() {
    const f = $("node-filter").value.trim().toLowerCase();
    const now = Date.now() / 1000;
    const rows = Object.values(T.nodes).filter((n) => !f || `${n.id} ${n.group} ${T.graph.shown(n)}`.toLowerCase().includes(f));
    $("node-table").querySelector("tbody").innerHTML = rows.map((n) => {
      const st = T.graph.shown(n);
      const up = n.since && ["running", "starting"].includes(n.state) ? T.duration(now - n.since) : "";
      return `<tr data-node="${esc(n.id)}"><td>${esc(n.id)}</td><td class="st-${st}">${esc(st)}</td><td>${esc(n.host || "")}${n.device ? ` · ${esc(n.device)}` : ""}</td>`
        + `<td class=num>${n.pid || ""}</td><td class=num>${n.restarts || 0}</td><td>${up}</td>`
        + `<td>${esc(metricsText(n.metrics))}</td><td class=line>${esc(n.last_line || "")}</td></tr>`;
    }).join("");
  }

  const TROUBLE = ["failed", "restarting", "stalled", "busy", "breakpoint", "killed"];
  const LIFE = ["starting", "started", "ready", "finished", "exited", "stopping", "stopped", "snapshot", "applied"];
  const KNOWN = ["node", "executable", "pid", "message", "kind", "time", "traceback"];

  const SHOWN = 2000; // rows the events tab holds, the newest first
  const KEPT = 10000; // events the page keeps (the server sends at most 5000 at first)

  function wanted(kind, f) {
    return (e) => (!kind || (kind === "trouble" ? TROUBLE : LIFE).includes(e.kind)
      || (kind === "life" && !TROUBLE.includes(e.kind) && !LIFE.includes(e.kind)))
      && (!f || JSON.stringify(e).toLowerCase().includes(f));
  }

  function eventRow(e) {
    // a kind this page does not know is shown as it came: its fields as key=value
    const extra = Object.entries(e).filter(([k]) => !KNOWN.includes(k)).map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`).join(" ");
    const who = e.node || e.executable || "";
    const tb = e.traceback ? `<details><summary>traceback</summary><pre class=tb>${esc(e.traceback)}</pre></details>` : "";
    const st = TROUBLE.includes(e.kind) ? (e.kind === "killed" ? "failed" : e.kind)
      : ["ready", "started"].includes(e.kind) ? "running" : e.kind === "starting" ? "starting" : "finished";
    return `<li data-kind="${esc(e.kind)}"><span class=when>${T.clock(e.time)}</span><span class="badge st-${st}">${esc(e.kind)}</span>`
      + `<span class=who data-node="${esc(e.node || "")}">${esc(who)}</span><span>${esc(e.message || "")} <span class=muted>${esc(extra)}</span></span>${tb}</li>`;
  }

  // What the list shows: for which filters, which T.events and how much of it it has gone
  // through, how many rows it holds. New events are added on top; the list is drawn whole
  // again only when the filters change or T.events is a new array (a new connection, or
  // the oldest dropped).
  let listed = { filters: null, list: null, seen: 0, rows: 0 };

  function events() {
    const kind = $("event-kind").value;
    const f = $("event-filter").value.trim().toLowerCase();
    const filters = `${kind}\n${f}`;
    const el = $("event-list");
    const again = filters !== listed.filters || T.events !== listed.list;
    if (!again && T.events.length === listed.seen) return;
    const rows = T.events.slice(again ? 0 : listed.seen).filter(wanted(kind, f)).slice(-SHOWN).reverse();
    const html = rows.map(eventRow).join("");
    if (again) {
      el.innerHTML = html;
      listed = { filters, list: T.events, seen: T.events.length, rows: rows.length };
      return;
    }
    listed.seen = T.events.length;
    if (!rows.length) return;
    el.insertAdjacentHTML("afterbegin", html);
    listed.rows += rows.length;
    for (; listed.rows > SHOWN; listed.rows--) el.lastElementChild.remove();
  }

  // -- the live stream -------------------------------------------------------------------
  function connect() {
    const source = new EventSource("/api/stream");
    let fresh = true; // the first events of a connection are all of them: they replace
    let whole = true; // so is its first status: every node the run has now
    source.addEventListener("open", () => { fresh = true; whole = true; $("link").classList.remove("down"); });
    source.addEventListener("error", () => $("link").classList.add("down"));
    source.addEventListener("status", (m) => {
      const d = JSON.parse(m.data);
      T.state = d.state; T.run = d.run; T.actions = d.actions;
      if (whole) T.nodes = {};
      whole = false;
      for (const n of d.nodes) T.nodes[n.id] = n;
      for (const id of d.gone || []) delete T.nodes[id]; // removed by topo apply
      document.body.dataset.version = String(d.version);
      document.body.dataset.state = d.state;
      T.graph.follow(); // a change to the program (topo apply): its new drawing
      schedule();
    });
    source.addEventListener("events", (m) => {
      const batch = JSON.parse(m.data);
      if (fresh) T.events = batch; else for (const e of batch) T.events.push(e);
      fresh = false;
      if (T.events.length > KEPT + KEPT / 4) T.events = T.events.slice(-KEPT); // a new array
      $("events-count").textContent = String(T.events.length);
      schedule();
    });
  }

  function tabs() {
    for (const b of document.querySelectorAll("#tabs button")) {
      b.addEventListener("click", () => {
        T.tab = b.dataset.tab;
        for (const x of document.querySelectorAll("#tabs button")) x.classList.toggle("on", x === b);
        for (const s of document.querySelectorAll(".tab")) s.classList.toggle("on", s.id === `tab-${T.tab}`);
        if (T.tab === "curves") T.curves.render();
        render();
      });
    }
  }

  async function main() {
    tabs();
    T.panel.init();
    T.graph.legend();
    for (const b of document.querySelectorAll("header button[data-op]")) b.addEventListener("click", () => T.act(b.dataset.op));
    $("node-filter").addEventListener("input", table);
    $("node-table").addEventListener("click", (e) => { const tr = e.target.closest("tr[data-node]"); if (tr) T.panel.open(tr.dataset.node); });
    $("event-list").addEventListener("click", (e) => { const w = e.target.closest(".who[data-node]"); if (w && w.dataset.node) T.panel.open(w.dataset.node); });
    for (const id of ["event-kind", "event-filter"]) $(id).addEventListener("input", events);
    const first = await T.get("/api/run");
    T.state = first.state; T.run = first.run; T.actions = first.actions;
    for (const n of first.nodes) T.nodes[n.id] = n;
    render();
    connect();
    await T.graph.load();
    T.curves.init();
    document.body.dataset.ready = "1";
    setInterval(header, 1000); // uptimes
  }

  main().catch((e) => toast(`the dashboard could not load: ${e}`));
})();
