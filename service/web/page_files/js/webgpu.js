// The WebGPU path gpu/wgsl/integer (§3, §4, §5) in the page: wai.neural.int_synth's wai-ops/1
// program run through the SAME WGSL kernels as the Python path. The service renders them once
// from their descriptors and plans every operation against THIS browser's adapter limits
// (route sets/DIGEST/wgsl/plan); the page uploads the set's integer weights, binds, dispatches
// and reads back exactly as paths/wgsl/runner.py does. Placement is the adapter's statement: a
// fallback (software) adapter puts every operation on the CPU, so §5 refuses the path with
// dispatch_not_placed, as the Python path does on lavapipe.
import { GPU_WGSL } from "./dispatch/offer.js";

const MIN_BUFFER = 16;
/** The device limits the kernel descriptors read (paths/wgsl/runner.py LIMITS). */
export const LIMITS = [
  "maxComputeWorkgroupsPerDimension",
  "maxStorageBufferBindingSize",
  "maxBufferSize",
  "maxUniformBufferBindingSize",
  "maxComputeInvocationsPerWorkgroup",
  "maxComputeWorkgroupSizeX",
  "maxStorageBuffersPerShaderStage",
];
const SOFTWARE = /swiftshader|llvmpipe|lavapipe|software|\bcpu\b/i;

/** The adapter's limits with any `limit.NAME=N` of a URL query applied, each only ever
 * lowered (never raised): a way to see banded kernels, or a refusal, on a large adapter. */
export function loweredLimits(limits, search = "") {
  const out = { ...limits };
  for (const [key, value] of new URLSearchParams(search)) {
    const name = key.startsWith("limit.") ? key.slice(6) : null;
    if (name && LIMITS.includes(name) && Number(value) > 0) out[name] = Math.min(out[name], Math.floor(Number(value)));
  }
  return out;
}

/** Whether an adapter is a software one: isFallbackAdapter (info or adapter), or info naming a
 * software rasteriser. */
export function isSoftware(adapter) {
  const info = adapter.info || {};
  if (info.isFallbackAdapter === true || adapter.isFallbackAdapter === true) return true;
  return [info.vendor, info.architecture, info.device, info.description].some((s) => s && SOFTWARE.test(s));
}

export function describeAdapter(adapter) {
  const info = adapter.info || {};
  const name = [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(" ");
  return `${name || "unnamed adapter"}${isSoftware(adapter) ? " (fallback/software: its work runs on the CPU)" : ""}`;
}

/** One WebGPU device: buffers, pipelines (cached per source), dispatch, readback. */
export class GpuRunner {
  static current = null;

  constructor(adapter, device) {
    this.adapter = adapter;
    this.device = device;
    this.pipelines = new Map();
    this.limits = Object.fromEntries(LIMITS.map((k) => [k, Number(device.limits[k])]));
  }

  /** One runner per page (its device and pipelines kept between decodes); a lost device is
   * dropped, and the next decode asks for a new one. */
  static shared(gpu) {
    if (!GpuRunner.current) {
      GpuRunner.current = GpuRunner.acquire(gpu).then(
        (runner) => {
          runner.device.lost.then(() => { GpuRunner.current = null; });
          return runner;
        },
        (err) => { GpuRunner.current = null; throw err; },
      );
    }
    return GpuRunner.current;
  }

  static async acquire(gpu) {
    if (!gpu) throw new Error("this browser exposes no navigator.gpu (WebGPU)");
    const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
    if (!adapter) throw new Error("navigator.gpu.requestAdapter() gave no adapter");
    const wanted = ["maxStorageBufferBindingSize", "maxBufferSize"];
    const device = await adapter.requestDevice({ requiredLimits: Object.fromEntries(wanted.map((k) => [k, adapter.limits[k]])) });
    return new GpuRunner(adapter, device);
  }

  upload(int32) {
    const size = Math.max(MIN_BUFFER, int32.byteLength);
    const buffer = this.device.createBuffer({ size, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
    if (int32.byteLength) this.device.queue.writeBuffer(buffer, 0, int32.buffer, int32.byteOffset, int32.byteLength);
    return buffer;
  }

  output(count) {
    return this.device.createBuffer({ size: Math.max(MIN_BUFFER, 4 * count), usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  }

  async read(buffer, count) {
    const staging = this.device.createBuffer({ size: buffer.size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const encoder = this.device.createCommandEncoder();
    encoder.copyBufferToBuffer(buffer, 0, staging, 0, buffer.size);
    this.device.queue.submit([encoder.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    const out = new Int32Array(staging.getMappedRange().slice(0, 4 * count));
    staging.unmap();
    staging.destroy();
    return out;
  }

  async pipeline(source) {
    let hit = this.pipelines.get(source);
    if (!hit) {
      const module = this.device.createShaderModule({ code: source });
      const info = await module.getCompilationInfo();
      const errors = info.messages.filter((m) => m.type === "error");
      if (errors.length) throw new Error(`the WGSL kernel does not compile: ${errors[0].message}`);
      hit = await this.device.createComputePipelineAsync({ layout: "auto", compute: { module, entryPoint: "main" } });
      this.pipelines.set(source, hit);
    }
    return hit;
  }

  /** Bind buffers (in binding order) and the uniform struct (its last binding: 4 bytes a value). */
  async dispatch(source, buffers, uniform, groups) {
    const pipeline = await this.pipeline(source);
    const words = Math.ceil(uniform.length / 4) * 4 || 4;
    const packed = new DataView(new ArrayBuffer(4 * words));
    uniform.forEach(([kind, value], i) => (kind === "i32" ? packed.setInt32(4 * i, value, true) : packed.setUint32(4 * i, value, true)));
    const params = this.device.createBuffer({ size: packed.byteLength, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
    this.device.queue.writeBuffer(params, 0, packed.buffer);
    const entries = [...buffers, params].map((buffer, binding) => ({ binding, resource: { buffer } }));
    const group = this.device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries });
    const encoder = this.device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, group);
    pass.dispatchWorkgroups(groups[0], groups[1], 1);
    pass.end();
    this.device.queue.submit([encoder.finish()]);
  }
}

/**
 * Run a planned program (the service's plan for this adapter's limits) on `symbols`
 * (Int32Array, [C, h, w] in payload order); the output's int32 values, [C, H, W].
 * plan: {input, output, sources: [wgsl], constants: {"op/role": {offset, count}},
 *        operations: [{name, inputs, output, source, out_shape, whole, bindings, bands}]}
 * with each band {uniform: [[kind, value]], groups: [x, y], in_row0, in_rows, out_row0, rows}.
 */
export async function runProgram(runner, plan, symbols, inputShape, constantsBlob) {
  const constants = new Map();
  const constant = (op, role) => {
    const key = `${op.name}/${role}`;
    if (!constants.has(key)) {
      const c = plan.constants[key];
      if (!c) throw new Error(`the plan has no constant ${key}`);
      constants.set(key, runner.upload(new Int32Array(constantsBlob, c.offset, c.count)));
    }
    return constants.get(key);
  };
  const lastUse = new Map();
  plan.operations.forEach((op, k) => op.inputs.forEach((name) => lastUse.set(name, k)));
  const values = new Map([[plan.input, { shape: inputShape, host: symbols, buffer: null }]]);
  const onDevice = (v) => (v.buffer ??= runner.upload(v.host));
  const onHost = async (v) => (v.host ??= await runner.read(v.buffer, v.shape[0] * v.shape[1] * v.shape[2]));
  for (const [k, op] of plan.operations.entries()) {
    const inputs = op.inputs.map((name) => values.get(name));
    const source = plan.sources[op.source];
    const [, c, h, w] = op.out_shape;
    let result;
    if (op.whole) {
      const [band] = op.bands;
      const out = runner.output(c * h * w);
      const buffers = op.bindings.map((s) => (s === "X" ? onDevice(inputs[0]) : s === "X2" ? onDevice(inputs[1]) : s === "Y" ? out : constant(op, s)));
      await runner.dispatch(source, buffers, band.uniform, band.groups);
      result = { shape: [c, h, w], buffer: out, host: null };
    } else {
      const hosts = await Promise.all(inputs.map(onHost));
      const host = new Int32Array(c * h * w);
      for (const band of op.bands) {
        const out = runner.output(c * band.rows * w);
        const rows = (x, v) => {
          const [vc, vh, vw] = v.shape;
          const part = new Int32Array(vc * band.in_rows * vw);
          for (let ch = 0; ch < vc; ch++) part.set(x.subarray((ch * vh + band.in_row0) * vw, (ch * vh + band.in_row0 + band.in_rows) * vw), ch * band.in_rows * vw);
          return runner.upload(part);
        };
        const buffers = op.bindings.map((s) => (s === "X" ? rows(hosts[0], inputs[0]) : s === "X2" ? rows(hosts[1], inputs[1]) : s === "Y" ? out : constant(op, s)));
        await runner.dispatch(source, buffers, band.uniform, band.groups);
        const got = await runner.read(out, c * band.rows * w);
        for (let ch = 0; ch < c; ch++) host.set(got.subarray(ch * band.rows * w, (ch + 1) * band.rows * w), (ch * h + band.out_row0) * w);
      }
      result = { shape: [c, h, w], buffer: null, host };
    }
    values.set(op.output, result);
    for (const name of new Set(op.inputs)) if (lastUse.get(name) === k && name !== plan.output) values.delete(name);
  }
  const out = values.get(plan.output);
  return { shape: out.shape, data: await onHost(out) };
}

/** gpu/wgsl/integer's adapter: §4's questions (an adapter; a wai-ops program in the set; a
 * kernel plan for this shape under the adapter's limits, else dispatch_shape_mismatch), the
 * adapter's placement (§5), and the run. */
export class WgslAdapter {
  constructor(gpu, { search = "" } = {}) {
    this.path = GPU_WGSL;
    this.gpu = gpu;
    this.search = search;
    this.runner = null;
    this.reason = null;
    this.planned = null;
  }

  async unitPresent() {
    try {
      this.runner = await GpuRunner.shared(this.gpu);
    } catch (err) {
      this.reason = err.message;
      return false;
    }
    this.adapterName = describeAdapter(this.runner.adapter);
    return true;
  }

  programPresent(job) {
    return job.waiOpsProgram() !== null;
  }

  async takesShape(job) {
    try {
      this.planned = await job.loadWgslPlan(loweredLimits(this.runner.limits, this.search));
    } catch (err) {
      this.reason = `the service gave no kernel plan: ${err.code ? err.code + ": " : ""}${err.message}`;
      throw err;
    }
    if (this.planned.refused) this.reason = this.planned.refused;
    return !this.planned.refused;
  }

  plan() {
    const n = this.planned.operations.length;
    const software = isSoftware(this.runner.adapter);
    if (software) this.reason = `${this.adapterName}: every operation is placed on the CPU`;
    return { npu: 0, gpu: software ? 0 : n, cpu: software ? n : 0, unknown: 0 };
  }

  async run(job) {
    try {
      return await job.runWgsl(this.runner, this.planned);
    } catch (err) {
      this.reason = `WebGPU failed the decode: ${err.message}`;
      throw err;
    }
  }
}
