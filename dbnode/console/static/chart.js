// A line chart drawn as SVG by our own code: one polyline per series
// over a shared time axis, with gridlines and tick labels. Gaps in a
// series (no point at a step) break its line.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const PALETTE = ["#1c7ed6", "#e8590c", "#2f9e44", "#c2255c", "#7048e8", "#0c8599", "#f08c00", "#5c940d", "#862e9c", "#495057"];

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text != null) e.textContent = String(text);
  return e;
}

// niceTicks returns about n round values covering [lo, hi].
function niceTicks(lo, hi, n) {
  if (lo === hi) { lo -= 1; hi += 1; }
  const raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  return out;
}

function timeLabel(ms, spanMs) {
  const d = new Date(ms), p = (x) => String(x).padStart(2, "0");
  const hm = p(d.getHours()) + ":" + p(d.getMinutes());
  if (spanMs <= 15 * 60e3) return hm + ":" + p(d.getSeconds());
  if (spanMs <= 2 * 86400e3) return hm;
  return p(d.getDate()) + "/" + p(d.getMonth() + 1) + " " + hm;
}

// lineChart draws series [{name, points: [[ms, value], ...]}] over
// [startMs, endMs] into a new SVG element of width x height.
function lineChart(series, startMs, endMs, width, height) {
  const m = { l: 64, r: 12, t: 10, b: 26 };
  const w = width - m.l - m.r, h = height - m.t - m.b;
  let lo = Infinity, hi = -Infinity;
  for (const s of series) for (const [, v] of s.points) if (isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  if (lo === Infinity) { lo = 0; hi = 1; }
  const yt = niceTicks(lo, hi, 5);
  lo = Math.min(lo, yt[0]); hi = Math.max(hi, yt[yt.length - 1]);
  if (lo === hi) hi = lo + 1;
  const x = (t) => m.l + (t - startMs) / (endMs - startMs) * w;
  const y = (v) => m.t + h - (v - lo) / (hi - lo) * h;
  const root = svg("svg", { width, height, viewBox: "0 0 " + width + " " + height, class: "chart", role: "img" });
  const grid = svg("g", { class: "grid" });
  for (const v of yt) {
    grid.append(svg("line", { x1: m.l, x2: m.l + w, y1: y(v), y2: y(v) }));
    grid.append(svg("text", { x: m.l - 6, y: y(v) + 4, "text-anchor": "end" }, fmtCount(v)));
  }
  const span = endMs - startMs;
  for (const t of niceTimeTicks(startMs, endMs)) {
    grid.append(svg("line", { x1: x(t), x2: x(t), y1: m.t, y2: m.t + h }));
    grid.append(svg("text", { x: x(t), y: height - 8, "text-anchor": "middle" }, timeLabel(t, span)));
  }
  root.append(grid);
  series.forEach((s, i) => {
    const g = svg("g", { class: "series", "data-series": s.name });
    let run = [];
    const flush = () => {
      if (run.length === 1) g.append(svg("circle", { cx: run[0][0], cy: run[0][1], r: 1.5, fill: PALETTE[i % PALETTE.length] }));
      else if (run.length > 1) g.append(svg("polyline", { points: run.map((p) => p[0].toFixed(1) + "," + p[1].toFixed(1)).join(" "),
        fill: "none", stroke: PALETTE[i % PALETTE.length], "stroke-width": 1.5 }));
      run = [];
    };
    let prev = null;
    for (const [t, v] of s.points) {
      if (!isFinite(v) || (prev != null && t - prev > s.step * 1.5)) flush();
      if (isFinite(v)) run.push([x(t), y(v)]);
      prev = t;
    }
    flush();
    root.append(g);
  });
  root.append(svg("rect", { x: m.l, y: m.t, width: w, height: h, fill: "none", stroke: "#adb5bd" }));
  return root;
}

// niceTimeTicks: about six ticks at round times (seconds to days).
function niceTimeTicks(startMs, endMs) {
  const steps = [1, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400].map((s) => s * 1000);
  const step = steps.find((s) => (endMs - startMs) / s <= 7) || 86400e3;
  const off = new Date(startMs).getTimezoneOffset() * 60e3; // round in local time
  const out = [];
  for (let t = Math.ceil((startMs - off) / step) * step + off; t <= endMs; t += step) out.push(t);
  return out;
}
