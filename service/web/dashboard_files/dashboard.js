/* The operator dashboard: reads the service's API with an operator bearer token and draws it
   (panels.js). Every request goes to this page's own service, relative to where the page is
   served (/dashboard/ under the service's root, which a reverse proxy may put under a prefix such
   as /wai/: docs/operations.md), never to an absolute /v1 path. What is shown (filters, time
   zone, refresh, pages, the decode or run report open) is in the URL's query string, so a view
   can be reloaded, bookmarked and shared; the token never is (sessionStorage). A 401 or 403
   sends the user back to the login view; any other failed refresh leaves the data shown, marked
   stale, until a refresh succeeds. Every list is paged by keyset (the API's `after`, the cursor
   of the page before): the cursors of the pages seen are kept per list, never an offset. */
"use strict";

const TOKEN_KEY = "wai-dispatch.token";
const { $, el, button, fill, pager, meterCell, num, copyButton, when, pct } = panels;
const PAGE = { sinks: 20, sets: 20, exact: 10, errors: 10, runs: 10, decodes: 25 };
const DEFAULTS = {
  range: "86400", since: "", until: "", class: "", sink: "", capability: "", set: "",
  tz: "utc", refresh: "30", sort: "sink", q: "", nothing: "", prefix: "", run: "", run_sink: "", decode: "",
};
const state = { ...DEFAULTS };
let generation = 0; // a newer load supersedes an older one still in flight
let timer = null;
let lastGood = null;
let cursors = [null]; // the decodes' pages: the cursor of each page seen, newest first
// the other lists' pages, the same way (each list's `after` of every page seen)
const pages = { sinks: [null], sets: [null], exact: [null], errors: [null], runs: [null] };
function firstPages() { for (const k of Object.keys(pages)) pages[k] = [null]; }
function after(list) { return pages[list][pages[list].length - 1]; }
function pageOf(list, t, navId, limit) {
  panels.keysetPager(navId, t.total, pages[list], t.items.length, t.next, load, limit);
}

class AuthError extends Error {}
// the API refused (422) one query parameter: `param` is its name (`sort`, `since_ms`, …)
class BadValue extends Error { constructor(param, message) { super(message); this.param = param; } }

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
  if (res.status === 422) {
    let detail = "";
    try { detail = (await res.json()).error.message; } catch (e) { /* no JSON body */ }
    const m = /^(?:query|path)\.(\w+)/.exec(detail);
    throw new BadValue(m ? m[1] : "", path + " answered 422" + (detail ? " (" + detail + ")" : ""));
  }
  if (!res.ok) throw new Error(path + " answered " + res.status);
  return res.json();
}

// --- the URL: every key of DEFAULTS that differs from its default ---
// What the API takes for each key: a key with a menu takes one of the menu's options (the
// page's own; the sinks' sorts are the API's SINK_SORTS); the others are sent to the API, and
// the service says what its parameters take (limits.json: the length limit and patterns the
// routes declare, service/web/dashboard.py). The times are the page's own form. A value refused
// here, or by the API (a 422 naming it), is dropped for its default with a notice, and the rest
// of the view loads.
const MENUS = { range: "f-range", tz: "f-tz", refresh: "f-refresh", sort: "sink-sort" };
const localTime = [(v) => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(v) && panels.parseLocal(v) !== null,
                   "not a date and time (YYYY-MM-DDTHH:MM)"];
const SHAPES = { since: localTime, until: localTime, nothing: [(v) => v === "1", "not 1"] };

// One check per key from the API's limits (a key the service did not describe: the API's 422
// is the check).
function takeLimits(limits) {
  for (const [k, { max_length: n, patterns }] of Object.entries(limits)) {
    const forms = (patterns || []).map((p) => new RegExp(p));
    SHAPES[k] = [(v) => (n == null || v.length <= n) && forms.every((re) => re.test(v)),
                 n != null && !(patterns || []).length ? "longer than " + n + " characters"
                   : "not what the API takes (" + [...(patterns || []), ...(n != null ? ["at most " + n + " characters"] : [])].join("; ") + ")"];
  }
}
// the API's parameter → the key of the URL it comes from
const PARAMS = { sort: "sort", desc: "sort", q: "q", decoded_nothing: "nothing", prefix: "prefix", sink_class: "class",
                 capability: "capability", set: "set", run_report: "run", report_id: "decode" };
const notices = [];

function why(k, v) {
  if (MENUS[k]) {
    const options = [...$(MENUS[k]).options].map((o) => o.value);
    return options.includes(v) ? null : "not one of " + options.join(", ");
  }
  const shape = SHAPES[k];
  return shape && !shape[0](v) ? shape[1] : null;
}

function drop(k, reason) {
  notices.push("ignored " + k + "=" + state[k] + ": " + reason);
  state[k] = DEFAULTS[k];
  $("notice").textContent = notices.join("; ") + ".";
  $("notice").hidden = false;
}

// The key of the URL behind a parameter the API refused (none: it is not one of the URL's).
function keyOf(param) {
  if (param === "sink") return state.run ? "run_sink" : "sink";
  if (param === "since_ms" || param === "until_ms") {
    return state.range !== "custom" ? "range" : param === "since_ms" ? "since" : "until";
  }
  return PARAMS[param] || null;
}

function readURL() {
  const q = new URLSearchParams(location.search);
  for (const k of Object.keys(DEFAULTS)) {
    state[k] = q.has(k) ? q.get(k) : DEFAULTS[k];
    const reason = state[k] === DEFAULTS[k] ? null : why(k, state[k]);
    if (reason) drop(k, reason);
  }
}

function writeURL() {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(state)) if (v !== DEFAULTS[k]) q.set(k, v);
  const search = q.toString();
  history.replaceState(null, "", location.pathname + (search ? "?" + search : ""));
}

function toForm() {
  $("f-range").value = state.range;
  $("filters").classList.toggle("custom-range", state.range === "custom");
  $("f-since").value = state.since;
  $("f-until").value = state.until;
  $("f-sink").value = state.sink;
  $("f-capability").value = state.capability;
  $("f-set").value = state.set;
  $("f-tz").value = state.tz;
  $("f-refresh").value = state.refresh;
  $("sink-sort").value = state.sort;
  $("sink-q").value = state.q;
  $("sink-nothing").checked = state.nothing === "1";
  $("set-prefix").value = state.prefix;
  panels.setZone(state.tz);
}

function filters() {
  let since = null, until = null;
  if (state.range === "custom") {
    since = panels.parseLocal(state.since);
    until = panels.parseLocal(state.until);
  } else {
    until = Date.now();
    since = until - Number(state.range) * 1000;
    // a day or more starts on an hour, a week or more on a day (UTC): whole hours and days are
    // read from the roll-ups, and only the current hour from the reports
    if (Number(state.range) >= 86400) since -= since % 3600000;
    if (Number(state.range) >= 604800) since -= since % 86400000;
  }
  return { since_ms: since, until_ms: until, sink_class: state.class, sink: state.sink,
           capability: state.capability, set: state.set };
}

function bucketFor(f) {
  const span = ((f.until_ms || Date.now()) - (f.since_ms || 0)) / 1000;
  // over six hours, buckets of whole hours (what the roll-ups count)
  for (const b of [60, 300, 900, 3600, 21600, 86400]) if (span / b <= 96 && (b >= 3600 || span <= 21600)) return b;
  return 7 * 86400;
}

// --- views ---
function showLogin(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  clearTimeout(timer);
  $("dash-view").hidden = true;
  $("header-controls").hidden = true;
  $("login-view").hidden = false;
  $("login-message").textContent = message || "";
  $("token").value = "";
  $("token").focus();
}

function showDashboard() {
  $("login-view").hidden = true;
  $("dash-view").hidden = false;
  $("header-controls").hidden = false;
  toForm();
  load();
}

function setFilter(key, value) {
  state[key] = value;
  firstPages();
  cursors = [null];
  toForm();
  load();
}

function drawSinks(t) {
  $("sinks-total").textContent = t.total + " sinks";
  const max = Math.max(0, ...t.items.map((r) => r.reports));
  fill("t-sinks", t.items.map((r) => [
    (() => { const td = el("td"); td.append(button(r.sink, () => setFilter("sink", r.sink))); return td; })(),
    r.class === null ? el("td", "unclassified", "muted") : r.class,
    meterCell(r.reports, max, r.reports),
    num(r.no_path_rate === null ? "—" : pct(r.no_path_rate) + " (" + r.no_path + ")", r.no_path ? "refused" : ""),
    num(r.request_errors, r.request_errors ? "refused" : ""),
    num(r.runs_accepted + " / " + r.runs_refused, r.runs_refused ? "refused" : ""),
    when(r.last_seen_ms)]), state.nothing ? "every sink decoded something in this range" : "no sink in this range");
  pageOf("sinks", t, "sinks-pager", PAGE.sinks);
}

function drawSets(t) {
  $("sets-total").textContent = t.total + " sets";
  fill("t-sets", t.items.map((r) => {
    const td = el("td", null, "digest");
    const pick = button(r.set, () => setFilter("set", r.set), "link mono");
    pick.setAttribute("aria-label", "filter by set " + r.set);
    const both = el("span");
    both.append(pick, copyButton(r.set, "set digest " + r.set.slice(0, 12)));
    td.append(both);
    return [td, r.name ? [r.name, r.version && "version " + r.version, r.capability].filter(Boolean).join(" · ") : "—",
            num(r.reports), num(r.no_path_rate === null ? "—" : pct(r.no_path_rate) + " (" + r.no_path + ")"),
            num(r.sinks), when(r.last_seen_ms)];
  }), "no set in this range");
  pageOf("sets", t, "sets-pager", PAGE.sets);
  $("l-set").replaceChildren(...t.items.map((r) => { const o = el("option"); o.value = r.set; return o; }));
}

/** A set digest (or its start) beside the set's version, where the registry has it. */
function withVersion(digest, version) {
  return version === null || version === undefined ? digest : digest + " (version " + version + ")";
}

/** The exact tier: per set and symbols digest, the distinct RGB digests of its integer decodes
 * (the API lists the groups with more than one first); a disagreement is marked in words and red. */
function drawExact(t) {
  $("exact-total").textContent = t.total + " payloads";
  const short = (d) => (d === null ? "—" : d.slice(0, 16) + "…");
  fill("t-exact", t.items.map((r) => {
    const rgb = r.rgb_digests === 0 ? "—" : r.rgb_digests === 1 ? short(r.rgb_least)
      : short(r.rgb_least) + " ≠ " + short(r.rgb_greatest) + (r.rgb_digests > 2 ? " (+" + (r.rgb_digests - 2) + ")" : "");
    const verdict = r.rgb_digests > 1 ? el("td", "DISAGREE: " + r.rgb_digests + " RGB digests", "refused exact-flag")
      : el("td", r.rgb_digests ? "agree" : "RGB not reported");
    const set = el("td", withVersion(short(r.set), r.set_version), "mono digest");
    set.title = r.set;
    const sym = el("td", short(r.symbols_digest), "mono digest");
    sym.title = r.symbols_digest;
    const rgbCell = el("td", rgb, "mono digest" + (r.rgb_digests > 1 ? " refused" : ""));
    return [verdict, set, sym, rgbCell, num(r.decodes), num(r.rgb_unknown), num(r.payloads), num(r.sinks), when(r.last_seen_ms)];
  }), "no exact-tier decode in this range");
  pageOf("exact", t, "exact-pager", PAGE.exact);
}

/** The class menu, from the summary without the class or sink filter: every class stays on offer
 * after one is chosen (the chosen one too, if no run in the window names it). */
function drawClassMenu(g) {
  const select = $("f-class");
  select.replaceChildren(el("option", "all"));
  select.firstChild.value = "";
  const names = g.classes.map((c) => c.class).filter((c) => c !== null);
  if (state.class && !names.includes(state.class)) names.push(state.class);
  for (const name of names) {
    const opt = el("option", name);
    opt.value = name;
    select.append(opt);
  }
  select.value = state.class;
}

function drawGovernance(g) {
  if (!g) {
    $("policy-line").textContent = "this service keeps no run reports";
    fill("t-classes", []);
    fill("t-runs", []);
    return;
  }
  $("policy-line").textContent = g.policy
    ? "policy v" + g.policy.version + ", set by " + g.policy.set_by + " at " + when(g.policy.set_ms) + " (" + panels.tzName() + ")"
    : "no model policy is set";
  fill("t-classes", g.classes.map((c) => {
    const n = c.runs_accepted + c.runs_refused;
    return [c.class === null ? el("td", "unclassified", "muted") : c.class,
            num(c.decodes), num(c.decodes_no_path, c.decodes_no_path ? "refused" : ""), num(c.runs_accepted),
            num(c.runs_refused, "refused"),
            meterCell(c.runs_accepted, n, n ? (100 * c.runs_accepted / n).toFixed(1) + " %" : "—")];
  }), "no sink class");
  $("runs-total").textContent = g.refused_total + " refused";
  fill("t-runs", g.latest_refused.map((r) => {
    const list = el("ul");
    for (const reason of r.reasons) {
      list.append(el("li", "decode " + reason.index + " · " + reason.rule + " · " + reason.message));
    }
    const td = el("td");
    td.append(list);
    if (r.more_reasons) td.append(el("p", "and " + r.more_reasons + " more reasons (open the run report)", "note"));
    const open = el("td");
    open.append(button(r.id, () => openRun(r.id, r.sink)));
    return [when(r.received_ms), open, r.sink, r.class === null ? el("td", "unclassified", "muted") : r.class,
            "v" + r.policy_version, td];
  }), "no refused run report");
  panels.keysetPager("runs-pager", g.refused_total, pages.runs, g.latest_refused.length, g.next, load, PAGE.runs);
}

function drawDecodes(page) {
  const items = page.items;
  const at = (cursors.length - 1) * PAGE.decodes;
  $("decodes-total").textContent = page.total + " reports";
  const rows = fill("t-decodes", items.map((r) => {
    const td = el("td");
    const open = button(when(r.time_ms), () => openDetail(r.id));
    open.setAttribute("aria-label", "open the decode of " + when(r.time_ms) + ", " + r.sink);
    td.append(open);
    return [td, r.sink, r.capability, r.path || "none ran", r.tier || "—", el("td", r.outcome, r.outcome),
            num(r.source === "sink" ? "—" : r.duration_ms), el("td", r.set ? withVersion(r.set.slice(0, 16) + "…", r.set_version) : "—", "mono")];
  }));
  items.forEach((r, i) => {
    rows[i].dataset.id = r.id;
    rows[i].addEventListener("click", (ev) => { if (ev.target.tagName !== "BUTTON") openDetail(r.id); });
  });
  const nav = $("decodes-pager");
  nav.replaceChildren(el("span", (items.length ? at + 1 : 0) + "–" + (at + items.length) + " of " + page.total, "pager-text"));
  const newer = button("newer", () => { cursors.pop(); load(); }, "page");
  newer.disabled = cursors.length <= 1;
  const older = button("older", () => { cursors.push(page.next); load(); }, "page");
  older.disabled = !page.next;
  nav.append(newer, older);
  for (const [list, key] of [["l-sink", "sink"], ["l-capability", "capability"]]) {
    const values = [...new Set(items.map((r) => r[key]).filter(Boolean))].sort();
    $(list).replaceChildren(...values.map((v) => { const o = el("option"); o.value = v; return o; }));
  }
  $("decodes-scope").hidden = !state.run;
  $("decodes-scope-text").textContent = state.run ? "Only the decodes of run report " + state.run + " (" + state.run_sink + ")." : "";
}

async function openDetail(id) {
  try {
    let r = null;
    try {
      r = await api("v1/reports/" + encodeURIComponent(id));
    } catch (e) {
      if (!(e instanceof BadValue)) throw e;
      if (state.decode) { drop("decode", "refused by the service (" + e.message + ")"); writeURL(); }
      return;
    }
    if (!r) return;
    state.decode = id;
    writeURL();
    $("d-id").textContent = r.id;
    $("d-time").textContent = when(r.time_ms) + " (" + panels.tzName() + ")";
    $("d-request").textContent = r.request_id;
    $("d-outcome").textContent = r.outcome + (r.path ? "" : " (no path ran)");
    $("d-duration").textContent = r.source === "sink" ? "— (a run report states none)" : r.duration_ms + " ms";
    $("d-sink").textContent = r.sink;
    $("d-source").textContent = r.source === "sink" ? "reported by the sink (run report " + r.run_report + ")" : "decoded by this service";
    $("d-path").textContent = (r.path || "none ran") + " · " + (r.tier || "—");
    $("d-set").textContent = r.set ? withVersion(r.set, r.set_version) : "—";
    $("d-symbols").textContent = r.symbols_digest || "—";
    $("d-rgb").textContent = r.rgb_digest || "—";
    $("d-report").textContent = JSON.stringify(r.report, null, 2);
    $("detail").hidden = false;
    $("detail").focus();
  } catch (e) { failed(e); }
}

async function openRun(id, sink) {
  try {
    const r = await api(`v1/run-reports/${encodeURIComponent(id)}`, { sink });
    if (!r) return;
    state.decode = "";
    writeURL();
    $("r-id").textContent = id;
    $("r-sink").textContent = sink;
    $("r-time").textContent = r.verdict.received_ms ? when(r.verdict.received_ms) : "—";
    $("r-verdict").textContent = (r.verdict.accepted ? "accepted" : "refused") + " under policy v" + r.verdict.policy.version;
    const decodes = r.run_report.decodes;
    fill("t-run-decodes", r.verdict.decodes.map((d) => {
      const sent = decodes[d.index] || {};
      const ran = sent.report && sent.report.ran;
      const open = el("td");
      open.append(button("decode " + d.index, () => {
        $("r-decode").textContent = JSON.stringify(sent, null, 2);
        $("r-decode").hidden = false;
        $("r-decode").focus();
      }));
      const verdict = el("td", null, d.accepted ? "decoded" : "refused");
      verdict.append(el("span", d.accepted ? "accepted" : "refused"));
      const reasons = el("ul", null, "reasons");
      for (const reason of d.reasons) reasons.append(el("li", reason.rule + " · " + reason.message));
      if (d.reasons.length) verdict.append(reasons);
      return [open, verdict, ran ? ran.unit + "/" + ran.backend + "/" + ran.arithmetic : "none ran",
              el("td", d.set_digest ? withVersion(d.set_digest, (r.set_versions || {})[d.set_digest]) : "—", "mono")];
    }), "no decode");
    $("r-decode").hidden = true;
    $("r-decodes").onclick = () => { state.run = id; state.run_sink = sink; cursors = [null]; load(); };
    $("run-detail").hidden = false;
    $("run-detail").focus();
  } catch (e) { failed(e); }
}

function failed(e) {
  if (e instanceof AuthError) {
    showLogin("The service refused the token (" + e.message + "). Log in again.");
    return;
  }
  document.body.classList.add("stale");
  $("stale").hidden = false;
  $("stale").textContent = "Stale: the refresh at " + when(Date.now()) + " failed (" + e.message + "). " +
    (lastGood ? "What is shown is from " + when(lastGood) + " (" + panels.tzName() + ")." : "Nothing could be loaded.");
  $("status").textContent = "refresh failed";
  schedule();
}

function schedule() {
  clearTimeout(timer);
  const every = Number(state.refresh);
  $("refresh-line").textContent = every ? "auto-refresh every " + every + " s" : "auto-refresh off";
  if (every) timer = setTimeout(load, every * 1000);
}

// Resolves a set filter that is a prefix of a digest: one match is that set, else the sets
// panel lists those that match.
async function resolveSet() {
  const v = state.set.toLowerCase();
  if (!v || /^[0-9a-f]{64}$/.test(v)) return true;
  const found = /^[0-9a-f]+$/.test(v) ? await api("v1/fleet/sets", { prefix: v, limit: 2, since_ms: filters().since_ms }) : null;
  if (found && found.total === 1) {
    state.set = found.items[0].set;
    $("f-set").value = state.set;
    return true;
  }
  state.prefix = /^[0-9a-f]+$/.test(v) ? v : "";
  state.set = "";
  toForm();
  $("status").textContent = (found ? found.total : 0) + " sets start with " + v + ": choose one in “Sets in use”.";
  return true;
}

async function load() {
  const mine = ++generation;
  clearTimeout(timer);
  $("status").textContent = "loading…";
  try {
    await resolveSet();
    writeURL();
    const f = filters();
    const scoped = state.run ? { ...f, run_report: state.run, sink: state.run_sink, since_ms: null, until_ms: null } : f;
    const unfiltered = { since_ms: f.since_ms, until_ms: f.until_ms, limit: 1 };
    const [summary, page, governance, sinks, sets, exact, errors, menu] = await Promise.all([
      api("v1/reports/summary", { ...f, bucket_s: bucketFor(f) }),
      api("v1/reports", { ...scoped, limit: PAGE.decodes, total: true, cursor: cursors[cursors.length - 1] }),
      api("v1/run-reports/summary", { since_ms: f.since_ms, until_ms: f.until_ms, sink_class: f.sink_class,
                                        sink: f.sink, limit: PAGE.runs, after: after("runs") }),
      api("v1/fleet/sinks", { ...f, sort: state.sort.split(":")[0], desc: state.sort.endsWith(":desc"),
                               q: state.q, decoded_nothing: state.nothing === "1" || null,
                               limit: PAGE.sinks, after: after("sinks") }),
      api("v1/fleet/sets", { ...f, set: null, prefix: state.prefix, limit: PAGE.sets, after: after("sets") }),
      api("v1/fleet/exact", { ...f, limit: PAGE.exact, after: after("exact") }),
      api("v1/request-errors", { since_ms: f.since_ms, until_ms: f.until_ms, sink_class: f.sink_class,
                                  sink: f.sink, limit: PAGE.errors, after: after("errors") }),
      f.sink_class || f.sink ? api("v1/run-reports/summary", unfiltered) : null,
    ]);
    if (mine !== generation) return;
    panels.drawSummary(summary, f);
    drawDecodes(page);
    drawGovernance(governance);
    if (menu || governance) drawClassMenu(menu || governance);
    drawSinks(sinks);
    drawSets(sets);
    drawExact(exact);
    panels.drawErrors(errors, pages.errors, load, PAGE.errors);
    lastGood = Date.now();
    document.body.classList.remove("stale");
    $("stale").hidden = true;
    $("status").textContent = "updated " + when(lastGood) + " (" + panels.tzName() + ")";
    if (state.decode && $("detail").hidden) openDetail(state.decode);
    schedule();
    performance.mark("dashboard-rendered");
  } catch (e) {
    if (mine !== generation) return;
    const k = e instanceof BadValue ? keyOf(e.param) : null;
    // a value the API refused: drop it and load again (once per value: a key dropped is at its
    // default, so it cannot be dropped twice)
    if (k && state[k] !== DEFAULTS[k]) {
      drop(k, "refused by the service (" + e.message + ")");
      firstPages();
      cursors = [null];
      toForm();
      load();
      return;
    }
    failed(e);
  }
}

function readForm() {
  state.range = $("f-range").value;
  state.since = $("f-since").value;
  state.until = $("f-until").value;
  state.class = $("f-class").value;
  state.sink = $("f-sink").value.trim();
  state.capability = $("f-capability").value.trim();
  state.set = $("f-set").value.trim();
  state.run = state.run_sink = "";
  firstPages();
  cursors = [null];
}

$("login-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
  showDashboard();
});
$("logout").addEventListener("click", () => showLogin(""));
$("filters").addEventListener("submit", (ev) => { ev.preventDefault(); readForm(); load(); });
$("f-range").addEventListener("change", () => {
  $("filters").classList.toggle("custom-range", $("f-range").value === "custom");
});
$("f-class").addEventListener("change", () => { readForm(); load(); });
$("f-tz").addEventListener("change", () => { state.tz = $("f-tz").value; panels.setZone(state.tz); load(); });
$("f-refresh").addEventListener("change", () => { state.refresh = $("f-refresh").value; writeURL(); schedule(); });
$("sink-sort").addEventListener("change", () => { state.sort = $("sink-sort").value; pages.sinks = [null]; load(); });
$("sink-q").addEventListener("change", () => { state.q = $("sink-q").value.trim(); pages.sinks = [null]; load(); });
$("sink-nothing").addEventListener("change", () => { state.nothing = $("sink-nothing").checked ? "1" : ""; pages.sinks = [null]; load(); });
$("set-prefix").addEventListener("change", () => {
  state.prefix = $("set-prefix").value.trim().toLowerCase().replace(/[^0-9a-f]/g, "");
  pages.sets = [null];
  load();
});
$("d-close").addEventListener("click", () => { $("detail").hidden = true; state.decode = ""; writeURL(); });
$("r-close").addEventListener("click", () => { $("run-detail").hidden = true; });
$("decodes-scope-clear").addEventListener("click", () => { state.run = state.run_sink = ""; cursors = [null]; load(); });
/** The panels Escape closes, each by its close button: the one holding the focus, else every
 * one open. */
const PANELS = { detail: "d-close", "run-detail": "r-close" };
document.addEventListener("keydown", (ev) => {
  if (ev.key !== "Escape") return;
  const open = Object.keys(PANELS).filter((id) => !$(id).hidden);
  const focused = open.filter((id) => $(id).contains(document.activeElement));
  for (const id of focused.length ? focused : open) $(PANELS[id]).click();
});

fetch("limits.json")
  .then((r) => (r.ok ? r.json() : {}))
  .catch(() => ({}))
  .then((limits) => {
    takeLimits(limits);
    readURL();
    panels.follow();
    if (token()) showDashboard(); else showLogin("");
  });
