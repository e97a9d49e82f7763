// The cardinality page: /api/v1/status/tsdb (the series of the block
// holding now, counted once each across the cluster) as tables with
// bars, and the series each node holds, from the per-shard counts and
// the placement (/api/v1/console/cluster).
"use strict";

async function getJSON(path) {
  const resp = await fetch(path, { credentials: "same-origin", cache: "no-store" });
  const text = await resp.text();
  let body;
  try { body = JSON.parse(text); } catch (_) { throw new Error(path + ": HTTP " + resp.status + " " + text.trim()); }
  if (!resp.ok || body.status === "error") throw new Error(path + ": " + (body.error || "HTTP " + resp.status));
  return body;
}

// barTable draws [{name, value}] with a bar scaled to the largest; link,
// when given, makes each name a link (set as an attribute, not HTML).
function barTable(id, stats, unit, link) {
  const max = Math.max(1, ...stats.map((s) => s.value));
  if (!stats.length) return el("p", { class: "muted" }, "none");
  return el("table", { class: "bars", id },
    ...stats.map((s) => {
      const bar = el("i", {});
      bar.style.width = (100 * s.value / max).toFixed(1) + "%";
      let name = s.name;
      if (link) { name = el("a", {}, s.name); name.setAttribute("href", link(s.name)); }
      return el("tr", { "data-name": s.name, "data-value": s.value },
        el("td", { class: "name" }, name),
        el("td", { class: "num" }, unit === "bytes" ? fmtBytes(s.value) : fmtCount(s.value)),
        el("td", { class: "bar" }, bar));
    }));
}

// perNode adds up the series of the shards each instance holds.
function perNode(cluster, byShard) {
  return (cluster.instances || []).map((inst) => {
    let n = 0;
    for (let sh = 0; sh < inst.shards.length; sh++) if (inst.shards[sh] !== "." && byShard[sh]) n += byShard[sh];
    return { name: inst.id, value: n };
  });
}

async function load() {
  const st = document.getElementById("status");
  const limit = document.getElementById("limit").value;
  try {
    const [tsdb, cluster] = await Promise.all([getJSON("/api/v1/status/tsdb?limit=" + limit), getJSON("/api/v1/console/cluster")]);
    const d = tsdb.data, h = d.headStats;
    const item = (label, value, id) => el("span", {}, label + " ", el("b", { id }, value));
    document.getElementById("head").replaceChildren(
      item("namespace", d.namespace, "namespace"),
      item("active series", fmtCount(h.numSeries), "num-series"),
      item("label pairs", fmtCount(h.numLabelPairs), "num-pairs"),
      item("block", h.minTime ? new Date(h.minTime).toLocaleString("en-GB") + " – " + new Date(h.maxTime + 1).toLocaleTimeString("en-GB") : "–", "block"),
      cluster.placement ? item("replica factor", cluster.placement.replicaFactor, "rf") : "");
    document.body.dataset.numSeries = h.numSeries;
    const q = (expr) => "/console/query.html?" + new URLSearchParams({ expr, view: "table" });
    document.getElementById("per-node").replaceChildren(barTable("per-node-table", perNode(cluster, d.seriesCountByShard || {}), "series"));
    document.getElementById("by-metric").replaceChildren(barTable("metric-table", d.seriesCountByMetricName, "series",
      (name) => q("count by (job) ({__name__=" + JSON.stringify(name) + "})")));
    document.getElementById("by-label").replaceChildren(barTable("label-table", d.labelValueCountByLabelName, "values",
      (name) => q("count(count by (" + name + ") ({" + name + '!=""}))')));
    document.getElementById("by-pair").replaceChildren(barTable("pair-table", d.seriesCountByLabelValuePair, "series"));
    document.getElementById("by-memory").replaceChildren(barTable("memory-table", d.memoryInBytesByLabelName, "bytes"));
    st.className = "muted";
    st.textContent = "counted " + new Date().toLocaleTimeString("en-GB");
    document.body.dataset.loaded = "1";
  } catch (err) {
    st.className = "error";
    st.textContent = err.message;
  }
}

document.getElementById("limit").addEventListener("change", load);
load();
