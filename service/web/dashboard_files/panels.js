/* The dashboard's panels: tables, pagers and the chart, drawn from the API's answers. Every
   value from the API is written with textContent, never as HTML. Times are shown in one zone,
   UTC or the browser's, named wherever a time is (panels.tz). dashboard.js loads and calls these. */
"use strict";

const panels = (() => {
  const $ = (id) => document.getElementById(id);
  let zone = "utc";
  let chart = null;

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  function button(text, onClick, cls) {
    const b = el("button", text, cls || "link");
    b.type = "button";
    b.addEventListener("click", onClick);
    return b;
  }

  function pad(n) { return String(n).padStart(2, "0"); }

  function offsetName(date) {
    const m = -date.getTimezoneOffset();
    const sign = m < 0 ? "-" : "+";
    return "UTC" + sign + pad(Math.floor(Math.abs(m) / 60)) + ":" + pad(Math.abs(m) % 60);
  }

  function tzName() { return zone === "utc" ? "UTC" : "local, " + offsetName(new Date()); }

  function setZone(z) {
    zone = z === "local" ? "local" : "utc";
    for (const node of document.querySelectorAll(".tz-name")) node.textContent = tzName();
  }

  // A time in the chosen zone: "YYYY-MM-DD HH:MM:SS" (the zone is named in the column's head).
  function when(ms) {
    if (ms === null || ms === undefined) return "—";
    const d = new Date(ms);
    if (zone === "utc") return d.toISOString().replace("T", " ").slice(0, 19);
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  }

  // A datetime-local input's value as Unix ms, read in the chosen zone.
  function parseLocal(value) {
    if (!value) return null;
    const t = zone === "utc" ? Date.parse(value + (value.length === 16 ? ":00Z" : "Z")) : new Date(value).getTime();
    return Number.isFinite(t) ? t : null;
  }

  function pct(x) { return x === null || x === undefined ? "—" : (100 * x).toFixed(1) + " %"; }

  function meterCell(value, max, label) {
    const td = el("td", null, "num");
    const wrap = el("span", null, "metered");
    const bar = el("span", null, "meter");
    bar.style.width = (max > 0 ? Math.round((100 * value) / max) : 0) + "%";
    const track = el("span", null, "track");
    track.append(bar);
    wrap.append(track, el("span", label));
    td.append(wrap);
    return td;
  }

  function num(v, cls) { return el("td", v, "num" + (cls ? " " + cls : "")); }

  function fill(tableId, rows, empty) {
    const heads = [...document.querySelectorAll("#" + tableId + " thead th")].map((th) => th.textContent);
    const body = document.querySelector("#" + tableId + " tbody");
    body.replaceChildren();
    if (!rows.length) {
      const tr = el("tr");
      const td = el("td", empty || "nothing in this range", "note empty");
      td.colSpan = heads.length;
      tr.append(td);
      body.append(tr);
      return [];
    }
    const out = [];
    for (const cells of rows) {
      const tr = el("tr");
      cells.forEach((c, i) => {
        const td = c instanceof Node ? c : el("td", c);
        td.dataset.label = heads[i] || "";
        tr.append(td);
      });
      body.append(tr);
      out.push(tr);
    }
    return out;
  }

  // "rows 21–40 of 73", with previous and next: the page of a list its API cut.
  function pager(navId, total, offset, shown, onPage, limit) {
    const nav = $(navId);
    nav.replaceChildren();
    if (total === null || total === undefined) return;
    const first = shown ? offset + 1 : 0;
    nav.append(el("span", shown ? first + "–" + (offset + shown) + " of " + total : "0 of " + total, "pager-text"));
    const prev = button("previous", () => onPage(Math.max(0, offset - limit)), "page");
    prev.disabled = offset <= 0;
    const next = button("next", () => onPage(offset + limit), "page");
    next.disabled = offset + shown >= total;
    nav.append(prev, next);
  }

  // The same, for a list paged by keyset: ``stack`` holds the cursor of every page seen (the
  // first page's is null); "next" pushes the page's own ``next``, "previous" pops one.
  function keysetPager(navId, total, stack, shown, next, reload, limit) {
    const nav = $(navId);
    nav.replaceChildren();
    if (total === null || total === undefined) return;
    const offset = (stack.length - 1) * limit;
    nav.append(el("span", shown ? offset + 1 + "–" + (offset + shown) + " of " + total : "0 of " + total, "pager-text"));
    const prev = button("previous", () => { stack.pop(); reload(); }, "page");
    prev.disabled = stack.length <= 1;
    const more = button("next", () => { stack.push(next); reload(); }, "page");
    more.disabled = !next;
    nav.append(prev, more);
  }

  function copyButton(text, what) {
    const b = button("copy", async () => {
      try {
        await navigator.clipboard.writeText(text);
        b.textContent = "copied";
      } catch (e) {
        const range = document.createRange(); // no clipboard permission: select it instead
        range.selectNodeContents(b.previousSibling);
        getSelection().removeAllRanges();
        getSelection().addRange(range);
        b.textContent = "selected";
      }
      setTimeout(() => { b.textContent = "copy"; }, 1500);
    }, "copy");
    b.setAttribute("aria-label", "copy " + what);
    return b;
  }

  function drawChart(summary, f) {
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
    if (chart) chart.destroy();
    box.replaceChildren();
    chart = new uPlot({
      width: Math.max(200, box.clientWidth), height: 240,
      tzDate: zone === "utc" ? (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC") : (ts) => new Date(ts * 1e3),
      scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max)] } },
      series: [{ label: "time (" + tzName() + ")" },
               { label: "decoded", stroke: "#2f7d4a", width: 2 },
               { label: "refused (no path ran)", stroke: "#b3372f", width: 2 }],
      axes: [{ label: "time (" + tzName() + ")" }, { label: "reports per " + summary.bucket_s + " s" }],
    }, [xs, decoded, refused], box);
  }

  // The chart follows its box (the window's width), without waiting for a reload.
  function follow() {
    const box = $("chart-time");
    new ResizeObserver(() => {
      if (chart && Math.abs(chart.width - box.clientWidth) > 1) {
        chart.setSize({ width: Math.max(200, box.clientWidth), height: 240 });
      }
    }).observe(box);
  }

  function drawSummary(s, f) {
    $("total").textContent = s.reports + " reports";
    drawChart(s, f);
    const maxPath = Math.max(0, ...s.by_path.map((r) => r.count));
    fill("t-paths", s.by_path.map((r) => [
      r.path || "none ran", r.tier || "—", meterCell(r.count, maxPath, r.count)]));
    const codes = Object.entries(s.refusals);
    const maxCode = Math.max(0, ...codes.map(([, n]) => n));
    fill("t-refusals", codes.map(([code, n]) => [code, meterCell(n, maxCode, n)]), "no path refused");
    $("decoded-n").textContent = s.decoded + " decodes ran a path";
    fill("t-placement", Object.keys(s.placement).map((unit) => [
      unit,
      meterCell(s.decode_share[unit], 1, pct(s.decode_share[unit]) + " (" + Math.round(s.decode_share[unit] * s.decoded) + ")"),
      meterCell(s.placement[unit], 1, pct(s.placement[unit]))]));
  }

  function drawErrors(e, stack, reload, limit) {
    $("errors-total").textContent = e.total + " requests" +
      (e.rows && e.rows.dropped ? " (" + e.rows.dropped + " of sinks' not kept as rows: over the cap per hour)" : "");
    const max = Math.max(0, ...e.by_code.map((r) => r.count));
    fill("t-error-codes", e.by_code.map((r) => [r.code, num(r.status), meterCell(r.count, max, r.count)]), "no request error");
    const twoLines = (a, b, cls) => {
      const td = el("td", null, "two-line" + (cls ? " " + cls : ""));
      td.append(el("span", a), el("span", b));
      return td;
    };
    fill("t-errors", e.items.map((r) => [
      when(r.time_ms), twoLines(r.status + " " + r.code, r.sink ? "sink " + r.sink : "no sink's token"),
      twoLines(r.method + " " + r.path, r.request_id, "mono")]), "no request error");
    keysetPager("errors-pager", e.rows ? e.rows.kept : e.total, stack, e.items.length, e.next, reload, limit);
  }

  return { $, el, button, fill, pager, keysetPager, meterCell, num, copyButton, when, parseLocal, pct,
           setZone, tzName, drawSummary, drawErrors, follow };
})();
