// The query page: a PromQL expression over a time range, drawn as an SVG
// line chart (range query) or a table (instant query at the range's
// end). The API's errors and warnings are shown as it gives them.
"use strict";

const MAX_POINTS = 300; // steps per range query: about one per 3 px

function seriesName(metric) {
  const name = metric.__name__ || "";
  const rest = Object.entries(metric).filter(([k]) => k !== "__name__").map(([k, v]) => k + '="' + v + '"');
  return name + "{" + rest.join(", ") + "}";
}

// stepFor picks a round step giving at most MAX_POINTS points.
function stepFor(rangeSec) {
  const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400];
  return steps.find((s) => rangeSec / s <= MAX_POINTS) || 86400;
}

async function api(path, params, signal) {
  const resp = await fetch(path + "?" + new URLSearchParams(params), { credentials: "same-origin", cache: "no-store", signal });
  let body;
  try { body = await resp.json(); } catch (_) { throw new Error("HTTP " + resp.status + ": the answer is not JSON"); }
  if (body.status !== "success") {
    const e = new Error((body.errorType ? body.errorType + ": " : "") + (body.error || "HTTP " + resp.status));
    e.warnings = body.warnings;
    throw e;
  }
  return body;
}

function showNotes(kind, list) {
  const e = document.getElementById("query-" + kind);
  if (!list || !list.length) { e.hidden = true; e.replaceChildren(); return; }
  e.hidden = false;
  e.replaceChildren(...list.map((w) => el("div", {}, w)));
}

function renderGraph(data, start, end, step) {
  const out = document.getElementById("result");
  const series = data.result.map((s) => ({
    name: seriesName(s.metric), step: step * 1000,
    points: (s.values || []).map(([t, v]) => [t * 1000, Number(v)]),
  }));
  if (!series.length) { out.replaceChildren(el("p", { class: "muted", id: "empty" }, "no data in this range")); return; }
  const width = Math.max(600, out.clientWidth - 24);
  const chart = lineChart(series, start * 1000, end * 1000, width, 360);
  const legend = el("ol", { class: "legend-list" }, ...series.slice(0, 50).map((s, i) =>
    el("li", {}, el("i", { class: "sw", style: "background:" + PALETTE[i % PALETTE.length] }), " " + s.name)));
  out.replaceChildren(chart, el("div", { class: "muted" }, series.length + " series, step " + fmtDuration(step)), legend);
}

function renderTable(data) {
  const out = document.getElementById("result");
  const r = data.result;
  let rows;
  switch (data.resultType) {
    case "vector": rows = r.map((s) => [seriesName(s.metric), s.value ? s.value[1] : "(histogram)"]); break;
    case "matrix": rows = r.map((s) => [seriesName(s.metric), (s.values || []).map((v) => v[1] + " @" + v[0]).join("\n")]); break;
    case "scalar": case "string": rows = [["(" + data.resultType + ")", r[1]]]; break;
    default: rows = [];
  }
  if (!rows.length) { out.replaceChildren(el("p", { class: "muted", id: "empty" }, "no data")); return; }
  out.replaceChildren(table(["series", "value"], rows, { id: "result-table", class: "result-table" }),
    el("div", { class: "muted" }, rows.length + " rows"));
}

// running aborts the query in flight: the Cancel button, or a new query
// replacing it. Aborting the fetch closes the request, which ends the
// query's context on the node: the evaluation stops there too.
let running = null;

function cancel() {
  if (running) running.abort();
}

async function run(ev) {
  if (ev) ev.preventDefault();
  cancel();
  const f = document.getElementById("query-form");
  const expr = f.expr.value.trim();
  const st = document.getElementById("query-status");
  if (!expr) { st.textContent = "enter an expression"; return; }
  const rangeSec = Number(f.range.value);
  const end = f.end.value ? Math.floor(new Date(f.end.value).getTime() / 1000) : Math.floor(Date.now() / 1000);
  const start = end - rangeSec, step = stepFor(rangeSec), view = f.view.value;
  // A submitted query goes into the URL, to be linked or reloaded.
  if (ev) history.replaceState(null, "", "?" + new URLSearchParams({ expr, range: rangeSec, view }));
  const ctl = new AbortController();
  running = ctl;
  const cancelButton = document.getElementById("cancel");
  cancelButton.disabled = false;
  document.body.dataset.state = "running";
  st.textContent = "running…";
  const t0 = performance.now();
  try {
    const body = view === "graph"
      ? await api("/api/v1/query_range", { query: expr, start, end, step }, ctl.signal)
      : await api("/api/v1/query", { query: expr, time: end }, ctl.signal);
    if (ctl.signal.aborted) throw new DOMException("cancelled as it arrived", "AbortError");
    showNotes("error", []);
    showNotes("warnings", (body.warnings || []).concat(body.infos || []));
    if (view === "graph" && body.data.resultType === "matrix") renderGraph(body.data, start, end, step);
    else renderTable(body.data);
    st.textContent = "took " + fmtDuration((performance.now() - t0) / 1000);
    document.body.dataset.state = "done";
  } catch (err) {
    if (running !== ctl) return; // a newer query owns the page now
    if (ctl.signal.aborted) {
      showNotes("error", []);
      showNotes("warnings", []);
      st.textContent = "cancelled after " + fmtDuration((performance.now() - t0) / 1000);
      document.body.dataset.state = "cancelled";
      return;
    }
    showNotes("error", [err.message]);
    showNotes("warnings", err.warnings || []);
    document.getElementById("result").replaceChildren();
    st.textContent = "";
    document.body.dataset.state = "error";
  } finally {
    if (running === ctl) {
      running = null;
      cancelButton.disabled = true;
    }
  }
}

// The expression, range and view come from the URL, so a query can be
// linked (the cardinality page links metric names here).
function init() {
  const f = document.getElementById("query-form");
  const q = new URLSearchParams(location.search);
  if (q.get("expr")) f.expr.value = q.get("expr");
  if (q.get("range")) f.range.value = q.get("range");
  if (q.get("view")) for (const r of f.view) r.checked = r.value === q.get("view");
  f.addEventListener("submit", run);
  document.getElementById("cancel").addEventListener("click", (e) => { e.preventDefault(); cancel(); });
  f.expr.addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) run(e); });
  if (f.expr.value) run();
}

init();
