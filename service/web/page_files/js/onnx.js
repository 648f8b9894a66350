// The ONNX Runtime Web paths (§1, §4, §5): the set's `onnx-runtime` program (decoder.onnx and
// its external weights, read through the page's data routes) on ONNX Runtime Web, vendored in
// vendor/onnxruntime_web/ (docs/third-party.md) and imported only when a float path is tried.
//
// cpu/onnx-runtime/float runs on ONNX Runtime Web's WebAssembly backend (one thread: no
// SharedArrayBuffer, no cross-origin isolation needed). It states no placement: `plan` is null.
//
// gpu/onnx-runtime/float asks the browser for a WebGPU adapter. A fallback/software adapter
// (SwiftShader, llvmpipe, …) computes on the CPU: the adapter's statement places every operation
// on the CPU, so §5 refuses the path with dispatch_not_placed and the WebAssembly path runs. A
// hardware adapter needs ONNX Runtime Web's WebGPU build, which this build does not vendor (27 MB
// against the WebAssembly build's 14 MB): the path is dispatch_unit_absent, with that reason.
import { CPU_ONNX_RUNTIME, GPU_ONNX_RUNTIME, pathKey } from "./dispatch/paths.js";
import { describeAdapter, isSoftware } from "./webgpu.js";

export const ONNX_PATHS = Object.freeze([GPU_ONNX_RUNTIME, CPU_ONNX_RUNTIME]);
/** The vendored runtime (its WebAssembly build only). */
export const ORT_FOLDER = new URL("../vendor/onnxruntime_web/", import.meta.url).href;
export const ORT_MODULE = `${ORT_FOLDER}ort.wasm.min.mjs`;

let runtime = null;

/** ONNX Runtime Web, imported once, on first use; numThreads 1, the vendored folder's wasm. */
export function loadRuntime() {
  if (runtime === null) {
    runtime = import(ORT_MODULE).then((ort) => {
      ort.env.wasm.wasmPaths = ORT_FOLDER;
      ort.env.wasm.numThreads = 1;
      ort.env.wasm.proxy = false;
      return ort;
    });
    runtime.catch(() => { runtime = null; });
  }
  return runtime;
}

/** Sessions by set digest (one decoder per set), kept between decodes. */
const sessions = new Map();

function session(ort, job) {
  if (!sessions.has(job.digest)) {
    const creating = job.loadOnnx().then(({ model, weights, program }) =>
      ort.InferenceSession.create(model, {
        executionProviders: ["wasm"],
        graphOptimizationLevel: "all",
        externalData: [{ path: program.weights, data: weights }],
      }));
    sessions.set(job.digest, creating);
    creating.catch(() => sessions.delete(job.digest));
  }
  return sessions.get(job.digest);
}

/** Whether the session's one input takes the latent's shape: fixed dimensions equal, named
 * (dynamic) ones free. */
export function inputTakes(shape, wanted) {
  if (!Array.isArray(shape) || shape.length !== wanted.length) return false;
  return shape.every((d, i) => typeof d !== "number" || d < 0 || d === wanted[i]);
}

function message(err) {
  return `${err && err.name ? err.name + ": " : ""}${err && err.message ? err.message : err}`;
}

/** cpu/onnx-runtime/float: ONNX Runtime Web's WebAssembly backend. */
export class OrtWasmAdapter {
  constructor() {
    this.path = CPU_ONNX_RUNTIME;
    this.reason = null;
    this.ort = null;
  }

  async unitPresent() {
    try {
      this.ort = await loadRuntime();
    } catch (err) {
      this.reason = `ONNX Runtime Web did not load: ${message(err)}`;
      return false;
    }
    return true;
  }

  programPresent(job) {
    return job.onnxProgram() !== null;
  }

  async takesShape(job) {
    try {
      const s = await session(this.ort, job);
      const name = job.onnxProgram().input || s.inputNames[0];
      const meta = (s.inputMetadata || []).find((m) => m.name === name);
      if (!s.inputNames.includes(name)) return false;
      return meta === undefined || meta.shape === undefined || inputTakes(meta.shape, job.header.shape);
    } catch (err) {
      this.reason = `ONNX Runtime Web could not open the set's decoder: ${message(err)}`;
      throw err;
    }
  }

  plan() {
    return null; // ONNX Runtime Web states no placement (§5)
  }

  async run(job) {
    try {
      const s = await session(this.ort, job);
      const program = job.onnxProgram();
      const input = program.input || s.inputNames[0];
      const output = program.output || s.outputNames[0];
      const latent = new this.ort.Tensor("float32", job.latent, job.header.shape);
      const out = (await s.run({ [input]: latent }))[output];
      return { xHat: out.data, shape: out.dims };
    } catch (err) {
      this.reason = `ONNX Runtime Web failed the decode: ${message(err)}`;
      throw err;
    }
  }
}

/** gpu/onnx-runtime/float: ONNX Runtime Web's WebGPU backend, on a hardware adapter only. */
export class OrtWebGpuAdapter {
  constructor(gpu) {
    this.path = GPU_ONNX_RUNTIME;
    this.gpu = gpu;
    this.adapter = null;
    this.reason = null;
  }

  async unitPresent() {
    if (!this.gpu) {
      this.reason = "this browser exposes no navigator.gpu (WebGPU)";
      return false;
    }
    try {
      this.adapter = await this.gpu.requestAdapter({ powerPreference: "high-performance" });
    } catch (err) {
      this.reason = `navigator.gpu.requestAdapter() failed: ${message(err)}`;
      return false;
    }
    if (!this.adapter) {
      this.reason = "navigator.gpu.requestAdapter() gave no adapter";
      return false;
    }
    if (isSoftware(this.adapter)) return true; // its plan, below, says where it computes
    this.reason = `adapter ${describeAdapter(this.adapter)}: this build vendors ONNX Runtime Web's WebAssembly backend only, not its WebGPU build`;
    return false;
  }

  programPresent(job) {
    return job.onnxProgram() !== null;
  }

  takesShape() {
    return true; // asked of the WebAssembly path, which opens the decoder
  }

  /** A software adapter's statement: every operation of the program on the CPU. */
  plan(job) {
    this.reason = `adapter ${describeAdapter(this.adapter)}: every operation would run on the CPU`;
    return { npu: 0, gpu: 0, cpu: job.onnxProgram().operations ?? 1, unknown: 0 };
  }

  run() {
    throw new Error("gpu/onnx-runtime/float runs only on a hardware adapter");
  }
}

/** Fresh adapters for the ONNX Runtime Web paths. */
export function onnxAdapters(gpu) {
  return new Map([
    [pathKey(GPU_ONNX_RUNTIME), new OrtWebGpuAdapter(gpu)],
    [pathKey(CPU_ONNX_RUNTIME), new OrtWasmAdapter()],
  ]);
}
