// The rmqc status page: fetches status.json every second and draws it. Hand-written, no library.
// Everything a broker or operator named (groups, addresses, remarks) is set as text, never as markup.
"use strict";

const REFRESH_MS = 1000;
const PAGE_ROWS = 50;          // broker groups per page: 10,000 of them are paged, not all drawn
const FAILOVER_ROWS = 50;      // the newest failovers listed under the timeline
const TIMELINE_BUCKETS = 100;

const view = { doc: null, groups: [], page: 0, search: "", filter: "all", lastOkMs: 0 };

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (key === "class") node.className = value;
    else if (key === "title") node.title = value;
    else node.dataset[key] = value;
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function cell(value, cls) { return el("td", cls ? { class: cls } : {}, value === null || value === undefined ? "-" : value); }

function clock(ms) { return new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC"); }

// ---- controller nodes (the table of `rmqc status`) ----

function leaderStatus(nodes) {
  const leader = nodes.find((v) => v.status && v.status.servingAsLeader);
  return leader ? leader.status : null;
}

function lagText(status, leader) {
  const behind = (status.commit || 0) - (status.applied || 0);
  const apply = behind ? ` (apply ${behind})` : "";
  if (leader && status.nodeId === leader.nodeId) return "leader" + apply;
  const progress = leader && leader.peers ? leader.peers[status.nodeId] : undefined;
  return (progress === undefined ? "?" : String(progress.lag)) + apply;
}

function readyText(status) {
  const failed = (status.health || []).filter((check) => !check.ok).map((check) => check.check);
  return failed.length ? `no (${failed.join(", ")})` : "yes";
}

function drawNodes(nodes) {
  const leader = leaderStatus(nodes);
  const rows = nodes.map((v) => {
    const s = v.status;
    if (!s) {
      return el("tr", { node: v.address }, cell("?"), cell(v.address), cell(v.error, "bad"),
        ...Array(8).fill(null).map(() => cell("-")), cell("no", "bad"));
    }
    const learner = leader && (leader.learners || []).includes(s.nodeId);
    const alarms = (s.alarms || []).map((a) => a.alarm).join(", ");
    const ready = readyText(s);
    return el("tr", { node: s.nodeId, role: learner ? "learner" : s.role },
      cell(s.nodeId), cell(v.address), cell(learner ? "learner" : s.role, s.servingAsLeader ? "leader" : ""),
      cell(s.term, "num"), cell(s.commit, "num"), cell(s.applied, "num"), cell(s.leader),
      cell(lagText(s, leader), "num"), cell(s.brokerGroups, "num"), cell(s.liveBrokers, "num"),
      cell(alarms || "none", alarms ? "bad" : "muted"), cell(ready, ready === "yes" ? "" : "bad"));
  });
  document.querySelector("#nodes tbody").replaceChildren(...rows);
}

// ---- failovers: a timeline (counts per time bucket) and the newest ones listed ----

function drawTimeline(failovers, nowMs) {
  const svg = document.getElementById("timeline");
  const axis = document.querySelectorAll("#timeline-axis span");
  if (!failovers.length) {
    svg.replaceChildren();
    axis[0].textContent = "no failover in the log this node holds";
    axis[1].textContent = "";
    return;
  }
  const startMs = failovers[0].timeMs;
  const spanMs = Math.max(nowMs - startMs, 1000);
  const counts = new Array(TIMELINE_BUCKETS).fill(0);
  for (const f of failovers) {
    const bucket = Math.min(TIMELINE_BUCKETS - 1, Math.floor(((f.timeMs - startMs) / spanMs) * TIMELINE_BUCKETS));
    counts[Math.max(0, bucket)] += 1;
  }
  const most = Math.max(...counts);
  const width = 1000 / TIMELINE_BUCKETS;
  const bars = [];
  counts.forEach((count, i) => {
    if (!count) return;
    const height = Math.max(4, (count / most) * 110);
    const bar = document.createElementNS("http://www.w3.org/2000/svg", "rect");
    bar.setAttribute("x", String(i * width + 1));
    bar.setAttribute("y", String(120 - height));
    bar.setAttribute("width", String(Math.max(2, width - 2)));
    bar.setAttribute("height", String(height));
    const title = document.createElementNS("http://www.w3.org/2000/svg", "title");
    title.textContent = `${count} failover(s) from ${clock(startMs + (i * spanMs) / TIMELINE_BUCKETS)}`;
    bar.append(title);
    bars.push(bar);
  });
  svg.replaceChildren(...bars);
  axis[0].textContent = clock(startMs);
  axis[1].textContent = clock(nowMs);
}

function masterText(id, address) { return id === null || id === undefined ? "none" : `${id} ${address || ""}`.trim(); }

function drawFailovers(failovers, nowMs) {
  drawTimeline(failovers, nowMs);
  document.getElementById("failover-count").textContent =
    `${failovers.length} kept; the newest ${Math.min(FAILOVER_ROWS, failovers.length)} below.`;
  const rows = failovers.slice(-FAILOVER_ROWS).reverse().map((f) =>
    el("tr", { group: f.group }, cell(clock(f.timeMs)), cell(f.group),
      cell(masterText(f.oldMasterId, f.oldMasterAddress)), cell(masterText(f.newMasterId, f.newMasterAddress)),
      cell(f.masterEpoch, "num"), cell(f.trigger), cell(f.index, "num")));
  document.querySelector("#failovers tbody").replaceChildren(...rows);
}

// ---- broker groups: sorted, searched, filtered and paged in the browser ----

function toGroups(doc) {
  const at = Object.fromEntries(doc.groupColumns.map((name, i) => [name, i]));
  const b = Object.fromEntries(doc.brokerColumns.map((name, i) => [name, i]));
  const groups = doc.groups.map((row) => {
    const brokers = row[at.brokers].map((x) => ({ id: x[b.id], address: x[b.address], ageMs: x[b.heartbeatAgeMs], alive: x[b.alive] }));
    const group = { name: row[at.name], cluster: row[at.cluster], masterId: row[at.masterId], masterEpoch: row[at.masterEpoch],
      syncStateSet: row[at.syncStateSet], syncStateSetEpoch: row[at.syncStateSetEpoch], brokers };
    group.text = [group.name, group.cluster, ...brokers.map((x) => x.address)].join(" ").toLowerCase();
    return group;
  });
  return groups.sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
}

const FILTERS = {
  all: () => true,
  "no-master": (g) => g.masterId === null,
  "partial-sync": (g) => g.syncStateSet.length < g.brokers.length,
  stale: (g) => g.brokers.some((x) => !x.alive),
};

function matching() {
  const words = view.search.toLowerCase().split(/\s+/).filter(Boolean);
  const keep = FILTERS[view.filter] || FILTERS.all;
  return view.groups.filter((g) => keep(g) && words.every((w) => g.text.includes(w)));
}

function ageText(ms) {
  if (ms === null || ms === undefined) return "never heard here";
  return ms < 1000 ? `${ms} ms ago` : `${(ms / 1000).toFixed(1)} s ago`;
}

function drawGroups() {
  const shown = matching();
  const pages = Math.max(1, Math.ceil(shown.length / PAGE_ROWS));
  view.page = Math.min(view.page, pages - 1);
  const first = view.page * PAGE_ROWS;
  const rows = shown.slice(first, first + PAGE_ROWS).map((g) => {
    const master = g.brokers.find((x) => x.id === g.masterId);
    const brokers = el("td", {}, ...g.brokers.map((x) =>
      el("span", { class: x.alive ? "broker" : "broker dead", title: x.alive ? "alive" : "not alive in this node's table" },
        `${x.id}${x.id === g.masterId ? "*" : ""} ${x.address}: ${ageText(x.ageMs)}`)));
    return el("tr", { group: g.name, master: g.masterId === null ? "" : String(g.masterId) },
      cell(g.name), cell(g.cluster),
      cell(g.masterId === null ? "none" : `${g.masterId} ${master ? master.address : ""}`.trim(), g.masterId === null ? "bad" : ""),
      cell(g.masterEpoch, "num"), cell(g.syncStateSet.join(", ")), cell(g.syncStateSetEpoch, "num"), brokers);
  });
  document.querySelector("#groups tbody").replaceChildren(...rows);
  document.getElementById("group-count").textContent = `(${shown.length} of ${view.groups.length})`;
  document.getElementById("page-info").textContent = shown.length
    ? `${first + 1}–${first + rows.length} of ${shown.length}, page ${view.page + 1}/${pages}` : "no group matches";
  document.getElementById("page-prev").disabled = view.page === 0;
  document.getElementById("page-next").disabled = view.page >= pages - 1;
}

// ---- the refresh loop ----

function draw(doc) {
  view.doc = doc;
  view.groups = toGroups(doc);
  document.getElementById("source").textContent = `node ${doc.nodeId}, as of ${clock(doc.generatedMs)}`;
  drawNodes(doc.nodes);
  drawFailovers(doc.failovers, doc.generatedMs);
  drawGroups();
  const build = doc.previousBuild;
  document.getElementById("build").textContent = build
    ? `Building the previous document held this node's event loop ${build.loopMs} ms in ${build.slices} slices (longest ${build.maxSliceMs} ms).`
    : "";
}

function showProblem(text) {
  const problem = document.getElementById("problem");
  problem.hidden = !text;
  problem.textContent = text || "";
  const badge = document.getElementById("refresh");
  badge.className = text ? "badge stale" : "badge live";
  badge.textContent = text ? "not refreshing" : "live";
}

async function refresh() {
  try {
    const answer = await fetch("status.json", { cache: "no-store" });
    if (!answer.ok) throw new Error(`status.json answered ${answer.status}: ${(await answer.text()).trim()}`);
    draw(await answer.json());
    view.lastOkMs = Date.now();
    showProblem("");
  } catch (error) {
    const since = view.lastOkMs ? ` (last update ${clock(view.lastOkMs)})` : "";
    showProblem(`${error.message || error}${since}`);
  } finally {
    setTimeout(refresh, REFRESH_MS);
  }
}

function wireControls() {
  document.getElementById("group-search").addEventListener("input", (event) => {
    view.search = event.target.value; view.page = 0; drawGroups();
  });
  document.getElementById("group-filter").addEventListener("change", (event) => {
    view.filter = event.target.value; view.page = 0; drawGroups();
  });
  document.getElementById("page-prev").addEventListener("click", () => { view.page -= 1; drawGroups(); });
  document.getElementById("page-next").addEventListener("click", () => { view.page += 1; drawGroups(); });
}

wireControls();
refresh();
