// A wai-ops/1 program on the CPU in the page (docs/wai-ops.md): the integer operations a
// hyperprior set's hyper-synthesis uses (channel_affine, conv2d, conv_transpose2d, requantize,
// add, mul), with the same results as paths/waiops/reference.py. The set's program is proven by
// the bound rule when the service installs it (every intermediate within int32); JavaScript's
// numbers are exact integers below 2^53, and each convolution is checked before it runs against
// that limit (Σ|w|·max|x| + |bias|), so every sum here is exact, whatever the order.
import { WaiError } from "../dispatch/tokens.js";

const EXACT = 2 ** 53;
const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;
const OPS = new Set(["channel_affine", "conv2d", "conv_transpose2d", "requantize", "add", "mul"]);

function err(code, message) {
  return new WaiError(code, message);
}

/** SafeTensors bytes → Map name → {dtype, shape, data} (I16 / I32 / I8 as typed arrays). */
export function readSafetensors(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < 8) throw err("waiops_weights_mismatch", "wai-ops weights: not a SafeTensors file");
  const n = Number(view.getBigUint64(0, true));
  if (8 + n > bytes.length) throw err("waiops_weights_mismatch", "wai-ops weights: header runs past the file");
  let head;
  try {
    head = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  } catch {
    throw err("waiops_weights_mismatch", "wai-ops weights: header is not JSON");
  }
  const kinds = { I8: [Int8Array, 1], I16: [Int16Array, 2], I32: [Int32Array, 4] };
  const out = new Map();
  for (const [name, t] of Object.entries(head)) {
    if (name === "__metadata__") continue;
    const kind = kinds[t.dtype];
    if (!kind) throw err("waiops_weights_mismatch", `wai-ops weights: ${name} is ${t.dtype}`);
    const [Type, size] = kind;
    const [a, b] = t.data_offsets;
    const count = t.shape.reduce((x, y) => x * y, 1);
    if (b - a !== count * size || 8 + n + b > bytes.length) throw err("waiops_weights_mismatch", `wai-ops weights: ${name}'s bytes`);
    const copy = bytes.slice(8 + n + a, 8 + n + b); // aligned
    out.set(name, { dtype: t.dtype, shape: t.shape, data: new Type(copy.buffer) });
  }
  return out;
}

function param(tensors, op, key) {
  const name = op.params && op.params[key];
  const t = tensors.get(name);
  if (!t) throw err("waiops_weights_mismatch", `${op.name}: no tensor ${JSON.stringify(name)} for ${key}`);
  return t.data;
}

/** Activations are {c, h, w, data: Float64Array (C, H, W)} of integers. */
function maxAbs(x) {
  let m = 0;
  for (let i = 0; i < x.data.length; i++) m = Math.max(m, Math.abs(x.data[i]));
  return m;
}

function checkExact(op, weight, bias, co, per, xmax) {
  for (let o = 0; o < co; o++) {
    let s = Math.abs(bias[o]);
    for (let i = 0; i < per; i++) s += Math.abs(weight(o, i));
    if (s * xmax >= EXACT || Math.abs(bias[o]) >= EXACT) throw err("waiops_bound_exceeded", `${op.name}: a sum may exceed 2^53`);
  }
}

function conv2d(op, x, tensors) {
  const { kernel: k, padding: p } = op.attrs;
  const w = param(tensors, op, "weight"); // [Co, Ci, k, k]
  const bias = param(tensors, op, "bias");
  const co = bias.length;
  const ci = x.c;
  const ho = x.h + 2 * p - k + 1;
  const wo = x.w + 2 * p - k + 1;
  const per = ci * k * k;
  checkExact(op, (o, i) => w[o * per + i], bias, co, per, maxAbs(x));
  const out = new Float64Array(co * ho * wo);
  for (let o = 0; o < co; o++) {
    const plane = out.subarray(o * ho * wo, (o + 1) * ho * wo);
    plane.fill(bias[o]);
    for (let c = 0; c < ci; c++) {
      const xin = x.data.subarray(c * x.h * x.w, (c + 1) * x.h * x.w);
      for (let ky = 0; ky < k; ky++) {
        for (let kx = 0; kx < k; kx++) {
          const wv = w[((o * ci + c) * k + ky) * k + kx];
          if (wv === 0) continue;
          for (let y = 0; y < ho; y++) {
            const iy = y + ky - p;
            if (iy < 0 || iy >= x.h) continue;
            const row = iy * x.w;
            const orow = y * wo;
            const x0 = Math.max(0, p - kx);
            const x1 = Math.min(wo, x.w + p - kx);
            for (let xx = x0; xx < x1; xx++) plane[orow + xx] += wv * xin[row + xx + kx - p];
          }
        }
      }
    }
  }
  return { c: co, h: ho, w: wo, data: out };
}

function convTranspose2d(op, x, tensors) {
  const { kernel: k, padding: p, stride: s, output_padding: q } = op.attrs;
  const w = param(tensors, op, "weight"); // [Ci, Co, k, k]
  const bias = param(tensors, op, "bias");
  const co = bias.length;
  const ci = x.c;
  const ho = (x.h - 1) * s - 2 * p + k + q;
  const wo = (x.w - 1) * s - 2 * p + k + q;
  const kk = k * k;
  checkExact(op, (o, i) => w[(Math.floor(i / kk) * co + o) * kk + (i % kk)], bias, co, ci * kk, maxAbs(x));
  const out = new Float64Array(co * ho * wo);
  for (let o = 0; o < co; o++) {
    const plane = out.subarray(o * ho * wo, (o + 1) * ho * wo);
    plane.fill(bias[o]);
    for (let c = 0; c < ci; c++) {
      const xin = x.data.subarray(c * x.h * x.w, (c + 1) * x.h * x.w);
      for (let ky = 0; ky < k; ky++) {
        for (let kx = 0; kx < k; kx++) {
          const wv = w[((c * co + o) * k + ky) * k + kx];
          if (wv === 0) continue;
          // out[iy·s − p + ky, ix·s − p + kx] += x[iy, ix] · w
          for (let iy = 0; iy < x.h; iy++) {
            const oy = iy * s - p + ky;
            if (oy < 0 || oy >= ho) continue;
            for (let ix = 0; ix < x.w; ix++) {
              const ox = ix * s - p + kx;
              if (ox < 0 || ox >= wo) continue;
              plane[oy * wo + ox] += wv * xin[iy * x.w + ix];
            }
          }
        }
      }
    }
  }
  return { c: co, h: ho, w: wo, data: out };
}

/** round_shift of docs/wai-ops.md: ties toward +∞ (v exact, |v| < 2^53). */
function roundShift(v, s) {
  return s === 0 ? v : Math.floor((v + 2 ** (s - 1)) / 2 ** s);
}

function perChannel(x, fn) {
  const plane = x.h * x.w;
  const out = new Float64Array(x.data.length);
  for (let c = 0; c < x.c; c++) {
    for (let i = c * plane; i < (c + 1) * plane; i++) out[i] = fn(x.data[i], c);
  }
  return { ...x, data: out };
}

function apply(op, values, tensors) {
  const x = values.get(op.inputs[0]);
  switch (op.op) {
    case "channel_affine": {
      const scale = param(tensors, op, "scale");
      const offset = param(tensors, op, "offset");
      return perChannel(x, (v, c) => v * scale[c] + offset[c]);
    }
    case "conv2d":
      return conv2d(op, x, tensors);
    case "conv_transpose2d":
      return convTranspose2d(op, x, tensors);
    case "requantize": {
      const m = param(tensors, op, "multiplier");
      const sh = param(tensors, op, "shift");
      const [lo, hi] = op.attrs.clamp;
      return perChannel(x, (v, c) => {
        const prod = v * m[c]; // within int32 by the bound rule, which this holds the set to
        if (prod < INT32_MIN || prod > INT32_MAX) throw err("waiops_bound_exceeded", `${op.name}: x · multiplier leaves int32`);
        return Math.min(Math.max(roundShift(prod, sh[c]), lo), hi);
      });
    }
    default: {
      const y = values.get(op.inputs[1]);
      const out = new Float64Array(x.data.length);
      for (let i = 0; i < out.length; i++) out[i] = op.op === "add" ? x.data[i] + y.data[i] : x.data[i] * y.data[i];
      return { ...x, data: out };
    }
  }
}

/** Run `program` (the parsed wai-ops/1 JSON) with `tensors` on int symbols [C, h, w]:
 * {c, h, w, data: Int32Array} of its output. Refuses, with wai-ops's codes, an operation the page
 * does not run, an input outside the declared range, and any value that leaves int32. */
export function runWaiOps(program, tensors, symbols, [c, h, w]) {
  if (!program || program.format !== "wai-ops/1") throw err("waiops_program_invalid", "not a wai-ops/1 program");
  for (const op of program.operations) {
    if (!OPS.has(op.op)) throw err("waiops_unknown_op", `the page does not run wai-ops's ${op.op} (${op.name})`);
  }
  if (c !== program.input.channels) throw err("waiops_shape_over_limits", `wai-ops input has ${c} channels, not ${program.input.channels}`);
  const [lo, hi] = program.input.range;
  const data = new Float64Array(symbols.length);
  for (let i = 0; i < symbols.length; i++) {
    const v = symbols[i];
    if (v < lo || v > hi) throw err("waiops_input_out_of_range", `wai-ops input value ${v} is outside the program's declared range [${lo}, ${hi}]`);
    data[i] = v;
  }
  const values = new Map([[program.input.name, { c, h, w, data }]]);
  for (const op of program.operations) {
    const out = apply(op, values, tensors);
    for (let i = 0; i < out.data.length; i++) {
      if (out.data[i] < INT32_MIN || out.data[i] > INT32_MAX) throw err("waiops_bound_exceeded", `${op.name}: a value leaves int32`);
    }
    values.set(op.output, out);
  }
  const out = values.get(program.output.name);
  return { c: out.c, h: out.h, w: out.w, data: Int32Array.from(out.data) };
}
