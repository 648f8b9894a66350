// The page's verifier (verify.html): every bundled sample decoded in this browser and held to
// the service's native CPU decode (reference/<sample>): §6.4's agreement (the same symbols
// digest; the RGB8 picture within 40 dB PSNR) and §6.2's refusal of decode-equivalence before
// any context. It passes only where WebNN ran at least once (spec §8: a verifier that saw no
// WebNN has verified nothing). The summary is kept on window.waiVerify.
import { decodeEnvelope, SetSource } from "./decode.js";
import { webnnAdapters, WEBNN_PATHS } from "./webnn.js";
import { pathKey } from "./dispatch/offer.js";
import { pageFetch, requireToken } from "./auth.js";

export const MIN_PSNR_DB = 40;
const $ = (id) => document.getElementById(id);
const base = new URL(".", document.baseURI).href;

/** Count createContext calls, so a refusal before any context is seen, not assumed. */
const asked = [];
if (navigator.ml && typeof navigator.ml.createContext === "function") {
  const ml = navigator.ml;
  const original = ml.createContext.bind(ml);
  ml.createContext = (options) => {
    asked.push(options && options.deviceType);
    return original(options);
  };
}

function decodeBase64(text) {
  const binary = atob(text);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

/** PSNR (dB) of two RGB8 pictures, and the largest sample difference. */
export function psnr(a, b) {
  let sum = 0;
  let max = 0;
  for (let i = 0; i < a.length; i++) {
    const d = a[i] - b[i];
    sum += d * d;
    max = Math.max(max, Math.abs(d));
  }
  const mse = sum / a.length;
  return { db: mse === 0 ? Infinity : 10 * Math.log10((255 * 255) / mse), maxDiff: max };
}

async function verifySample(source, name) {
  const bytes = new Uint8Array(await (await pageFetch(`samples/${encodeURIComponent(name)}`)).arrayBuffer());
  const reference = await (await pageFetch(`reference/${encodeURIComponent(name)}`)).json();
  const before = asked.length;
  const result = await decodeEnvelope(bytes, { source, offer: WEBNN_PATHS, makeAdapters: () => webnnAdapters(navigator.ml) });
  const report = result.reports.at(-1);
  const part = result.parts.at(-1);
  const row = {
    sample: name,
    needed: report.needed,
    ran: report.ran ? pathKey(report.ran) : null,
    symbols: { page: part ? part.symbolsDigest : null, native: reference.symbols_digest },
    contexts: asked.slice(before),
    psnr: null,
    maxDiff: null,
    why: [],
    report,
  };
  const why = row.why;
  if (row.symbols.page !== row.symbols.native) why.push("the symbols digest differs from the native sink's");
  let verdict;
  if (report.needed === "decode-equivalence") {
    if (report.ran !== null) why.push("a float path ran a decode that needs decode-equivalence");
    if (report.refused.some((r) => r.reason !== "dispatch_tier_refused")) why.push("a WebNN path was not refused with dispatch_tier_refused");
    if (row.contexts.length) why.push(`${row.contexts.length} context(s) created before the refusal`);
    verdict = why.length ? "fail" : "pass";
  } else if (report.ran !== null) {
    const ran = report.ran;
    // the tier the decode needs (none; entropy-consistency for a NeuralEntropyExact capability)
    if (ran.backend !== "webnn" || ran.placement !== null || ran.tier !== report.needed) why.push(`the report's ran is not a WebNN path at tier ${report.needed} with placement null`);
    if (!reference.picture) {
      why.push("the native sink decoded no picture to compare with");
    } else {
      const p = psnr(result.picture.data, decodeBase64(reference.picture.rgb));
      row.psnr = p.db;
      row.maxDiff = p.maxDiff;
      if (!(p.db >= MIN_PSNR_DB)) why.push(`PSNR ${p.db.toFixed(2)} dB is below ${MIN_PSNR_DB} dB`);
    }
    verdict = why.length ? "fail" : "pass";
  } else {
    const reasons = result.adapters.at(-1);
    for (const r of report.refused) why.push(`${pathKey(r)}: ${r.reason}${reasons.get(pathKey(r))?.reason ? ` (${reasons.get(pathKey(r)).reason})` : ""}`);
    verdict = why.some((w) => w.includes("digest differs")) ? "fail" : "absent";
  }
  row.verdict = verdict;
  return row;
}

function cell(text) {
  const td = document.createElement("td");
  td.textContent = text;
  return td;
}

async function run() {
  $("environment").textContent = navigator.ml ? "navigator.ml is there (WebNN)." : "This browser exposes no navigator.ml (WebNN).";
  requireToken(); // the login view, where this tab holds no token yet
  const source = new SetSource(base);
  const samples = await (await pageFetch("samples.json")).json();
  const rows = [];
  for (const name of samples) {
    let row;
    try {
      row = await verifySample(source, name);
    } catch (err) {
      row = { sample: name, verdict: "fail", why: [`${err.code || "error"}: ${err.message}`], contexts: [], symbols: {} };
    }
    rows.push(row);
    const tr = document.createElement("tr");
    tr.className = row.verdict;
    const pic = row.psnr === null || row.psnr === undefined ? "—" : `${row.psnr === Infinity ? "identical" : row.psnr.toFixed(2) + " dB"}, max diff ${row.maxDiff}`;
    const sym = row.symbols.page && row.symbols.page === row.symbols.native ? `${row.symbols.page.slice(0, 16)}… equal` : `page ${row.symbols.page} native ${row.symbols.native}`;
    for (const t of [row.sample, row.verdict, row.ran || "none", sym, pic, row.contexts.join(", ") || "none", row.why.join("; ")]) tr.appendChild(cell(t));
    $("checks").tBodies[0].appendChild(tr);
  }
  const ranWebnn = rows.some((r) => r.ran && r.ran.includes("/webnn/"));
  const failed = rows.some((r) => r.verdict === "fail");
  const overall = failed ? "fail" : ranWebnn && rows.every((r) => r.verdict === "pass") ? "pass" : "absent";
  const text = {
    pass: "PASS: WebNN ran here and every sample agrees with the native sink.",
    fail: "FAIL: a sample disagrees with the native sink (see the table).",
    absent: "NOT VERIFIED: this browser gave no WebNN context, so nothing ran on WebNN (the symbols still agree).",
  }[overall];
  $("verdict").dataset.state = overall === "pass" ? "done" : "error";
  $("verdict").textContent = text;
  window.waiVerify = { done: true, verdict: overall, userAgent: navigator.userAgent, samples: rows };
}

window.waiVerify = { done: false };
run().catch((err) => {
  $("verdict").dataset.state = "error";
  $("verdict").textContent = `verifier failed: ${err.message}`;
  window.waiVerify = { done: true, verdict: "fail", error: String(err), samples: [] };
});
