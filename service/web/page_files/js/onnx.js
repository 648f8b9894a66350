// The ONNX Runtime Web paths (§1, §4, §5): the set's `onnx-runtime` program (decoder.onnx and
// its external weights, read through the page's data routes) on ONNX Runtime Web 1.30.0,
// vendored in vendor/onnxruntime_web/ (docs/third-party.md). Each of its two builds is imported
// only when the path that needs it is tried, never on the page's load.
//
// cpu/onnx-runtime/float runs on the WebAssembly build's CPU backend (`wasm`; one thread: no
// SharedArrayBuffer, no cross-origin isolation needed).
//
// gpu/onnx-runtime/float asks the browser for a WebGPU adapter. A fallback/software adapter
// (SwiftShader, llvmpipe, …) computes on the CPU: the adapter's statement places every operation
// on the CPU, so §5 refuses the path with dispatch_not_placed and the WebAssembly path runs; the
// WebGPU build is not loaded. On a hardware adapter the WebGPU build (ort.webgpu.min.mjs, its
// `webgpu` execution provider) runs the decoder on a device of that very adapter.
//
// Neither states a placement per operation (ONNX Runtime Web's API gives none): `plan` is null
// and the report says the unit the page asked for, with `placement` null, as §5 says of WebNN.
import { CPU_ONNX_RUNTIME, GPU_ONNX_RUNTIME, pathKey } from "./dispatch/offer.js";
import { describeAdapter, isSoftware } from "./webgpu.js";

export const ONNX_PATHS = Object.freeze([GPU_ONNX_RUNTIME, CPU_ONNX_RUNTIME]);
/** The vendored runtime's folder: its WebAssembly build and its WebGPU build. */
export const ORT_FOLDER = new URL("../vendor/onnxruntime_web/", import.meta.url).href;
/** The WebAssembly build (cpu/onnx-runtime/float): ort-wasm-simd-threaded.{mjs,wasm}. */
export const ORT_MODULE = `${ORT_FOLDER}ort.wasm.min.mjs`;
/** The WebGPU build (gpu/onnx-runtime/float): ort-wasm-simd-threaded.asyncify.{mjs,wasm}. */
export const ORT_WEBGPU_MODULE = `${ORT_FOLDER}ort.webgpu.min.mjs`;

const runtimes = new Map(); // module URL → the imported build

/** One build of ONNX Runtime Web, imported once, on first use; numThreads 1, the vendored
 * folder's wasm. */
export function loadRuntime(module = ORT_MODULE) {
  if (!runtimes.has(module)) {
    const loading = import(module).then((ort) => {
      ort.env.wasm.wasmPaths = ORT_FOLDER;
      ort.env.wasm.numThreads = 1;
      ort.env.wasm.proxy = false;
      return ort;
    });
    runtimes.set(module, loading);
    loading.catch(() => runtimes.delete(module));
  }
  return runtimes.get(module);
}

/** The WebAssembly build's sessions by set digest (one decoder per set), kept between decodes. */
const sessions = new Map();

/** A session of the set's decoder on `provider` ("wasm", or "webgpu" on `device`), kept in
 * `cache` by set digest. */
function session(ort, job, provider = "wasm", device = null, cache = sessions) {
  const key = job.digest;
  if (!cache.has(key)) {
    const ep = provider === "webgpu" ? { name: "webgpu", device } : "wasm";
    const creating = job.loadOnnx().then(({ model, weights, program }) =>
      ort.InferenceSession.create(model, {
        executionProviders: [ep],
        graphOptimizationLevel: "all",
        externalData: [{ path: program.weights, data: weights }],
      }));
    cache.set(key, creating);
    creating.catch(() => cache.delete(key));
  }
  return cache.get(key);
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

/** Whether an open session takes the job's latent: its input named as the program says, of the
 * latent's shape. */
function sessionTakes(s, job) {
  const name = job.onnxProgram().input || s.inputNames[0];
  const meta = (s.inputMetadata || []).find((m) => m.name === name);
  if (!s.inputNames.includes(name)) return false;
  return meta === undefined || meta.shape === undefined || inputTakes(meta.shape, job.header.shape);
}

/** The decoder on the job's latent: the synthesis output, read back to the CPU. */
async function runSession(ort, s, job) {
  const program = job.onnxProgram();
  const input = program.input || s.inputNames[0];
  const output = program.output || s.outputNames[0];
  const latent = new ort.Tensor("float32", job.latent, job.header.shape);
  const out = (await s.run({ [input]: latent }))[output];
  return { xHat: out.location === "cpu" ? out.data : await out.getData(), shape: out.dims };
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
      return sessionTakes(await session(this.ort, job), job);
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
      return await runSession(this.ort, await session(this.ort, job), job);
    } catch (err) {
      this.reason = `ONNX Runtime Web failed the decode: ${message(err)}`;
      throw err;
    }
  }
}

/** The WebGPU build's device, made once from the first adapter the path takes, with that
 * adapter's limits; its sessions by set digest. Dropped when the device is lost. */
let gpuShared = null;

/** The adapter's limits ONNX Runtime's WebGPU execution provider asks for (as it asks when it
 * makes its own device): the adapter's own. */
const DEVICE_LIMITS = [
  "maxBindGroups", "maxComputeWorkgroupStorageSize", "maxComputeWorkgroupsPerDimension",
  "maxStorageBufferBindingSize", "maxBufferSize", "maxComputeInvocationsPerWorkgroup",
  "maxComputeWorkgroupSizeX", "maxComputeWorkgroupSizeY", "maxComputeWorkgroupSizeZ",
];

async function gpuDevice(adapter) {
  if (gpuShared === null || gpuShared.adapter !== adapter) {
    const requiredLimits = {};
    for (const name of DEVICE_LIMITS) if (adapter.limits[name] !== undefined) requiredLimits[name] = adapter.limits[name];
    const device = await adapter.requestDevice({ requiredLimits });
    const shared = { adapter, device, sessions: new Map() };
    device.lost.then(() => { if (gpuShared === shared) gpuShared = null; });
    gpuShared = shared;
  }
  return gpuShared;
}

/** gpu/onnx-runtime/float: ONNX Runtime Web's WebGPU build (its `webgpu` execution provider) on
 * a hardware adapter; a software adapter is refused by its plan (every operation on the CPU). */
export class OrtWebGpuAdapter {
  constructor(gpu) {
    this.path = GPU_ONNX_RUNTIME;
    this.gpu = gpu;
    this.adapter = null;
    this.ort = null;
    this.reason = null;
  }

  async unitPresent() {
    if (!this.gpu) {
      this.reason = "this browser exposes no navigator.gpu (WebGPU)";
      return false;
    }
    if (gpuShared !== null) {
      this.adapter = gpuShared.adapter; // the adapter whose device runs this page's sessions
      return true;
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
    return true; // a software adapter too: its plan, below, says where it computes
  }

  programPresent(job) {
    return job.onnxProgram() !== null;
  }

  /** The WebGPU build's session of the decoder on this adapter's device (loads the build). */
  async #session(job) {
    this.ort = await loadRuntime(ORT_WEBGPU_MODULE);
    const { device, sessions: cache } = await gpuDevice(this.adapter);
    return session(this.ort, job, "webgpu", device, cache);
  }

  async takesShape(job) {
    // A software adapter is refused by its plan; the WebGPU build is not loaded for it, and the
    // shape is the decoder's own, asked of the WebAssembly build (which the next path opens).
    try {
      if (isSoftware(this.adapter)) return sessionTakes(await session(await loadRuntime(), job), job);
      return sessionTakes(await this.#session(job), job);
    } catch (err) {
      this.reason = `adapter ${describeAdapter(this.adapter)}: ONNX Runtime Web could not open the set's decoder: ${message(err)}`;
      throw err;
    }
  }

  /** A software adapter's statement: every operation of the program on the CPU. A hardware
   * adapter's: none (ONNX Runtime Web states no placement per operation, §5). */
  plan(job) {
    if (!isSoftware(this.adapter)) return null;
    this.reason = `adapter ${describeAdapter(this.adapter)}: every operation would run on the CPU`;
    return { npu: 0, gpu: 0, cpu: job.onnxProgram().operations ?? 1, unknown: 0 };
  }

  /** The decoder through the `webgpu` execution provider on this adapter's device. The page's
   * dispatch runs it on a hardware adapter only (a software one's plan refuses it first); the
   * tests run it on SwiftShader too. */
  async run(job) {
    try {
      const s = await this.#session(job);
      return await runSession(this.ort, s, job);
    } catch (err) {
      this.reason = `adapter ${describeAdapter(this.adapter)}: ONNX Runtime Web's WebGPU backend failed the decode: ${message(err)}`;
      throw err;
    }
  }
}

/** Fresh adapters for the ONNX Runtime Web paths. */
export function onnxAdapters(gpu) {
  return new Map([
    [pathKey(GPU_ONNX_RUNTIME), new OrtWebGpuAdapter(gpu)],
    [pathKey(CPU_ONNX_RUNTIME), new OrtWasmAdapter()],
  ]);
}
