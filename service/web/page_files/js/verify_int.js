// The integer paths' verifier (verify-int.html): every payload of the conformance corpus
// (conformance/neural-conformance) decoded in the page — entropy stage, then the wai-ops/1
// program through the page's WGSL kernels on this browser's WebGPU adapter, whatever its
// placement, or with `?path=cpu/wai-ops/integer` as its float32-exact graph on ONNX Runtime
// Web's WebAssembly build (js/waiops_wasm.js) — and each RGB8 picture's BLAKE3 held to the
// corpus hash. `?limit.NAME=N` lowers an adapter limit the planner sees (never raises it), to
// force banded kernels; `?only=a,b` checks those payloads only (a name the corpus does not
// hold, or none selected, is verdict "none": nothing checked is never a pass).
// The summary is kept on window.waiVerifyInt.
import { blake3Hex, entropyStage, Job, SetSource } from "./decode.js";
import { describeAdapter, GpuRunner, isSoftware, loweredLimits } from "./webgpu.js";
import { WaiOpsWasmAdapter } from "./waiops_wasm.js";
import { CPU_WAI_OPS, GPU_WGSL, pathKey } from "./dispatch/offer.js";
import { pageFetch, requireToken } from "./auth.js";

const $ = (id) => document.getElementById(id);

function cell(text) {
  const td = document.createElement("td");
  td.textContent = text;
  return td;
}

async function run() {
  requireToken(); // the login view, where this tab holds no token yet
  const source = new SetSource(new URL(".", document.baseURI).href);
  const corpus = await (await pageFetch("corpus.json")).json(); // first: a refused token shows
  const query = new URLSearchParams(location.search);
  const only = query.has("only") ? query.get("only").split(",") : null;
  // Which payloads: checked before WebGPU is asked for anything. Checking none is no pass, and a
  // name in ?only= that the corpus does not hold is a mistake to show, not to skip.
  const selected = corpus.payloads.filter((p) => !only || only.includes(p.name));
  const unknown = only ? only.filter((name) => !corpus.payloads.some((p) => p.name === name)) : [];
  if (selected.length === 0 || unknown.length > 0) {
    const named = only ? `only=${query.get("only")}` : "the corpus";
    const missing = unknown.length > 0 ? ` (not in the corpus: ${unknown.map((n) => JSON.stringify(n)).join(", ")})` : "";
    const text = selected.length === 0
      ? `NOT VERIFIED: no corpus payload matches ${named}${missing}; nothing was checked. The corpus holds: ${corpus.payloads.map((p) => p.name).join(", ")}.`
      : `NOT VERIFIED: ${named} names payloads the corpus does not hold${missing}; nothing was checked. The corpus holds: ${corpus.payloads.map((p) => p.name).join(", ")}.`;
    $("verdict").dataset.state = "error";
    $("verdict").textContent = text;
    window.waiVerifyInt = { done: true, verdict: "none", message: text, unknown, rows: [] };
    return;
  }
  const engine = query.get("path") === pathKey(CPU_WAI_OPS) ? await wasmEngine(source) : await wgslEngine();
  $("environment").textContent = engine.text;
  const manifest = await source.manifest(corpus.set);
  const rows = [];
  for (const entry of selected) {
    const t0 = performance.now();
    const row = { name: entry.name, expected: entry.rgb8_blake3, symbolsExpected: entry.symbols_digest };
    try {
      const payload = new Uint8Array(await (await pageFetch(`corpus/${encodeURIComponent(entry.payload)}`)).arrayBuffer());
      const stage = await entropyStage(source, corpus.set, manifest, payload);
      const job = new Job(source, corpus.set, manifest, stage.header, stage.latent, stage.symbols);
      const { rgb, banded } = await engine.run(job);
      Object.assign(row, { shape: stage.header.shape, symbols: stage.symbolsDigest, got: blake3Hex(rgb.data), banded });
      row.verdict = row.got === row.expected && row.symbols === row.symbolsExpected ? "pass" : "fail";
    } catch (err) {
      row.verdict = "fail";
      row.error = err.message;
    }
    row.ms = Math.round(performance.now() - t0);
    rows.push(row);
    const tr = document.createElement("tr");
    tr.className = row.verdict;
    const symbols = row.symbols ? (row.symbols === row.symbolsExpected ? "equal" : `page ${row.symbols}`) : "—";
    for (const t of [row.name, row.verdict, row.shape ? row.shape.join("×") : "", symbols, row.got || row.error || "", row.expected, String(row.ms)]) tr.appendChild(cell(t));
    $("checks").tBodies[0].appendChild(tr);
  }
  const verdict = rows.length > 0 && rows.every((r) => r.verdict === "pass") ? "pass" : "fail";
  $("verdict").dataset.state = verdict === "pass" ? "done" : "error";
  $("verdict").textContent = verdict === "pass" ? `PASS: all ${rows.length} corpus payloads decode through ${engine.path} to their corpus hash.` : "FAIL: see the table.";
  window.waiVerifyInt = { done: true, verdict, path: engine.path, software: engine.software, adapter: engine.adapter, limits: engine.limits, rows };
}

/** gpu/wgsl/integer's kernels on this browser's adapter, run whatever its placement. */
async function wgslEngine() {
  const runner = await GpuRunner.acquire(navigator.gpu);
  const limits = loweredLimits(runner.limits, location.search);
  const software = isSoftware(runner.adapter);
  return {
    path: pathKey(GPU_WGSL), software, adapter: describeAdapter(runner.adapter), limits,
    text: `Adapter: ${describeAdapter(runner.adapter)}. ${software ? "A decode here reports gpu/wgsl/integer dispatch_not_placed; the kernels run anyway for this check." : "A decode here runs on the GPU at decode-equivalence."}`,
    async run(job) {
      const plan = await job.loadWgslPlan(limits);
      if (plan.refused) throw new Error(`dispatch_shape_mismatch: ${plan.refused}`);
      const { rgb } = await job.runWgsl(runner, plan);
      return { rgb, banded: plan.operations.filter((op) => !op.whole).length };
    },
  };
}

/** cpu/wai-ops/integer: the program's float32-exact graph on ONNX Runtime Web's WebAssembly
 * build, §4's questions asked as a decode asks them. */
async function wasmEngine(source) {
  const adapter = new WaiOpsWasmAdapter(source);
  if (!(await adapter.unitPresent())) throw new Error(adapter.reason);
  return {
    path: pathKey(CPU_WAI_OPS), software: null, adapter: null, limits: null,
    text: "ONNX Runtime Web's WebAssembly build (the CPU): the program's float32-exact graph, as the native float32 engine builds it; its Floor(Sqrt(n)) checked exact.",
    async run(job) {
      if (!(await adapter.programPresent(job)) || !(await adapter.takesShape(job))) throw new Error(adapter.reason);
      return { rgb: (await adapter.run(job)).rgb, banded: 0 };
    },
  };
}

window.waiVerifyInt = { done: false };
run().catch((err) => {
  $("verdict").dataset.state = "error";
  $("verdict").textContent = `verifier failed: ${err.message}`;
  window.waiVerifyInt = { done: true, verdict: "fail", error: String(err), rows: [] };
});
