// One decode in the page, as service/decoding/pipeline.py decodes: envelope → §2 demand → entropy stage
// (§6.3, in the page) → §4 choose over the page's offer → RGB8. The primary first; the fallback
// when no offered path runs the primary.
import { blake3 } from "../vendor/noble_hashes/blake3.js";
import { bytesToHex } from "../vendor/noble_hashes/utils.js";
import { lookup } from "./dispatch/registry.js";
import { choose, demand } from "./dispatch/rules.js";
import { WaiError } from "./dispatch/tokens.js";
import { parseEnvelope } from "./codec/envelope.js";
import { readTables } from "./codec/tables.js";
import { decodePayload, latentOf, symbolBytes } from "./codec/payload.js";
import { decodeHyperprior, loadHyperStage } from "./codec/hyperprior.js";
import { runProgram } from "./webgpu.js";
import { pageFetch } from "./auth.js";

/** Fetches what a decode reads from the service that serves the page (docs/page.md), with the
 * page's bearer token (auth.js). */
export class SetSource {
  constructor(base) {
    this.base = base;
    this.cache = new Map();
    this.hyperStages = new Map(); // set digest → a hyperprior set's loaded entropy stage
  }

  async #get(url, kind) {
    if (!this.cache.has(url)) {
      this.cache.set(url, (async () => {
        const res = await pageFetch(this.base + url);
        if (!res.ok) {
          let body = null;
          try { body = await res.json(); } catch { /* not JSON */ }
          const code = body && body.error ? body.error.code : "page_fetch_failed";
          throw new WaiError(code, body && body.error ? body.error.message : `GET ${url}: HTTP ${res.status}`);
        }
        return kind === "json" ? res.json() : kind === "text" ? res.text() : res.arrayBuffer();
      })());
    }
    try {
      return await this.cache.get(url);
    } catch (err) {
      this.cache.delete(url);
      throw err;
    }
  }

  defaultFor(capability) { return this.#get(`sets/default/${encodeURIComponent(capability)}`, "json").then((o) => o.digest); }
  manifest(digest) { return this.#get(`sets/${digest}/manifest.json`, "json"); }
  text(digest, name) { return this.#get(`sets/${digest}/files/${encodeURIComponent(name)}`, "text"); }
  json(digest, name) { return this.#get(`sets/${digest}/files/${encodeURIComponent(name)}`, "json"); }
  bytes(digest, name) { return this.#get(`sets/${digest}/files/${encodeURIComponent(name)}`, "bytes"); }
  /** The WGSL kernels planned for this browser's adapter limits (service/web/page_wgsl.py). */
  wgslPlan(digest, shape, limits) {
    const q = `shape=${shape.join(",")}&limits=${encodeURIComponent(JSON.stringify(limits))}`;
    return this.#get(`sets/${digest}/wgsl/plan?${q}`, "json");
  }
  wgslConstants(digest) { return this.#get(`sets/${digest}/wgsl/constants.bin`, "bytes"); }
  /** The set's wai-ops program as the native float32 engine's graph (js/waiops_wasm.js). */
  waiopsGraph(digest) { return this.#get(`sets/${digest}/waiops/float32.onnx`, "bytes"); }
  isqrtCheck() { return this.#get("waiops/isqrt-check", "bytes"); }
}

/** What a path's adapter decodes: the set, the entropy stage's result, and lazy program loads. */
export class Job {
  constructor(source, digest, manifest, header, latent, symbols) {
    Object.assign(this, { source, digest, manifest, header, latent, symbols });
    this.webnn = null;
    this.onnx = null;
    this.waiopsGraph = null;
  }

  waiOpsProgram() {
    const programs = this.manifest.facts && this.manifest.facts.programs;
    return (programs && programs["wai-ops"]) || null;
  }

  loadWgslPlan(limits) {
    return this.source.wgslPlan(this.digest, this.header.shape, limits);
  }

  /** The integer synthesis through the page's WGSL kernels: the program's rgb8 output. */
  async runWgsl(runner, plan) {
    const constants = await this.source.wgslConstants(this.digest);
    const [, c, h, w] = this.header.shape;
    const out = await runProgram(runner, plan, this.symbols, [c, h, w], constants);
    return { rgb: rgb8Planar(out.data, out.shape) };
  }

  /** cpu/wai-ops/integer's float32-exact graph and the set's wai-ops/1 program (its input
   * range, its operations). */
  loadWaiOpsGraph() {
    if (this.waiopsGraph === null) {
      const p = this.waiOpsProgram();
      this.waiopsGraph = Promise.all([this.source.waiopsGraph(this.digest), this.source.json(this.digest, p.file)])
        .then(([graph, program]) => ({ graph: new Uint8Array(graph), program }));
    }
    return this.waiopsGraph;
  }

  webnnProgram() {
    const programs = this.manifest.facts && this.manifest.facts.programs;
    return (programs && programs.webnn) || null;
  }

  onnxProgram() {
    const programs = this.manifest.facts && this.manifest.facts.programs;
    const p = programs && programs["onnx-runtime"];
    return p && typeof p.file === "string" && typeof p.weights === "string" ? p : null;
  }

  /** The set's decoder.onnx and its external weights (ONNX Runtime Web's paths, js/onnx.js). */
  loadOnnx() {
    if (this.onnx === null) {
      const p = this.onnxProgram();
      this.onnx = Promise.all([this.source.bytes(this.digest, p.file), this.source.bytes(this.digest, p.weights)])
        .then(([model, weights]) => ({ program: p, model: new Uint8Array(model), weights: new Uint8Array(weights) }));
    }
    return this.onnx;
  }

  loadWebnn() {
    if (this.webnn === null) {
      const p = this.webnnProgram();
      this.webnn = Promise.all([
        this.source.json(this.digest, p.file),
        this.source.json(this.digest, p.manifest),
        this.source.bytes(this.digest, p.weights),
      ]).then(([graph, manifest, weights]) => ({ graph, manifest, weights }));
    }
    return this.webnn;
  }
}

/** The entropy stage on the page (§6.3): symbols, their digest and the latent. */
export async function entropyStage(source, digest, manifest, payload) {
  if (manifest.facts && manifest.facts.hyperprior) return hyperpriorStage(source, digest, manifest, payload);
  const tablesName = manifest.facts && manifest.facts.tables;
  if (typeof tablesName !== "string") throw new WaiError("set_no_tables", `set ${digest.slice(0, 16)}… names no entropy tables file`);
  const tables = readTables(await source.text(digest, tablesName));
  const { header, symbols } = decodePayload(payload, tables);
  const symbolsDigest = bytesToHex(blake3(symbolBytes(symbols)));
  return { header, symbols, symbolsDigest, latent: latentOf(symbols, header, tables) };
}

/** A hyperprior set's entropy stage (codec/hyperprior.js): z, the integer hyper-synthesis, y;
 * the digest over z's symbols then y's; the latent y as float32 (no medians). */
async function hyperpriorStage(source, digest, manifest, payload) {
  source.hyperStages ??= new Map(); // a source other than SetSource
  if (!source.hyperStages.has(digest)) {
    const loading = loadHyperStage(source, digest, manifest.facts.hyperprior);
    source.hyperStages.set(digest, loading);
    loading.catch(() => source.hyperStages.delete(digest));
  }
  const stage = await source.hyperStages.get(digest);
  const { header, z, y } = decodeHyperprior(payload, stage);
  const both = new Int32Array(z.length + y.length);
  both.set(z);
  both.set(y, z.length);
  const symbolsDigest = bytesToHex(blake3(symbolBytes(both)));
  return { header, symbols: y, symbolsDigest, latent: Float32Array.from(y) };
}

/** A path's adapter for a part whose set is not there: the unit as the real adapter says, no program. */
function withoutProgram(adapter) {
  return {
    unitPresent: () => adapter.unitPresent(),
    programPresent: () => false,
    takesShape: () => { throw new Error("not asked"); },
    plan: () => { throw new Error("not asked"); },
    run: () => { throw new Error("not asked"); },
  };
}

/**
 * Decode an envelope's JSON bytes. makeAdapters() gives a fresh Map key → adapter per part.
 * Returns {decoded, reports, parts: [{capability, set, symbolsDigest, shape}], picture, adapters,
 * decodes}: `decodes` holds, per report, the run report's entry (docs/run-reports.md)
 * `{set_digest, symbols_digest, report}` (`symbols_digest` null where the entropy stage did not run).
 */
export async function decodeEnvelope(bytes, { source, offer, makeAdapters }) {
  const envelope = parseEnvelope(bytes);
  const reports = [];
  const parts = [];
  const adapterLog = [];
  const decodes = [];
  for (const part of envelope.parts) {
    const cap = lookup(part.capability);
    const needed = demand(cap, { intent: envelope.intent, pins: envelope.pins });
    const adapters = makeAdapters();
    adapterLog.push(adapters);
    let digest = part.set;
    let manifest = null;
    try {
      if (digest === null) digest = await source.defaultFor(cap.name);
      manifest = await source.manifest(digest);
    } catch (err) {
      if (err.code !== "set_not_installed") throw err;
      const absent = new Map([...adapters].map(([k, a]) => [k, withoutProgram(a)]));
      reports.push((await choose(cap, needed, offer, absent)).report);
      decodes.push({ set_digest: digest, symbols_digest: null, report: reports.at(-1) });
      continue;
    }
    if (manifest.capability !== cap.name) throw new WaiError("set_capability_mismatch", `set ${digest.slice(0, 16)}… is for ${manifest.capability}, not ${cap.name}`);
    const stage = await entropyStage(source, digest, manifest, part.payload);
    const job = new Job(source, digest, manifest, stage.header, stage.latent, stage.symbols);
    const decision = await choose(cap, needed, offer, adapters, job);
    reports.push(decision.report);
    parts.push({ capability: cap.name, set: digest, symbolsDigest: stage.symbolsDigest, shape: stage.header.shape });
    decodes.push({ set_digest: digest, symbols_digest: stage.symbolsDigest, report: decision.report });
    if (decision.report.ran !== null) {
      const picture = cropPicture(decision.output.rgb ?? toRgb8(decision.output.xHat, decision.output.shape), stage.header.picture);
      return { decoded: true, reports, parts, picture, adapters: adapterLog, decodes };
    }
  }
  return { decoded: false, reports, parts, picture: null, adapters: adapterLog, decodes };
}

/** Round half to even, as numpy's rint. */
function rint(x) {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** The synthesis output (1×3×H×W float32) as RGB8 {width, height, data: H×W×3}: clamp to
 * [0, 1], times 255 in float32, round half to even (docs/decoding.md). */
export function toRgb8(xHat, shape) {
  const [, channels, height, width] = shape;
  if (channels !== 3) throw new Error(`synthesis output has ${channels} channels, not 3`);
  const plane = height * width;
  const data = new Uint8Array(plane * 3);
  for (let c = 0; c < 3; c++) {
    for (let i = 0; i < plane; i++) {
      const v = Math.min(Math.max(xHat[c * plane + i], 0), 1);
      data[i * 3 + c] = rint(Math.fround(Math.fround(v) * 255));
    }
  }
  return { width, height, data };
}

/** RGB8 {width, height, data} cropped to its top-left `size` {width, height} (the picture a
 * version-2 payload carries, docs/payload.md); `size` null: as it is. */
export function cropPicture(rgb, size) {
  if (!size || (size.width === rgb.width && size.height === rgb.height)) return rgb;
  if (size.width > rgb.width || size.height > rgb.height) {
    throw new WaiError("payload_header_invalid", `payload: its picture ${size.width}×${size.height} is larger than the synthesis's output ${rgb.width}×${rgb.height}`);
  }
  const data = new Uint8Array(size.width * size.height * 3);
  for (let y = 0; y < size.height; y++) {
    data.set(rgb.data.subarray(3 * y * rgb.width, 3 * (y * rgb.width + size.width)), 3 * y * size.width);
  }
  return { width: size.width, height: size.height, data };
}

/** An integer program's rgb8 output ([3, H, W], each an integer 0 … 255) as RGB8 (H×W×3). */
export function rgb8Planar(data, shape) {
  const [channels, height, width] = shape;
  if (channels !== 3) throw new Error(`the program's output has ${channels} channels, not 3`);
  const plane = height * width;
  const out = new Uint8Array(plane * 3);
  for (let c = 0; c < 3; c++) {
    for (let i = 0; i < plane; i++) {
      const v = data[c * plane + i];
      if (!Number.isInteger(v) || v < 0 || v > 255) throw new Error(`the program's rgb8 output holds ${v}`);
      out[i * 3 + c] = v;
    }
  }
  return { width, height, data: out };
}

/** BLAKE3 (hex) of bytes. */
export function blake3Hex(bytes) {
  return bytesToHex(blake3(bytes));
}
