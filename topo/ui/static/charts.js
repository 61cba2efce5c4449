// Line charts on a canvas, hand-written (no library): one chart per metric, a line per
// series (a node of a run), against time or a step counter. Topo.charts.draw(el, spec).
"use strict";
(function () {
  const COLOURS = ["#1a73e8", "#d93025", "#188038", "#e37400", "#9334e6", "#12b5cb",
    "#e52592", "#5f6368", "#7cb342", "#f9ab00", "#3949ab", "#00897b"];

  function niceStep(span, ticks) {
    const raw = span / Math.max(ticks, 1);
    const mag = Math.pow(10, Math.floor(Math.log10(raw || 1)));
    const norm = raw / mag;
    return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  }

  function fmt(v) {
    const a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 0 : 1) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(a >= 1e5 ? 0 : 1) + "k";
    if (a >= 100 || v === 0) return v.toFixed(0);
    if (a >= 1) return v.toFixed(2).replace(/\.?0+$/, "");
    return v.toPrecision(2);
  }

  function bounds(series) {
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const s of series) for (const [x, y] of s.points) {
      if (x < x0) x0 = x; if (x > x1) x1 = x; if (y < y0) y0 = y; if (y > y1) y1 = y;
    }
    if (x0 === x1) { x0 -= 1; x1 += 1; }
    if (y0 === y1) { y0 -= 1; y1 += 1; }
    const pad = (y1 - y0) * 0.05;
    return [x0, x1, y0 - pad, y1 + pad];
  }

  // Every n-th point when a line has many more points than the chart has pixels.
  function thin(points, most) {
    if (points.length <= most) return points;
    const step = points.length / most, out = [];
    for (let i = 0; i < points.length; i += step) out.push(points[Math.floor(i)]);
    out.push(points[points.length - 1]);
    return out;
  }

  function draw(canvas, series, xLabel) {
    const ratio = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || 400, h = canvas.clientHeight || 220;
    canvas.width = w * ratio; canvas.height = h * ratio;
    const g = canvas.getContext("2d");
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, w, h);
    const left = 52, right = 10, top = 8, bottom = 28;
    const pw = w - left - right, ph = h - top - bottom;
    let total = 0;
    for (const s of series) total += s.points.length;
    canvas.dataset.points = String(total);
    if (!total) {
      g.fillStyle = "#9aa0a6"; g.font = "12px system-ui"; g.fillText("no points yet", left + 8, top + 20);
      return;
    }
    const [x0, x1, y0, y1] = bounds(series);
    const X = (x) => left + (x - x0) / (x1 - x0) * pw;
    const Y = (y) => top + ph - (y - y0) / (y1 - y0) * ph;
    g.strokeStyle = "#f1f3f4"; g.fillStyle = "#5f6368"; g.font = "11px system-ui"; g.lineWidth = 1;
    const ys = niceStep(y1 - y0, 5);
    g.textAlign = "right"; g.textBaseline = "middle";
    for (let v = Math.ceil(y0 / ys) * ys; v <= y1; v += ys) {
      g.beginPath(); g.moveTo(left, Y(v)); g.lineTo(left + pw, Y(v)); g.stroke();
      g.fillText(fmt(v), left - 6, Y(v));
    }
    const xs = niceStep(x1 - x0, Math.max(2, Math.floor(pw / 90)));
    g.textAlign = "center"; g.textBaseline = "top";
    for (let v = Math.ceil(x0 / xs) * xs; v <= x1; v += xs) {
      g.beginPath(); g.moveTo(X(v), top); g.lineTo(X(v), top + ph); g.stroke();
      g.fillText(fmt(v), X(v), top + ph + 4);
    }
    g.textAlign = "right"; g.fillText(xLabel, left + pw, top + ph + 15);
    g.strokeStyle = "#bdc1c6"; g.strokeRect(left, top, pw, ph);
    g.lineWidth = 1.5;
    for (const s of series) {
      const pts = thin(s.points, pw * 2);
      g.strokeStyle = s.colour; g.beginPath();
      pts.forEach(([x, y], i) => (i ? g.lineTo(X(x), Y(y)) : g.moveTo(X(x), Y(y))));
      g.stroke();
      if (pts.length === 1) { g.fillStyle = s.colour; g.fillRect(X(pts[0][0]) - 2, Y(pts[0][1]) - 2, 4, 4); }
    }
  }

  // A chart element: a title, a canvas, a key of its series (at most 12 named).
  function chart(container, id, title) {
    let el = container.querySelector(`[data-chart="${CSS.escape(id)}"]`);
    if (!el) {
      el = document.createElement("div");
      el.className = "chart"; el.dataset.chart = id;
      el.innerHTML = "<h4></h4><canvas></canvas><div class=keys></div>";
      el.querySelector("h4").textContent = title;
      container.appendChild(el);
    }
    return el;
  }

  function fill(el, series, xLabel) {
    draw(el.querySelector("canvas"), series, xLabel);
    const keys = el.querySelector(".keys");
    keys.textContent = "";
    series.slice(0, 12).forEach((s) => {
      const item = document.createElement("span");
      const sw = document.createElement("span");
      sw.className = "swatch"; sw.style.background = s.colour;
      item.append(sw, document.createTextNode(s.label));
      keys.appendChild(item);
    });
    if (series.length > 12) keys.append(document.createTextNode(`… ${series.length} lines`));
  }

  window.Topo = window.Topo || {};
  window.Topo.charts = { chart, fill, colour: (i) => COLOURS[i % COLOURS.length], fmt };
})();
