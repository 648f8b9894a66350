// A test-only WebNN stand-in, injected by tests/test_page_webnn_graph.py as an init script: a
// plain-JavaScript MLGraphBuilder that computes the five operators the bmshj2018 synthesis uses
// (convTranspose2d, conv2d 1×1, slice, mul, sqrt) in float32 storage, and a navigator.ml whose
// contexts compute with it. It lets a browser without WebNN check the page's graph building,
// slicing, output handling and report against ONNX Runtime. It is never shipped with the page.
(() => {
  const size = (shape) => shape.reduce((a, b) => a * b, 1);
  const op = (shape, compute) => ({ shape, compute });

  class MLGraphBuilder {
    constructor(context) { this.context = context; }
    input(name, desc) { return op(desc.shape, (inputs) => inputs[name]); }
    constant(desc, data) { const copy = Float32Array.from(data); return op(desc.shape, () => copy); }
    mul(a, b) {
      return op(a.shape, (inp, ev) => { const x = ev(a), y = ev(b), o = new Float32Array(x.length); for (let i = 0; i < x.length; i++) o[i] = x[i] * y[i]; return o; });
    }
    sqrt(a) {
      return op(a.shape, (inp, ev) => { const x = ev(a), o = new Float32Array(x.length); for (let i = 0; i < x.length; i++) o[i] = Math.sqrt(x[i]); return o; });
    }
    slice(a, starts, sizes) {
      return op(sizes, (inp, ev) => {
        const x = ev(a), [, C, H, W] = a.shape, [, c0, h0, w0] = starts, [, c, h, w] = sizes;
        const o = new Float32Array(size(sizes));
        for (let ci = 0; ci < c; ci++) for (let hi = 0; hi < h; hi++) for (let wi = 0; wi < w; wi++)
          o[(ci * h + hi) * w + wi] = x[((ci + c0) * H + hi + h0) * W + wi + w0];
        return o;
      });
    }
    conv2d(a, f, { bias, padding, strides }) {
      const [, C, H, W] = a.shape, [O, I, KH, KW] = f.shape;
      if (KH !== 1 || KW !== 1 || padding.some((p) => p) || strides.some((s) => s !== 1) || I !== C) throw new Error("reference conv2d: 1×1 only");
      return op([1, O, H, W], (inp, ev) => {
        const x = ev(a), k = ev(f), b = ev(bias), P = H * W, o = new Float32Array(O * P);
        for (let co = 0; co < O; co++) {
          const acc = new Float64Array(P).fill(b[co]);
          for (let ci = 0; ci < C; ci++) { const wv = k[co * C + ci]; const xo = ci * P; for (let p = 0; p < P; p++) acc[p] += wv * x[xo + p]; }
          o.set(acc, co * P);
        }
        return o;
      });
    }
    convTranspose2d(a, f, { bias, padding, strides, outputPadding }) {
      const [, C, H, W] = a.shape, [I, O, KH, KW] = f.shape, [s, t] = strides;
      if (padding.some((p) => p) || outputPadding.some((p) => p) || I !== C) throw new Error("reference convTranspose2d: no padding only");
      const OH = (H - 1) * s + KH, OW = (W - 1) * t + KW;
      return op([1, O, OH, OW], (inp, ev) => {
        const x = ev(a), k = ev(f), b = ev(bias), acc = new Float64Array(O * OH * OW);
        for (let co = 0; co < O; co++) acc.fill(b[co], co * OH * OW, (co + 1) * OH * OW);
        for (let ci = 0; ci < C; ci++) for (let co = 0; co < O; co++) for (let kh = 0; kh < KH; kh++) for (let kw = 0; kw < KW; kw++) {
          const wv = k[((ci * O + co) * KH + kh) * KW + kw];
          for (let h = 0; h < H; h++) {
            const xo = (ci * H + h) * W, oo = (co * OH + h * s + kh) * OW + kw;
            for (let w = 0; w < W; w++) acc[oo + w * t] += wv * x[xo + w];
          }
        }
        return Float32Array.from(acc);
      });
    }
    async build(outputs) { return { outputs }; }
  }

  class Context {
    constructor(deviceType) { this.deviceType = deviceType; }
    async compute(graph, inputs, outputs) {
      const memo = new Map();
      const ev = (node) => { if (!memo.has(node)) memo.set(node, node.compute(inputs, ev)); return memo.get(node); };
      const result = {};
      for (const [name, node] of Object.entries(graph.outputs)) { const v = ev(node); outputs[name].set(v); result[name] = outputs[name]; }
      return { inputs, outputs: result };
    }
  }

  window.MLGraphBuilder = MLGraphBuilder;
  Object.defineProperty(navigator, "ml", {
    value: { async createContext(options) { window.__contexts.push(options.deviceType); return new Context(options.deviceType); } },
  });
  window.__contexts = [];
})();
