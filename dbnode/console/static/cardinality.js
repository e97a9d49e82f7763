// The cardinality page: /api/v1/status/tsdb (the series of the block
// holding now, counted once each across the cluster) as tables with
// bars, and the series each node holds, per namespace and in all, from
// the per-shard counts and the placement (/api/v1/console/cluster).
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

// held adds up the series of the shards inst holds.
function held(inst, byShard) {
  let n = 0;
  for (let sh = 0; sh < inst.shards.length; sh++) if (inst.shards[sh] !== "." && byShard[sh]) n += byShard[sh];
  return n;
}

// perNode is the series each instance holds, all namespaces together
// when the API listed them (else the queried namespace's).
function perNode(cluster, d) {
  const nss = d.namespaces && d.namespaces.length ? d.namespaces : [{ seriesCountByShard: d.seriesCountByShard || {} }];
  return (cluster.instances || []).map((inst) => ({
    name: inst.id, value: nss.reduce((n, ns) => n + held(inst, ns.seriesCountByShard || {}), 0),
  }));
}

// nodeByNamespace is a table of the series each instance holds of each
// namespace, with the cluster's count of distinct series as the last
// row; each count cell carries data-node, data-namespace, data-value.
function nodeByNamespace(cluster, namespaces) {
  if (!namespaces || !namespaces.length) return el("p", { class: "muted" }, "no namespaces listed");
  const cell = (node, ns, v) => el("td", { class: "num", "data-node": node, "data-namespace": ns, "data-value": v }, fmtCount(v));
  return el("table", { class: "grid-table", id: "node-namespace-table" },
    el("tr", {}, el("th", {}, "node"), ...namespaces.map((ns) => el("th", { class: "num" }, ns.namespace))),
    ...(cluster.instances || []).map((inst) => el("tr", {}, el("td", { class: "name" }, inst.id),
      ...namespaces.map((ns) => cell(inst.id, ns.namespace, held(inst, ns.seriesCountByShard || {}))))),
    el("tr", { class: "total" }, el("td", { class: "name" }, "cluster (each series once)"),
      ...namespaces.map((ns) => cell("", ns.namespace, ns.numSeries))));
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
    document.getElementById("per-node").replaceChildren(barTable("per-node-table", perNode(cluster, d), "series"));
    document.getElementById("per-namespace").replaceChildren(nodeByNamespace(cluster, d.namespaces));
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
