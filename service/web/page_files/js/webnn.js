// The WebNN paths (§6.2): the synthesis of wai.neural.bmshj2018 built from the set's WebNN form
// (webnn-graph GraphJson, decoder.webnn.json, with its weights manifest and float32 weights),
// on a context created for the neural processor, the GPU or the CPU. WebNN states no placement:
// `plan` is null and the report names the unit the context was created for.
import { NPU_WEBNN, GPU_WEBNN, CPU_WEBNN, pathKey } from "./dispatch/offer.js";

export const WEBNN_PATHS = Object.freeze([NPU_WEBNN, GPU_WEBNN, CPU_WEBNN]);

/** One WebNN path's adapter. `ml` is navigator.ml (or undefined). The reason it is absent, or
 * the error its backend raised, is kept in `reason` for the page to show. */
export class WebNNAdapter {
  constructor(path, ml) {
    this.path = path;
    this.ml = ml;
    this.context = null;
    this.reason = null;
  }

  async unitPresent() {
    if (!this.ml || typeof this.ml.createContext !== "function") {
      this.reason = "this browser exposes no navigator.ml (WebNN)";
      return false;
    }
    try {
      this.context = await this.ml.createContext({ deviceType: this.path.unit });
    } catch (err) {
      this.reason = `createContext({deviceType: "${this.path.unit}"}) failed: ${err && err.name ? err.name + ": " : ""}${err && err.message ? err.message : err}`;
      return false;
    }
    return true;
  }

  programPresent(job) {
    return job.webnnProgram() !== null;
  }

  async takesShape(job) {
    const program = await job.loadWebnn();
    return takesShape(program.graph, job.header);
  }

  plan() {
    return null;
  }

  async run(job) {
    try {
      const program = await job.loadWebnn();
      const { graph, output, outputShape } = await buildGraph(this.context, program, job.header);
      const out = await compute(this.context, graph, job.latent, job.header, output, outputShape);
      return { xHat: out, shape: outputShape };
    } catch (err) {
      this.reason = `WebNN failed the decode: ${err && err.message ? err.message : err}`;
      throw err;
    }
  }
}

export function webnnAdapters(ml) {
  return new Map(WEBNN_PATHS.map((p) => [pathKey(p), new WebNNAdapter(p, ml)]));
}

/** The latent dimension names of the graph's one input, with their sizes for this payload. */
function dims(graph, header) {
  const input = graph.inputs.latent;
  const actual = header.shape;
  const named = {};
  if (!input || input.shape.length !== 4) return null;
  for (let i = 0; i < 4; i++) {
    const d = input.shape[i];
    if (typeof d === "number") {
      if (d !== actual[i]) return null;
    } else {
      if (actual[i] > d.maxSize) return null;
      named[d.name] = actual[i];
    }
  }
  return named;
}

export function takesShape(graph, header) {
  return dims(graph, header) !== null;
}

function size(value, named) {
  return typeof value === "number" ? value : named[value.dim] * value.mul;
}

function desc(shape) {
  // `shape` is the current name; `dimensions` the one older Chromium builds read.
  return { dataType: "float32", shape, dimensions: shape };
}

/** Build the GraphJson's nodes with an MLGraphBuilder. Transposed convolutions are written with
 * no padding and followed by the slice their padding selects (§6.2). */
export async function buildGraph(context, program, header) {
  const { graph, manifest, weights } = program;
  const named = dims(graph, header);
  const builder = new MLGraphBuilder(context);
  const env = new Map();
  env.set("latent", builder.input("latent", desc(header.shape)));
  for (const [name, c] of Object.entries(graph.consts)) {
    const t = manifest.tensors[c.init.ref];
    if (!t || t.dataType !== "float32") throw new Error(`weights manifest has no float32 tensor ${c.init.ref}`);
    const data = new Float32Array(weights, t.byteOffset, t.byteLength / 4);
    env.set(name, builder.constant(desc(c.shape), data));
  }
  const shapes = new Map([["latent", header.shape]]);
  for (const c of Object.keys(graph.consts)) shapes.set(c, graph.consts[c].shape);
  for (const node of graph.nodes) {
    const [a, b, bias] = node.inputs.map((n) => env.get(n));
    const o = node.options;
    let out;
    if (node.op === "convTranspose2d") {
      out = builder.convTranspose2d(a, b, { bias, strides: o.strides, dilations: o.dilations, padding: o.padding, outputPadding: o.outputPadding });
    } else if (node.op === "conv2d") {
      out = builder.conv2d(a, b, { bias, strides: o.strides, dilations: o.dilations, padding: o.padding });
    } else if (node.op === "slice") {
      out = builder.slice(a, o.starts, o.sizes.map((s) => size(s, named)));
    } else if (node.op === "mul") {
      out = builder.mul(a, b);
    } else if (node.op === "sqrt") {
      out = builder.sqrt(a);
    } else {
      throw new Error(`GraphJson op ${node.op} is not one the page builds`);
    }
    env.set(node.id, out);
  }
  const outputName = Object.values(graph.outputs)[0];
  const last = graph.nodes.find((n) => n.id === outputName);
  const outputShape = last.options.sizes.map((s) => size(s, named));
  const built = await builder.build({ [outputName]: env.get(outputName) });
  return { graph: built, output: outputName, outputShape };
}

async function compute(context, graph, latent, header, output, outputShape) {
  const count = outputShape.reduce((x, y) => x * y, 1);
  if (typeof context.createTensor === "function" && typeof context.dispatch === "function") {
    const input = await context.createTensor({ ...desc(header.shape), writable: true });
    const result = await context.createTensor({ ...desc(outputShape), readable: true });
    context.writeTensor(input, latent);
    context.dispatch(graph, { latent: input }, { [output]: result });
    return new Float32Array(await context.readTensor(result));
  }
  const res = await context.compute(graph, { latent }, { [output]: new Float32Array(count) });
  return res.outputs[output];
}
