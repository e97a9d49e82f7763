// Helpers shared by the console's pages: building elements from text
// (never HTML from data) and numbers in units an operator reads at a
// glance. No dependencies, no build step.
"use strict";

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, String(v));
    else e[k] = v;
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

// fmtCount: 1234567 -> "1.23 M".
function fmtCount(x) {
  if (x == null || !isFinite(x)) return "–";
  const a = Math.abs(x);
  if (a >= 1e9) return (x / 1e9).toFixed(2) + " G";
  if (a >= 1e6) return (x / 1e6).toFixed(2) + " M";
  if (a >= 1e4) return (x / 1e3).toFixed(1) + " k";
  if (Number.isInteger(x)) return String(x);
  return x.toFixed(a < 10 ? 2 : 1);
}

// fmtBytes: 1610612736 -> "1.5 GiB".
function fmtBytes(x) {
  if (x == null || !isFinite(x)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(x) >= 1024 && i < units.length - 1) { x /= 1024; i++; }
  return (i === 0 ? String(Math.round(x)) : x.toFixed(1)) + " " + units[i];
}

// fmtDuration: seconds -> "1 h 5 m", "42 s", "350 ms".
function fmtDuration(sec) {
  if (sec == null || !isFinite(sec) || sec < 0) return "–";
  if (sec < 1) return Math.round(sec * 1000) + " ms";
  if (sec < 60) return (sec < 10 ? sec.toFixed(1) : Math.round(sec)) + " s";
  const d = Math.floor(sec / 86400), h = Math.floor(sec % 86400 / 3600), m = Math.floor(sec % 3600 / 60), s = Math.floor(sec % 60);
  if (d) return d + " d " + h + " h";
  if (h) return h + " h " + m + " m";
  return m + " m " + s + " s";
}

// fmtTime: an RFC 3339 time as local date and time, "never" for Go's
// zero time (0001-01-01) or none.
function fmtTime(s) {
  if (!s || s.startsWith("0001-01-01")) return "never";
  const d = new Date(s);
  if (isNaN(d)) return s;
  const ago = (Date.now() - d.getTime()) / 1000;
  return d.toLocaleString("en-GB") + (ago >= 0 ? " (" + fmtDuration(ago) + " ago)" : "");
}

// table builds a table from a header row and rows of cells.
function table(head, rows, attrs) {
  return el("table", attrs || {},
    el("tr", {}, ...head.map((h) => el("th", {}, h))),
    ...rows.map((r) => el("tr", {}, ...r.map((c) => el("td", {}, c)))));
}
