// Tessera's operator console: polls /api/v1/console/cluster every 2 s and
// draws it; placement changes go to the placement API after a
// confirmation. No dependencies, no build step. Data from the server is
// put into the page as text only (textContent), never as HTML.
"use strict";

const POLL_MS = 2000;
const PLACEMENT = "/api/v1/services/tessera/placement";
const STATE = { A: "AVAILABLE", I: "INITIALIZING", L: "LEAVING" };
const COLORS = {};

function color(name) {
  if (!COLORS[name]) COLORS[name] = getComputedStyle(document.documentElement).getPropertyValue("--" + name).trim();
  return COLORS[name];
}

function fmtRate(x) { return fmtCount(x); }

// drawShards paints one cell per shard, 64 to a row: not-held cells are
// small, moving cells (INITIALIZING, LEAVING) fill their square, so a
// moving shard stands out even among thousands. A node that does not
// answer its health probe serves none of its shards: they are drawn as
// unavailable, whatever the placement says.
function drawShards(canvas, shards, down) {
  const cols = 64, cell = 4;
  const rows = Math.ceil(shards.length / cols);
  canvas.width = cols * cell;
  canvas.height = rows * cell;
  const g = canvas.getContext("2d");
  g.fillStyle = "#fff";
  g.fillRect(0, 0, canvas.width, canvas.height);
  for (let i = 0; i < shards.length; i++) {
    const x = (i % cols) * cell, y = Math.floor(i / cols) * cell, s = shards[i];
    if (down && s !== ".") { g.fillStyle = color("down"); g.fillRect(x, y, cell - 1, cell - 1); }
    else if (s === "A") { g.fillStyle = color("A"); g.fillRect(x, y, cell - 1, cell - 1); }
    else if (s === "I" || s === "L") { g.fillStyle = color(s); g.fillRect(x, y, cell, cell); }
    else { g.fillStyle = color("none"); g.fillRect(x, y, cell - 1, cell - 1); }
  }
}

function badge(probe, label) {
  let cls = "unk", text = label + " ?";
  if (probe.checked) {
    if (probe.ok) { cls = "ok"; text = label; }
    else if (probe.status) { cls = "warn"; text = "not " + label + " (" + probe.status + ")"; }
    else { cls = "bad"; text = label + ": no answer"; }
  }
  return el("span", { class: "badge " + cls }, text);
}

function renderInstance(inst, self) {
  const c = inst.counts;
  const down = inst.health.checked && !inst.health.ok;
  const canvas = el("canvas", { title: inst.id + ": " + inst.shards.length + " shards" + (down ? " (node down: unavailable)" : "") });
  drawShards(canvas, inst.shards, down);
  const moving = [];
  for (const [src, n] of Object.entries(inst.sources || {})) moving.push(n + " from " + src);
  const reason = inst.ready.reason || inst.health.reason || "";
  return el("div", {
      class: "instance" + (down ? " down" : ""), "data-instance": inst.id, "data-down": down,
      "data-initializing": c.INITIALIZING, "data-available": c.AVAILABLE, "data-leaving": c.LEAVING,
      "data-healthy": inst.health.ok, "data-ready": inst.ready.ok,
    },
    el("div", { class: "name" }, inst.id, inst.id === self ? el("span", { class: "muted" }, " (this node)") : "",
      inst.leaving ? el("span", { class: "muted" }, " leaving") : ""),
    el("div", { class: "muted" }, inst.endpoint + (inst.httpEndpoint ? "  ·  http " + inst.httpEndpoint : "")),
    el("div", {}, badge(inst.health, "healthy"), badge(inst.ready, "ready")),
    canvas,
    el("div", { class: "counts" },
      el("span", { class: "A" }, "AVAILABLE ", el("b", { class: "count", "data-state": "AVAILABLE" }, c.AVAILABLE)),
      el("span", { class: "I" }, "INIT ", el("b", { class: "count", "data-state": "INITIALIZING" }, c.INITIALIZING)),
      el("span", { class: "L" }, "LEAVING ", el("b", { class: "count", "data-state": "LEAVING" }, c.LEAVING))),
    down ? el("div", { class: "reason error" }, "node down: its shards are unavailable") : "",
    moving.length ? el("div", { class: "reason" }, "moving in: " + moving.join(", ")) : "",
    inst.ready.bootstrap ? renderBootstrap(inst.ready.bootstrap) : el("div", { class: "reason" }, reason),
    (inst.ready.damage || []).length ? el("div", { class: "reason error" }, "damage: " + inst.ready.damage.join("; ")) : "");
}

// renderBootstrap draws an instance's bootstrap progress from its /ready
// (bootstrap.Progress): a bar of the round's shards and the numbers.
function renderBootstrap(p) {
  const frac = p.roundShards ? p.roundStreamed / p.roundShards : 0;
  const bar = el("div", { class: "progress" }, el("i", {}));
  bar.firstChild.style.width = (100 * frac).toFixed(1) + "%";
  const eta = p.etaNs < 0 ? "time left unknown" : "about " + fmtDuration(p.etaNs / 1e9) + " left";
  return el("div", { class: "bootstrap", "data-bootstrap-running": p.running },
    el("div", { class: "reason" }, p.running
      ? "bootstrapping: " + p.roundStreamed + "/" + p.roundShards + " shards streamed this round"
      : "bootstrap: waiting for the next round (" + p.shardsDone + "/" + p.shardsTotal + " shards done)"),
    bar,
    el("div", { class: "reason" },
      el("b", { "data-bootstrap-samples": p.samples }, fmtCount(p.samples)), " samples, ",
      el("b", { "data-bootstrap-bytes": p.bytes }, fmtBytes(p.bytes)), " in " + fmtDuration(p.elapsedNs / 1e9) +
      " (" + fmtBytes(p.bytesPerSecond) + "/s, " + fmtCount(p.samplesPerSecond) + " samples/s)" + (p.running ? ", " + eta : "")));
}

function renderGroups(data) {
  const groups = new Map();
  for (const inst of data.instances) {
    const g = inst.isolationGroup || "(none)";
    if (!groups.has(g)) groups.set(g, []);
    groups.get(g).push(inst);
  }
  const out = [];
  for (const [name, list] of groups) {
    out.push(el("div", { class: "group", "data-group": name },
      el("h3", {}, "isolation group " + name),
      el("div", { class: "instances" }, ...list.map((i) => renderInstance(i, data.self)))));
  }
  document.getElementById("groups").replaceChildren(...out);
}

function renderSummary(data) {
  const s = document.getElementById("summary");
  const p = data.placement;
  if (!p) {
    s.replaceChildren(el("span", { class: "error" }, "no placement: " + (data.placementError || "none yet")));
    return;
  }
  const item = (label, value, id) => el("span", {}, label + " ", el("b", { id }, value));
  s.replaceChildren(
    item("placement version", p.version, "version"),
    item("shards", p.numShards, "num-shards"),
    item("replica factor", p.replicaFactor, "rf"),
    item("instances", data.instances.length, "num-instances"),
    item("shards moving", p.moving, "moving"),
    data.placementSource !== "etcd"
      ? el("span", { class: "error" }, "from this node's cache: " + (data.placementError || "")) : "");
}

function renderRates(r) {
  const e = document.getElementById("rates");
  if (r.error) { e.replaceChildren(el("span", { class: "error" }, r.error)); return; }
  if (!r.known) { e.textContent = "measuring…"; return; }
  e.classList.remove("muted");
  const win = r.windowSeconds >= 59 ? "last 1 m" : "last " + fmtDuration(r.windowSeconds) + ", since the node started";
  document.getElementById("rates-window").textContent = "(" + win + ")";
  e.replaceChildren(el("table", {},
    el("tr", {}, el("td", {}, "remote write"), el("td", {}, el("b", { id: "rate-ingest" }, fmtRate(r.ingestSamplesPerSecond)), " samples/s")),
    el("tr", {}, el("td", {}, "stored (all replicas here)"), el("td", {}, el("b", {}, fmtRate(r.storedSamplesPerSecond)), " samples/s")),
    el("tr", {}, el("td", {}, "query API requests"), el("td", {}, el("b", { id: "rate-queries" }, fmtRate(r.queriesPerSecond)), " /s"))));
}

function renderHints(h) {
  const e = document.getElementById("hints");
  if (!h) { e.textContent = "not available"; return; }
  if (!h.enabled) { e.textContent = "hinted handoff is off"; return; }
  if (!h.targets.length) { e.textContent = "no hints waiting"; return; }
  e.classList.remove("muted");
  e.replaceChildren(el("table", {},
    el("tr", {}, el("th", {}, "target"), el("th", {}, "records"), el("th", {}, "bytes"), el("th", {}, "oldest")),
    ...h.targets.map((t) => el("tr", { "data-hint-target": t.target },
      el("td", {}, t.target), el("td", {}, fmtCount(t.records)), el("td", {}, fmtBytes(t.bytes)),
      el("td", {}, t.oldestAgeSeconds != null ? fmtDuration(t.oldestAgeSeconds) : "–")))));
}

function renderRepair(data) {
  const e = document.getElementById("repair");
  if (!data.repair) { e.setAttribute("data-available", "false"); e.textContent = "not available"; e.title = data.repairError || ""; return; }
  e.setAttribute("data-available", "true");
  e.classList.remove("muted");
  const r = data.repair, p = r.pass || {}, t = r.total || {};
  const rows = [
    ["state", !r.enabled ? "off" : r.running ? "pass " + p.number + " running" : "idle" + (r.compareOnly ? " (compare only)" : "")],
    ["every", fmtDuration(r.everyNs / 1e9)],
    ["pass", (p.number || 0) + ": " + (p.shardsDone || 0) + "/" + (p.shardsTotal || 0) + " shards"],
    ["started", fmtTime(p.started)],
    ["finished", fmtTime(p.finished)],
    ["blocks compared / differing", fmtCount(t.blocksCompared || 0) + " / " + fmtCount(t.blocksDiffering || 0)],
    ["series repaired", fmtCount(t.seriesRepaired || 0) + " (" + fmtCount(t.samplesRepaired || 0) + " samples)"],
    ["pulled", fmtBytes(t.bytes || 0)],
    ["errors", fmtCount(t.errors || 0)],
  ];
  e.replaceChildren(el("table", { id: "repair-table" },
    ...rows.map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, el("b", {}, v))))));
}

// renderInsecure shows, above everything, the surfaces this node serves
// beyond loopback without authentication (security.allowInsecure).
function renderInsecure(list) {
  const e = document.getElementById("insecure");
  if (!list || list.length === 0) { e.hidden = true; return; }
  e.hidden = false;
  e.textContent = "INSECURE: security.allowInsecure is on and this node listens beyond loopback without authentication on: " +
    list.map((s) => s.surface + " (" + s.listen + ")").join(", ") + ". Anyone who reaches these can read, write or change the cluster.";
}

// renderBackup shows this node's backup upload (parts done of parts,
// bytes uploaded, parts already in the bucket) and restore progress.
function renderBackup(data) {
  const e = document.getElementById("backup");
  const b = data.backup, r = data.restore;
  const rows = [];
  if (b && b.snapshot) {
    const p = b.progress || {};
    const bar = el("div", { class: "progress" }, el("i", {}));
    bar.style.width = "120px";
    bar.firstChild.style.width = (p.parts ? 100 * (p.done || 0) / p.parts : 0).toFixed(1) + "%";
    rows.push(el("tr", { "data-backup-running": String(!!b.running) },
      el("td", {}, "upload " + b.snapshot + (b.running ? " (running)" : "")),
      el("td", {}, (p.done || 0) + "/" + (p.parts || 0) + " parts"),
      el("td", { "data-backup-done": p.done || 0, "data-backup-parts": p.parts || 0 }, bar),
      el("td", {}, (p.uploaded || 0) + " uploaded, " + fmtBytes(p.bytesUploaded || 0)),
      el("td", {}, (p.skipped || 0) + " already in the bucket"),
      el("td", {}, b.error || "")));
  }
  if (r && r.enabled) {
    const x = r.report || {};
    rows.push(el("tr", { "data-restore": "true" },
      el("td", {}, "restore " + x.backup),
      el("td", {}, (x.shardsDone || 0) + " shards"),
      el("td", {}, (x.parts || 0) + " parts, " + fmtBytes(x.bytes || 0)),
      el("td", {}, (x.samples || 0) + " samples"),
      el("td", {}, (x.damaged || []).length + " damaged")));
  }
  if (!rows.length) { e.textContent = "no backup upload or restore on this node"; return; }
  e.classList.remove("muted");
  e.replaceChildren(el("table", {}, ...rows));
}

let failures = 0;
async function poll() {
  const st = document.getElementById("status");
  try {
    const resp = await fetch("/api/v1/console/cluster", { credentials: "same-origin", cache: "no-store" });
    if (!resp.ok) throw new Error("HTTP " + resp.status + " " + (await resp.text()).trim());
    const data = await resp.json();
    document.getElementById("self").textContent = "console of " + data.self;
    renderInsecure(data.insecureSurfaces);
    renderSummary(data);
    renderGroups(data);
    renderRates(data.rates);
    renderHints(data.hints);
    renderRepair(data);
    renderBackup(data);
    failures = 0;
    st.className = "muted";
    st.textContent = "updated " + new Date().toLocaleTimeString("en-GB");
    document.body.dataset.loaded = "1";
    document.body.dataset.version = data.placement ? data.placement.version : "";
  } catch (err) {
    failures++;
    st.className = "error";
    st.textContent = "cannot read the cluster (" + failures + "): " + err.message;
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

// Placement changes: each form becomes one request, shown in the
// confirmation dialog before it is sent.
function instanceFrom(f) {
  return {
    id: f.id.value.trim(), isolationGroup: f.isolationGroup.value.trim(), zone: f.zone.value.trim(),
    weight: f.weight ? Number(f.weight.value) || 1 : 1,
    endpoint: f.endpoint.value.trim(), httpEndpoint: f.httpEndpoint.value.trim(),
  };
}

function requestFor(action, f) {
  const force = f.force && f.force.checked;
  switch (action) {
    case "add":
      return { method: "POST", url: PLACEMENT, body: { instances: [instanceFrom(f)], force } };
    case "remove":
      return { method: "DELETE", url: PLACEMENT + "/" + encodeURIComponent(f.id.value.trim()) + (force ? "?force=true" : "") };
    case "replace":
      return { method: "POST", url: PLACEMENT + "/replace", body: { leaving: [f.leaving.value.trim()], instances: [instanceFrom(f)], force } };
    case "mark-available": {
      const shards = f.shards.value.split(",").map((s) => s.trim()).filter((s) => s !== "").map(Number);
      if (shards.some((n) => !Number.isInteger(n) || n < 0)) throw new Error("shards: give shard numbers separated by commas");
      return { method: "POST", url: PLACEMENT + "/mark-available", body: { instance: f.instance.value.trim(), shards } };
    }
  }
  throw new Error("unknown action " + action);
}

function confirmRequest(req) {
  const dlg = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent =
    req.method + " " + req.url + (req.body ? "\n" + JSON.stringify(req.body, null, 2) : "");
  return new Promise((resolve) => {
    dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), { once: true });
    dlg.showModal();
  });
}

async function runAction(ev) {
  ev.preventDefault();
  const f = ev.target, out = document.getElementById("action-result");
  let req;
  try { req = requestFor(f.dataset.action, f); } catch (err) { out.className = "error"; out.textContent = err.message; return; }
  if (!(await confirmRequest(req))) { out.className = "muted"; out.textContent = "cancelled"; return; }
  out.className = "muted";
  out.textContent = req.method + " " + req.url + " …";
  try {
    const resp = await fetch(req.url, {
      method: req.method, credentials: "same-origin",
      headers: req.body ? { "Content-Type": "application/json" } : {},
      body: req.body ? JSON.stringify(req.body) : undefined,
    });
    const text = await resp.text();
    let msg = text;
    try { const j = JSON.parse(text); msg = j.error ? j.error : "done: placement version " + j.version; } catch (_) { /* not JSON */ }
    out.className = resp.ok ? "" : "error";
    out.textContent = resp.status + ": " + msg.trim();
  } catch (err) {
    out.className = "error";
    out.textContent = err.message;
  }
}

for (const f of document.querySelectorAll("form[data-action]")) f.addEventListener("submit", runAction);
poll();
