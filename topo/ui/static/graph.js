// The program's drawing (topo's own Graphviz SVG, as `topo graph --svg` draws it),
// coloured by the live states of the nodes each box stands for; a collapsed group shows
// its counts ("63 running, 1 restarting") and expands on a click.
"use strict";
(function () {
  const T = window.Topo;
  const PLACEHOLDER = "000 running, 000 restarting";
  // Worst first: a box takes the colour of its worst node.
  const ORDER = ["failed", "restarting", "busy", "stalled", "breakpoint", "starting", "running",
    "pending", "killed", "stopped", "finished"];
  let drawing = null;
  let expanded = [];
  let following = false; // a drawing of the run's new program is being fetched

  function shown(n) {
    if (!n) return "pending";
    if (n.state === "running" && n.breakpoint) return "breakpoint";
    if (n.state === "running" && n.busy) return "busy";
    if (n.state === "running" && n.stalled_s) return "stalled";
    return n.state || "pending";
  }

  function counts(ids) {
    const c = {};
    for (const id of ids) { const s = shown(T.nodes[id]); c[s] = (c[s] || 0) + 1; }
    return c;
  }

  function worst(c) {
    for (const s of ORDER) if (c[s]) return s;
    return Object.keys(c)[0] || "pending";
  }

  function summary(c) {
    const parts = Object.keys(c).sort((a, b) => ORDER.indexOf(b) - ORDER.indexOf(a));
    // the usual state first, then the others, worst last
    parts.sort((a, b) => c[b] - c[a]);
    return parts.map((s) => `${c[s]} ${s}`).join(", ");
  }

  async function load() {
    const q = expanded.length ? "?expand=" + encodeURIComponent(expanded.join(",")) : "";
    const d = await T.get("/api/graph" + q);
    drawing = d;
    expanded = expanded.filter((g) => (d.expanded || []).includes(g)); // (a group removed)
    const box = document.getElementById("graph");
    box.dataset.generation = String(d.generation ?? "");
    if (!d.svg) {
      box.innerHTML = "<p class=muted></p>";
      box.querySelector("p").textContent = d.error || "no drawing";
      return;
    }
    box.innerHTML = d.svg;
    for (const g of box.querySelectorAll("g.node")) {
      const key = g.querySelector("title").textContent;
      g.dataset.key = key;
      if (d.collapsed.includes(key)) g.classList.add("collapsed");
      for (const t of g.querySelectorAll("text")) if (t.textContent === PLACEHOLDER) t.classList.add("counts");
      g.addEventListener("click", () => click(key));
      g.querySelector("title").remove(); // our own tooltip instead of the box's key
      const tip = document.createElementNS("http://www.w3.org/2000/svg", "title");
      g.appendChild(tip);
    }
    chips();
    paint();
  }

  // Draw again when the run's program changed (its generation moved past the drawing's).
  function follow() {
    const gen = T.run.generation;
    if (!drawing || following || gen == null || gen === drawing.generation) return;
    following = true;
    load().catch(() => {}).finally(() => { following = false; });
  }

  function click(key) {
    if (drawing.collapsed.includes(key)) {
      expanded.push(drawing.groups[key]);
      load();
      return;
    }
    const ids = drawing.members[key] || [];
    if (ids.length) T.panel.open(ids[0]);
  }

  function chips() {
    const el = document.getElementById("expanded");
    el.textContent = "";
    for (const g of expanded) {
      const c = document.createElement("span");
      c.className = "chip"; c.textContent = `${g} expanded`; c.title = "collapse it again";
      c.addEventListener("click", () => { expanded = expanded.filter((x) => x !== g); load(); });
      el.appendChild(c);
    }
  }

  // Colour every box by its nodes' states; counts in the collapsed ones.
  function paint() {
    if (!drawing || !drawing.svg) return;
    const sel = T.panel.current();
    for (const g of document.querySelectorAll("#graph g.node")) {
      const ids = drawing.members[g.dataset.key] || [];
      if (!ids.length) continue;
      const c = counts(ids);
      const state = worst(c);
      g.setAttribute("class", `node st-${state}` + (g.classList.contains("collapsed") ? " collapsed" : "")
        + (ids.includes(sel) ? " sel" : ""));
      g.dataset.state = state;
      const text = summary(c);
      g.dataset.counts = text;
      const t = g.querySelector("text.counts");
      if (t) t.textContent = text;
      const tip = g.querySelector("title");
      if (tip) tip.textContent = ids.length > 1 ? `${drawing.groups[g.dataset.key]}: ${text} — click to expand`
        : `${ids[0]}: ${text}`;
    }
  }

  function legend() {
    const el = document.getElementById("legend");
    el.textContent = "";
    for (const s of ["running", "starting", "restarting", "stalled", "busy", "failed", "finished"]) {
      const b = document.createElement("span");
      b.className = `badge st-${s}`; b.textContent = s;
      el.appendChild(b);
    }
  }

  T.graph = { load, follow, paint, legend, shown, counts, summary };
})();
