// The integer path cpu/wai-ops/integer in the page (§3, §4, §5), offered after gpu/wgsl/integer:
// wai.neural.int_synth's wai-ops/1 program as the float32 graph the native `float32` engine
// runs (paths/waiops/onnx_engine.py build_model, served as the service builds it: route
// sets/DIGEST/waiops/float32.onnx), on ONNX Runtime Web's WebAssembly build (js/onnx.js's
// loadRuntime: the build cpu/onnx-runtime/float loads, imported only when this path is tried).
//
// Exact, so the path holds decode-equivalence as the native one does (docs/wai-ops.md, "Why a
// float engine may compute it exactly"): the service serves a graph only for a program the bound
// rule proves float32-exact (every value, intermediate and partial sum an integer below 2^24, or
// a power-of-two scaling of one), so every product, sum and fused multiply-add is exact whatever
// the kernel's order or blocking; `requantize` is Floor of a power-of-two scaling, and `isqrt`
// is Floor(Sqrt(n)), exact where the square root is correctly rounded: this build is checked
// for that first, at every r² and r² − 1 below 2^24 (route waiops/isqrt-check, the native
// check_sqrt's graph), and a build that fails it has no exact engine here
// (dispatch_unit_absent). The session runs the graph as served, its optimizations off, so no
// rewrite the proof does not cover takes place; the symbols are held to the program's declared
// input range (the proof's premise) before it runs; the output must be integers 0 … 255.
// Placement: every operation on the CPU (WebAssembly computes on the CPU), as the native path.
import { CPU_WAI_OPS } from "./dispatch/offer.js";
import { WaiError } from "./dispatch/tokens.js";
import { rgb8Planar } from "./decode.js";
import { loadRuntime } from "./onnx.js";

/** ONNX Runtime's graph optimizations for these sessions: none (the module's note). */
export const OPTIMIZATION = "disabled";

const sessions = new Map(); // set digest → the graph's session
let sqrtChecked = null; // the check's promise: null (exact) or why not

function message(err) {
  return `${err && err.name ? err.name + ": " : ""}${err && err.message ? err.message : err}`;
}

function open(ort, bytes) {
  return ort.InferenceSession.create(bytes, { executionProviders: ["wasm"], graphOptimizationLevel: OPTIMIZATION });
}

/** Whether this build's Floor(Sqrt(n)) is isqrt(n) at every r² and r² − 1, r = 1 … 4096 (where a
 * square root that is not correctly rounded would fail; between them a monotone one cannot), as
 * paths/waiops/onnx_engine.py check_sqrt; checked once per page. null, or why not. */
export function checkSqrt(ort, source) {
  if (sqrtChecked === null) {
    sqrtChecked = (async () => {
      const s = await open(ort, new Uint8Array(await source.isqrtCheck()));
      const n = new Float32Array(2 * 4096);
      const want = new Int32Array(2 * 4096);
      for (let r = 1; r <= 4096; r++) {
        [n[r - 1], want[r - 1]] = [r * r, r];
        [n[4095 + r], want[4095 + r]] = [r * r - 1, r - 1];
      }
      const got = (await s.run({ n: new ort.Tensor("float32", n, [n.length]) })).r.data;
      await s.release();
      const bad = want.findIndex((r, i) => got[i] !== r);
      return bad < 0 ? null : `ONNX Runtime Web's Floor(Sqrt(${n[bad]})) is ${got[bad]}, not ${want[bad]}: its square root is not correctly rounded, so no exact engine runs here`;
    })();
    sqrtChecked.catch(() => { sqrtChecked = null; });
  }
  return sqrtChecked;
}

/** cpu/wai-ops/integer's adapter: §4's questions (ONNX Runtime Web and an exact square root; the
 * set's float32-exact graph; the program's channels), the placement (§5) and the run. */
export class WaiOpsWasmAdapter {
  constructor(source) {
    this.path = CPU_WAI_OPS;
    this.source = source;
    this.reason = null;
    this.ort = null;
    this.loaded = null;
  }

  async unitPresent() {
    try {
      this.ort = await loadRuntime();
    } catch (err) {
      this.reason = `ONNX Runtime Web did not load: ${message(err)}`;
      return false;
    }
    const why = await checkSqrt(this.ort, this.source);
    if (why !== null) this.reason = why;
    return why === null;
  }

  /** The set's wai-ops program and its float32-exact graph; a program the service has no such
   * graph for (its bounds reach 2^24) is absent for this path, with the service's reason. */
  async programPresent(job) {
    if (job.waiOpsProgram() === null) return false;
    try {
      this.loaded = await job.loadWaiOpsGraph();
    } catch (err) {
      this.reason = `the service gave no float32-exact graph: ${err.code ? err.code + ": " : ""}${err.message}`;
      if (err.code === "page_not_found") return false;
      throw err;
    }
    return true;
  }

  async takesShape(job) {
    const channels = this.loaded.program.input.channels;
    if (job.header.shape[1] !== channels) {
      this.reason = `the program takes ${channels} channels, the payload has ${job.header.shape[1]}`;
      return false;
    }
    try {
      return (await this.#session(job)).inputNames.includes("symbols");
    } catch (err) {
      this.reason = `ONNX Runtime Web could not open the program's graph: ${message(err)}`;
      throw err;
    }
  }

  #session(job) {
    if (!sessions.has(job.digest)) {
      const creating = open(this.ort, this.loaded.graph);
      sessions.set(job.digest, creating);
      creating.catch(() => sessions.delete(job.digest));
    }
    return sessions.get(job.digest);
  }

  plan() {
    return { npu: 0, gpu: 0, cpu: this.loaded.program.operations.length, unknown: 0 };
  }

  async run(job) {
    try {
      const [lo, hi] = this.loaded.program.input.range;
      const symbols = job.symbols;
      for (let i = 0; i < symbols.length; i++) {
        const v = symbols[i];
        if (v < lo || v > hi) throw new WaiError("waiops_input_out_of_range", `wai-ops input value ${v} is outside the program's declared range [${lo}, ${hi}]`);
      }
      const x = new this.ort.Tensor("float32", Float32Array.from(symbols), job.header.shape);
      const out = (await (await this.#session(job)).run({ symbols: x })).out;
      return { rgb: rgb8Planar(out.data, out.dims.slice(1)) };
    } catch (err) {
      this.reason = `the WebAssembly engine failed the decode: ${err.code ? err.code + ": " : ""}${message(err)}`;
      throw err;
    }
  }
}
