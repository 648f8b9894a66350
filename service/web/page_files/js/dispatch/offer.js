// Paths and offers (§1, §4), as in dispatch/offer.py. A path is a frozen object
// {unit, backend, arithmetic}; its key is "unit/backend/arithmetic".
import { WaiError, parseToken, UNITS, BACKENDS, ARITHMETICS } from "./tokens.js";

export function path(unit, backend, arithmetic, where = "path") {
  return Object.freeze({
    unit: parseToken("unit", UNITS, unit, where),
    backend: parseToken("backend", BACKENDS, backend, where),
    arithmetic: parseToken("arithmetic", ARITHMETICS, arithmetic, where),
  });
}

export function pathKey(p) {
  return `${p.unit}/${p.backend}/${p.arithmetic}`;
}

/** Read "unit/backend/arithmetic". */
export function parsePath(text) {
  const parts = String(text).split("/");
  if (parts.length !== 3) throw new WaiError("invalid_offer", `path ${JSON.stringify(text)} is not unit/backend/arithmetic`);
  return path(parts[0], parts[1], parts[2], text);
}

export function pathToJson(p) {
  return { unit: p.unit, backend: p.backend, arithmetic: p.arithmetic };
}

/** §1 as the project reads it (docs/dispatch.md; dispatch/offer.py's BACKEND_ARITHMETIC and
 * BACKEND_UNITS, a test holds the two equal): each backend's arithmetic and its units. */
export const BACKEND_ARITHMETIC = Object.freeze({
  "model-runtime": "float", webnn: "float", "onnx-runtime": "float", "wai-ops": "integer", wgsl: "integer",
});
export const BACKEND_UNITS = Object.freeze({
  "model-runtime": ["npu"], webnn: ["npu", "gpu", "cpu"], "onnx-runtime": ["gpu", "cpu"],
  "wai-ops": ["cpu"], wgsl: ["gpu"],
});

/** Why a path cannot exist under the table, or null. */
export function impossible(p) {
  const key = pathKey(p);
  const arithmetic = BACKEND_ARITHMETIC[p.backend];
  if (p.arithmetic !== arithmetic) return `${key}: ${p.backend} computes in ${arithmetic}, not ${p.arithmetic} (§1)`;
  const units = BACKEND_UNITS[p.backend];
  if (!units.includes(p.unit)) {
    const named = ["npu", "gpu", "cpu"].filter((u) => units.includes(u)).join(", ");
    return `${key}: ${p.backend} drives ${named}, not ${p.unit} (§1)`;
  }
  return null;
}

/** An offer from strings or path objects: at least one path, none twice, no integer path
 * naming npu (§3), none the table of backends refuses. */
export function parseOffer(items) {
  const paths = [];
  const seen = new Set();
  for (const item of items) {
    const p = typeof item === "string" ? parsePath(item) : path(item.unit, item.backend, item.arithmetic, "offer");
    const key = pathKey(p);
    if (seen.has(key)) throw new WaiError("invalid_offer", `path ${key} is offered twice`);
    if (p.unit === "npu" && p.arithmetic === "integer") {
      throw new WaiError("invalid_offer", `path ${key}: no integer path names npu in this revision (§3)`);
    }
    const why = impossible(p);
    if (why !== null) throw new WaiError("invalid_offer", `path ${why}`);
    seen.add(key);
    paths.push(p);
  }
  if (paths.length === 0) throw new WaiError("invalid_offer", "an offer names at least one path");
  return Object.freeze(paths);
}

export const NPU_WEBNN = path("npu", "webnn", "float");
export const GPU_WEBNN = path("gpu", "webnn", "float");
export const CPU_WEBNN = path("cpu", "webnn", "float");
export const GPU_ONNX_RUNTIME = path("gpu", "onnx-runtime", "float");
export const CPU_ONNX_RUNTIME = path("cpu", "onnx-runtime", "float");
export const GPU_WGSL = path("gpu", "wgsl", "integer");
export const CPU_WAI_OPS = path("cpu", "wai-ops", "integer");
