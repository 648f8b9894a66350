// The page's user interface: pick a bundled sample or drop an envelope, decode it in the page,
// show the picture, the digests, each offered path's verdict and the reports.
import { blake3Hex, decodeEnvelope, SetSource } from "./decode.js";
import { webnnAdapters, WEBNN_PATHS } from "./webnn.js";
import { describeAdapter, WgslAdapter } from "./webgpu.js";
import { onnxAdapters, ONNX_PATHS } from "./onnx.js";
import { WaiOpsWasmAdapter } from "./waiops_wasm.js";
import { CPU_WAI_OPS, GPU_WGSL, pathKey } from "./dispatch/offer.js";
import { pageFetch, requireToken } from "./auth.js";
import { postRunReport, runReport } from "./runreport.js";

const $ = (id) => document.getElementById(id);
const source = new SetSource(new URL(".", document.baseURI).href);

/** The page's offer (§4): WebNN on the neural processor, the GPU, then the CPU (§6.2); then
 * ONNX Runtime Web on a hardware GPU (WebGPU) and on the CPU (WebAssembly), which every browser
 * has; then the integer program: its kernels on WebGPU (gpu/wgsl/integer), then its
 * float32-exact graph on WebAssembly (cpu/wai-ops/integer), which every browser has. */
export const OFFER = [...WEBNN_PATHS, ...ONNX_PATHS, GPU_WGSL, CPU_WAI_OPS];

/** Fresh adapters for one decode: the WebNN paths, ONNX Runtime Web's and the two integer
 * paths. */
export function pageAdapters() {
  const adapters = webnnAdapters(navigator.ml);
  for (const [key, adapter] of onnxAdapters(navigator.gpu)) adapters.set(key, adapter);
  adapters.set(pathKey(GPU_WGSL), new WgslAdapter(navigator.gpu, { search: location.search }));
  adapters.set(pathKey(CPU_WAI_OPS), new WaiOpsWasmAdapter(source));
  return adapters;
}

/** What the browser gives WebGPU, in words: no navigator.gpu, no adapter, or the adapter's name
 * (a fallback/software one computes on the CPU). */
async function webgpuLine() {
  if (!navigator.gpu) return "It exposes no navigator.gpu (WebGPU). ";
  let adapter = null;
  try {
    adapter = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
  } catch { /* as none */ }
  return adapter
    ? `Its WebGPU adapter: ${describeAdapter(adapter)}. `
    : "It exposes navigator.gpu (WebGPU) but gives no adapter. ";
}

/** A status line's style, from the outcome it tells: only a success looks like one; a refusal
 * (a decode no offered path ran, decode_no_path; a run report the service refused) is shown as
 * an error is. */
const STYLE = { busy: "busy", ready: "ready", succeeded: "done", refused: "error", failed: "error" };

function setState(id, outcome, text) {
  $(id).dataset.state = STYLE[outcome] || "";
  $(id).textContent = text;
}

const setStatus = (outcome, text) => setState("status", outcome, text);
const setRunReportStatus = (outcome, text) => setState("run-report-status", outcome, text);

function row(cells, cls) {
  const tr = document.createElement("tr");
  if (cls) tr.className = cls;
  for (const c of cells) {
    const td = document.createElement("td");
    td.textContent = c;
    tr.appendChild(td);
  }
  return tr;
}

function show(result) {
  $("result").hidden = false;
  const digests = $("digests").tBodies[0];
  digests.replaceChildren();
  if (result.picture) {
    digests.appendChild(row(["picture (RGB8) blake3", blake3Hex(result.picture.data)])).lastChild.className = "mono";
  }
  for (const part of result.parts) {
    digests.appendChild(row([`${part.capability} symbols_digest`, part.symbolsDigest])).lastChild.className = "mono";
    digests.appendChild(row([`${part.capability} set`, part.set])).lastChild.className = "mono";
  }
  const paths = $("paths").tBodies[0];
  paths.replaceChildren();
  result.reports.forEach((report, i) => {
    const adapters = result.adapters[i];
    for (const r of report.refused) {
      const key = pathKey(r);
      const a = adapters.get(key);
      paths.appendChild(row([`${report.capability}: ${key}`, r.reason, (a && a.reason) || ""], "refused"));
    }
    if (report.ran) {
      const engine = report.ran.backend === "wai-ops" ? " (ONNX Runtime Web's WebAssembly build: the CPU)" : "";
      const placement = report.ran.placement === null ? `placement null (${report.ran.backend === "webnn" ? "WebNN" : "ONNX Runtime Web"} states none)` : JSON.stringify(report.ran.placement) + engine;
      paths.appendChild(row([`${report.capability}: ${pathKey(report.ran)}`, `ran, tier ${report.ran.tier}`, placement], "ran"));
    }
  });
  $("reports").textContent = result.reports.map((r) => JSON.stringify(r, null, 2)).join("\n");
  const canvas = $("picture");
  const ctx = canvas.getContext("2d");
  if (result.picture) {
    const { width, height, data } = result.picture;
    canvas.width = width;
    canvas.height = height;
    const img = ctx.createImageData(width, height);
    for (let i = 0; i < width * height; i++) {
      img.data.set([data[3 * i], data[3 * i + 1], data[3 * i + 2], 255], 4 * i);
    }
    ctx.putImageData(img, 0, 0);
    $("picture-caption").textContent = `${width}×${height} RGB8`;
  } else {
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    $("picture-caption").textContent = "no picture: every offered path was refused (the symbols are still decoded)";
  }
}

/** Forget the previous result: its picture, digests, paths and reports. A decode that starts
 * (or fails) never shows under another envelope's result. */
function clearResult() {
  $("result").hidden = true;
  const canvas = $("picture");
  canvas.getContext("2d").clearRect(0, 0, canvas.width, canvas.height);
  $("picture-caption").textContent = "";
  $("digests").tBodies[0].replaceChildren();
  $("paths").tBodies[0].replaceChildren();
  $("reports").textContent = "";
  setRunReportStatus("", "");
  window.waiPage.picture = null;
}

/** Where the user opted in: post the decode's run report and show the service's verdict. */
async function reportRun(result) {
  const sink = $("sink-name").value.trim();
  if (!sink) {
    setRunReportStatus("failed", "Run report not posted: name the sink your token carries.");
    return { ok: false, status: 0, id: null, error: { code: null, message: "no sink name" } };
  }
  setRunReportStatus("busy", "Posting the run report…");
  const posted = await postRunReport(runReport(result.decodes, sink));
  if (posted.ok) {
    const v = posted.verdict;
    setRunReportStatus(v.accepted ? "succeeded" : "refused", `Run report ${posted.id} posted: ${v.accepted ? "accepted" : `refused (${v.refused_decodes} of ${v.decodes.length} decodes)`} under policy version ${v.policy.version}.`);
  } else {
    setRunReportStatus("failed", `Run report ${posted.id} not posted: ${posted.error.code ? posted.error.code + ": " : ""}${posted.error.message}`);
  }
  return posted;
}

/** Decode envelope bytes with the page's offer; the result is kept on window.waiPage.last. */
export async function decodeBytes(bytes, name) {
  clearResult();
  window.waiPage.last = null;
  setStatus("busy", `Decoding ${name}…`);
  try {
    const result = await decodeEnvelope(bytes, { source, offer: OFFER, makeAdapters: pageAdapters });
    show(result);
    const verdict = result.decoded ? `decoded through ${pathKey(result.reports.at(-1).ran)}` : "no offered path ran (decode_no_path)";
    setStatus(result.decoded ? "succeeded" : "refused", `${name}: ${verdict}`);
    window.waiPage.last = { name, decoded: result.decoded, reports: result.reports, parts: result.parts,
      reasons: result.adapters.map((m) => Object.fromEntries([...m].map(([k, a]) => [k, a.reason]))),
      picture: result.picture && { width: result.picture.width, height: result.picture.height,
        blake3: blake3Hex(result.picture.data) } };
    window.waiPage.picture = result.picture;
    if ($("post-run-report").checked) window.waiPage.last.runReport = await reportRun(result);
    return window.waiPage.last;
  } catch (err) {
    clearResult();
    setStatus("failed", `${name}: ${err.code || "error"}: ${err.message}`);
    window.waiPage.last = { name, error: { code: err.code || "error", message: err.message } };
    return window.waiPage.last;
  }
}

async function decodeSample() {
  const name = $("sample").value;
  const res = await pageFetch(`samples/${encodeURIComponent(name)}`);
  return decodeBytes(new Uint8Array(await res.arrayBuffer()), name);
}

async function start() {
  window.waiPage = { decodeBytes, decodeSample, last: null };
  requireToken(); // the login view, where this tab holds no token yet
  $("environment").textContent = (navigator.ml
    ? "This browser exposes navigator.ml (WebNN): the page asks it for contexts. "
    : "This browser exposes no navigator.ml: every WebNN path is dispatch_unit_absent; the entropy stage still runs here. ")
    + (await webgpuLine())
    + "Where no WebNN context runs a float network, ONNX Runtime Web runs it: on a hardware WebGPU adapter through its WebGPU build, else on its WebAssembly build (each loaded only when tried). "
    + "The integer program runs on a hardware adapter's WGSL kernels, else, exactly, as its float32-exact graph on the WebAssembly build.";
  const samples = await (await pageFetch("samples.json")).json();
  for (const s of samples) {
    const opt = document.createElement("option");
    opt.value = s;
    opt.textContent = s;
    $("sample").appendChild(opt);
  }
  $("decode-sample").addEventListener("click", decodeSample);
  const drop = $("drop");
  const take = async (file) => decodeBytes(new Uint8Array(await file.arrayBuffer()), file.name);
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => { e.preventDefault(); drop.classList.remove("over"); if (e.dataTransfer.files[0]) take(e.dataTransfer.files[0]); });
  $("file").addEventListener("change", (e) => { if (e.target.files[0]) take(e.target.files[0]); });
  setStatus("ready", "Ready.");
  window.waiPage.ready = true;
}

start().catch((err) => setStatus("failed", `start: ${err.message}`));
