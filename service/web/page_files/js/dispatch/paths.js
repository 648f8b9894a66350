// Paths and offers (§1, §4), as in dispatch/paths.py. A path is a frozen object
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

/** An offer from strings or path objects: at least one path, none twice, no integer path
 * naming npu (§3). */
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
    seen.add(key);
    paths.push(p);
  }
  if (paths.length === 0) throw new WaiError("invalid_offer", "an offer names at least one path");
  return Object.freeze(paths);
}

export const NPU_WEBNN = path("npu", "webnn", "float");
export const GPU_WEBNN = path("gpu", "webnn", "float");
export const CPU_WEBNN = path("cpu", "webnn", "float");
export const GPU_WGSL = path("gpu", "wgsl", "integer");
