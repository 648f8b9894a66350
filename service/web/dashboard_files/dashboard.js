/* The operator dashboard: reads the service's API with an operator bearer token and draws it.
   Every request goes to this page's own service, relative to where the page is served
   (/dashboard/ under the service's root, which a reverse proxy may put under a prefix such as
   /wai/: docs/operations.md), never to an absolute /v1 path; every value from the API is written with
   textContent, never as HTML. A 401 or 403 sends the user back to the login view. */
"use strict";

const TOKEN_KEY = "wai-dispatch.token";
const $ = (id) => document.getElementById(id);
let timeChart = null;
let generation = 0; // a newer load supersedes an older one still in flight

class AuthError extends Error {}

function token() { return sessionStorage.getItem(TOKEN_KEY); }

// The service's root: the folder above this page's (…/dashboard/ → …/).
const API_ROOT = new URL("../", window.location.href);

async function api(path, params) {
  const url = new URL(path, API_ROOT); // path is relative: "v1/…"
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== null && v !== undefined && v !== "") url.searchParams.set(k, v);
  }
  const res = await fetch(url, { headers: { Authorization: "Bearer " + token() } });
  if (res.status === 401 || res.status === 403) {
    let detail = "";
    try { detail = (await res.json()).error.message; } catch (e) { /* no JSON body */ }
    throw new AuthError(res.status + (detail ? ": " + detail : ""));
  }
  if (res.status === 404) return null;
  if (!res.ok) throw new Error(path + " answered " + res.status);
  return res.json();
}

function showLogin(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  $("dash-view").hidden = true;
  $("logout").hidden = true;
  $("login-view").hidden = false;
  $("login-message").textContent = message || "";
  $("token").value = "";
  $("token").focus();
}

function showDashboard() {
  $("login-view").hidden = true;
  $("dash-view").hidden = false;
  $("logout").hidden = false;
  load();
}

function filters() {
  const range = $("f-range").value;
  let since = null, until = null;
  if (range === "custom") {
    since = $("f-since").value ? new Date($("f-since").value).getTime() : null;
    until = $("f-until").value ? new Date($("f-until").value).getTime() : null;
  } else {
    until = Date.now();
    since = until - Number(range) * 1000;
  }
  return {
    since_ms: since, until_ms: until,
    sink_class: $("f-class").value, sink: $("f-sink").value.trim(),
    capability: $("f-capability").value.trim(), set: $("f-set").value.trim(),
  };
}

function bucketFor(f) {
  const span = ((f.until_ms || Date.now()) - (f.since_ms || 0)) / 1000;
  for (const b of [60, 300, 900, 3600, 21600, 86400]) if (span / b <= 96) return b;
  return 7 * 86400;
}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function meterCell(value, max, label) {
  const td = el("td", null, "num");
  const bar = el("span", null, "meter");
  bar.style.width = (max > 0 ? Math.round((80 * value) / max) : 0) + "px";
  td.append(bar, label);
  return td;
}

function fill(tableId, rows, empty) {
  const body = document.querySelector("#" + tableId + " tbody");
  body.replaceChildren();
  if (!rows.length) {
    const tr = el("tr");
    const td = el("td", empty || "nothing in this range", "note");
    td.colSpan = document.querySelectorAll("#" + tableId + " thead th").length;
    tr.append(td);
    body.append(tr);
    return;
  }
  for (const cells of rows) {
    const tr = el("tr");
    for (const c of cells) tr.append(c instanceof Node ? c : el("td", c));
    body.append(tr);
  }
}

function when(ms) { return new Date(ms).toISOString().replace("T", " ").slice(0, 19); }
function short(digest) { return digest ? digest.slice(0, 12) + "…" : "—"; }

function drawTime(summary, f) {
  // Every bucket of the range is drawn, the empty ones at zero, so the axis is the range chosen.
  const step = summary.bucket_s * 1000;
  const counts = new Map(summary.over_time.map((b) => [b.start_ms, b]));
  const first = summary.over_time.length ? summary.over_time[0].start_ms : Date.now();
  const last = summary.over_time.length ? summary.over_time[summary.over_time.length - 1].start_ms : first;
  const lo = Math.min(first, f.since_ms === null ? first : f.since_ms - (f.since_ms % step));
  const hi = Math.max(last, f.until_ms === null ? last : f.until_ms - (f.until_ms % step));
  const xs = [], decoded = [], refused = [];
  for (let t = lo, n = 0; t <= hi && n < 2000; t += step, n++) {
    const b = counts.get(t) || {};
    xs.push(t / 1000);
    decoded.push(b.decoded || 0);
    refused.push(b.refused || 0);
  }
  const box = $("chart-time");
  if (timeChart) timeChart.destroy();
  box.replaceChildren();
  timeChart = new uPlot({
    width: Math.max(320, box.clientWidth - 8), height: 240,
    scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max)] } },
    series: [{}, { label: "decoded", stroke: "#2f7d4a", width: 2 },
             { label: "refused (no path ran)", stroke: "#b3372f", width: 2 }],
    axes: [{}, { label: "decodes per " + summary.bucket_s + " s" }],
  }, [xs, decoded, refused], box);
}

function drawSummary(s, f) {
  $("total").textContent = s.reports + " reports";
  drawTime(s, f);
  const maxPath = Math.max(0, ...s.by_path.map((r) => r.count));
  fill("t-paths", s.by_path.map((r) => [
    r.path || "none ran", r.tier || "—", meterCell(r.count, maxPath, r.count)]));
  const codes = Object.entries(s.refusals);
  const maxCode = Math.max(0, ...codes.map(([, n]) => n));
  fill("t-refusals", codes.map(([code, n]) => [code, meterCell(n, maxCode, n)]), "no path refused");
  fill("t-placement", Object.entries(s.placement).map(([unit, share]) =>
    [unit, meterCell(share, 1, (100 * share).toFixed(1) + " %")]));
}

function drawGovernance(g) {
  if (!g) {
    $("policy-line").textContent = "this service keeps no run reports";
    fill("t-classes", []);
    fill("t-runs", []);
    return;
  }
  $("policy-line").textContent = g.policy
    ? "policy v" + g.policy.version + ", set by " + g.policy.set_by + " at " + when(g.policy.set_ms)
    : "no model policy is set";
  const select = $("f-class");
  const chosen = select.value;
  select.replaceChildren(el("option", "all"));
  select.firstChild.value = "";
  for (const c of g.classes) {
    const opt = el("option", c.class);
    opt.value = c.class;
    select.append(opt);
  }
  select.value = chosen;
  fill("t-classes", g.classes.map((c) => {
    const n = c.runs_accepted + c.runs_refused;
    return [c.class, el("td", c.runs_accepted, "num"), el("td", c.runs_refused, "num refused"),
            meterCell(c.runs_accepted, n, n ? (100 * c.runs_accepted / n).toFixed(1) + " %" : "—")];
  }), "no sink class");
  fill("t-runs", g.latest_refused.map((r) => {
    const list = el("ul");
    for (const reason of r.reasons) {
      list.append(el("li", "decode " + reason.index + " · " + reason.rule + " · " + reason.message));
    }
    const td = el("td");
    td.append(list);
    return [when(r.received_ms), r.id, r.sink, r.class || "(none)", "v" + r.policy_version, td];
  }), "no refused run report");
}

function drawDecodes(page) {
  const items = page.items;
  fill("t-decodes", items.map((r) => [
    when(r.time_ms), r.sink, r.capability, r.path || "none ran", r.tier || "—",
    el("td", r.outcome, r.outcome), el("td", short(r.set), "mono")]));
  const rows = document.querySelectorAll("#t-decodes tbody tr");
  items.forEach((r, i) => {
    rows[i].dataset.id = r.id;
    rows[i].addEventListener("click", () => openDetail(r.id));
  });
  for (const [list, key] of [["l-sink", "sink"], ["l-capability", "capability"], ["l-set", "set"]]) {
    const values = [...new Set(items.map((r) => r[key]).filter(Boolean))].sort();
    $(list).replaceChildren(...values.map((v) => { const o = el("option"); o.value = v; return o; }));
  }
}

async function openDetail(id) {
  try {
    const r = await api("v1/reports/" + encodeURIComponent(id));
    if (!r) return;
    $("d-id").textContent = r.id;
    $("d-sink").textContent = r.sink;
    $("d-source").textContent = r.source === "sink" ? "reported by the sink (run report " + r.run_report + ")" : "decoded by this service";
    $("d-set").textContent = r.set || "—";
    $("d-symbols").textContent = r.symbols_digest || "—";
    $("d-report").textContent = JSON.stringify(r.report, null, 2);
    $("detail").hidden = false;
    $("detail").scrollIntoView({ block: "nearest" });
  } catch (e) { failed(e); }
}

function failed(e) {
  if (e instanceof AuthError) showLogin("The service refused the token (" + e.message + "). Log in again.");
  else $("status").textContent = "Could not load: " + e.message;
}

async function load() {
  const mine = ++generation;
  const f = filters();
  $("status").textContent = "loading…";
  try {
    const [summary, page, governance] = await Promise.all([
      api("v1/reports/summary", { ...f, bucket_s: bucketFor(f) }),
      api("v1/reports", { ...f, limit: 25 }),
      api("v1/run-reports/summary", { since_ms: f.since_ms, until_ms: f.until_ms,
                                        sink_class: f.sink_class, sink: f.sink }),
    ]);
    if (mine !== generation) return;
    drawSummary(summary, f);
    drawDecodes(page);
    drawGovernance(governance);
    $("status").textContent = "updated " + when(Date.now()) + " UTC";
    performance.mark("dashboard-rendered");
  } catch (e) {
    if (mine === generation) failed(e);
  }
}

$("login-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
  showDashboard();
});
$("logout").addEventListener("click", () => showLogin(""));
$("filters").addEventListener("submit", (ev) => { ev.preventDefault(); load(); });
$("f-range").addEventListener("change", () => {
  $("filters").classList.toggle("custom-range", $("f-range").value === "custom");
});
$("f-class").addEventListener("change", load);
$("d-close").addEventListener("click", () => { $("detail").hidden = true; });

if (token()) showDashboard(); else showLogin("");
