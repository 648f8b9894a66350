// The entropy stage of a hyperprior set (WAIH payload, version 1 or 2, docs/payload.md "Hyperprior payload";
// docs/bmshj2018-hyperprior-set.md), in the page as service/decoding/hyperprior.py runs it: z from
// the set's factorized tables, the hyper-synthesis as the set's wai-ops/1 program (codec/waiops.js,
// exact integers), y's table indexes from its output by the set's threshold table, then y from
// the Gaussian tables those indexes choose. Integer arithmetic and table reads only, so the
// symbols are the native sink's.
import { WaiError } from "../dispatch/tokens.js";
import { AnsDecoder, LIMITS, PICTURE_VERSION, decodePayload, readHeader, readPicture, readVarints } from "./payload.js";
import { readTables } from "./tables.js";
import { readSafetensors, runWaiOps } from "./waiops.js";

const HEADER_SIZE = 24;
const MAGIC = [0x57, 0x41, 0x49, 0x48]; // "WAIH"
const UPSAMPLING = 4;
const STATE_FLOOR = 1n << 24n;
const MEMBERS = ["z_tables", "y_tables", "scale_index", "program", "weights"];

function err(code, message) {
  return new WaiError(code, message);
}

export function isHyperprior(bytes) {
  return bytes.length >= 4 && MAGIC.every((b, i) => bytes[i] === b);
}

/** Both headers, checked as codec/hyperprior_payload.read_header checks them. */
export function readHyperHeader(bytes, limits = LIMITS) {
  const size = bytes.length;
  if (size > limits.maxPayloadBytes) throw err("payload_too_large", `payload of ${size} bytes exceeds ${limits.maxPayloadBytes}`);
  if (!isHyperprior(bytes)) throw err("payload_magic", "payload: bad magic (expected WAIH)");
  if (size >= 5 && bytes[4] !== 1 && bytes[4] !== PICTURE_VERSION) throw err("payload_version", `payload: WAIH version ${bytes[4]} is not supported (only 1 and 2)`);
  const headerSize = HEADER_SIZE + (bytes[4] === PICTURE_VERSION ? 8 : 0);
  if (size < headerSize) throw err("payload_truncated", `payload of ${size} bytes is shorter than its ${headerSize}-byte header`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const flags = bytes[5];
  const channels = view.getUint16(6, true);
  const zBytes = view.getUint32(8, true);
  const yWords = view.getUint32(12, true);
  const escapeCount = view.getUint32(16, true);
  const escapeBytes = view.getUint32(20, true);
  if (flags !== 0 || channels === 0) throw err("payload_header_invalid", `payload: WAIH flags ${flags} or y channels ${channels} invalid`);
  const picture = readPicture(bytes);
  if (headerSize + zBytes > size) throw err("payload_truncated", `payload: the side latent's ${zBytes} bytes are not all present`);
  const zSection = bytes.subarray(headerSize, headerSize + zBytes);
  const z = readHeader(zSection, limits);
  const height = UPSAMPLING * z.height;
  const width = UPSAMPLING * z.width;
  const symbols = channels * height * width;
  if (channels > limits.maxChannels || height > limits.maxLatentHeight || width > limits.maxLatentWidth || symbols > limits.maxSymbols) {
    throw err("payload_shape_over_limits", `payload: latent shape 1×${channels}×${height}×${width} exceeds the limits`);
  }
  if (escapeCount > symbols || !(escapeCount <= escapeBytes && escapeBytes <= 5 * escapeCount)) {
    throw err("payload_header_invalid", `payload: ${escapeCount} escapes in ${escapeBytes} bytes`);
  }
  const total = headerSize + zBytes + 4 * yWords + escapeBytes;
  if (total !== size) throw err(total < size ? "payload_trailing" : "payload_truncated", `payload: header declares ${total} bytes, ${size} present`);
  return Object.freeze({ headerSize, picture, channels, height, width, z, zBytes, yWords, escapeCount, escapeBytes, zSection, symbols, shape: [1, channels, height, width] });
}

/** The set's pieces (facts.hyperprior), fetched and parsed once per set. */
export async function loadHyperStage(source, digest, names) {
  if (!names || !MEMBERS.every((k) => typeof names[k] === "string")) {
    throw err("set_no_tables", `set ${digest.slice(0, 16)}…: facts.hyperprior names no ${MEMBERS.join(", ")}`);
  }
  const [zText, yText, scaleIndex, program, weights] = await Promise.all([
    source.text(digest, names.z_tables),
    source.text(digest, names.y_tables),
    source.json(digest, names.scale_index),
    source.json(digest, names.program),
    source.bytes(digest, names.weights),
  ]);
  const yTables = readTables(yText);
  const t = scaleIndex && scaleIndex.thresholds;
  if (!scaleIndex || scaleIndex.format !== "wai-scale-index/1" || !Array.isArray(t) || t.length !== yTables.channels - 1
      || !t.every((v, i) => Number.isInteger(v) && (i === 0 || v > t[i - 1]))) {
    throw err("tables_invalid", `scale index: not ${yTables.channels - 1} increasing integer thresholds`);
  }
  return { zTables: readTables(zText), yTables, thresholds: Int32Array.from(t), program, tensors: readSafetensors(new Uint8Array(weights)) };
}

/** Each integer scale's table index: how many thresholds lie strictly below it. */
export function scaleIndexes(q, thresholds) {
  const out = new Int32Array(q.length);
  for (let i = 0; i < q.length; i++) {
    let lo = 0;
    let hi = thresholds.length; // first threshold >= q
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (thresholds[mid] < q[i]) lo = mid + 1;
      else hi = mid;
    }
    out[i] = lo;
  }
  return out;
}

/** §6.3 for a WAIH payload: {header (y's), z, y: Int32Array, indexes}. */
export function decodeHyperprior(bytes, stage, limits = LIMITS) {
  const h = readHyperHeader(bytes, limits);
  const zPart = decodePayload(h.zSection, stage.zTables, limits); // z's header checked again: cheap
  const [, zc, zh, zw] = zPart.header.shape;
  const q = runWaiOps(stage.program, stage.tensors, zPart.symbols, [zc, zh, zw]);
  if (q.c !== h.channels || q.h !== h.height || q.w !== h.width) {
    throw err("tables_invalid", `the hyper-synthesis gives 1×${q.c}×${q.h}×${q.w}, y is 1×${h.channels}×${h.height}×${h.width}`);
  }
  const indexes = scaleIndexes(q.data, stage.thresholds);
  return { header: h, z: zPart.symbols, y: decodeY(bytes, h, indexes, stage.yTables), indexes };
}

/** y's symbols, coded grouped by table index (each group in C, H, W order). */
function decodeY(bytes, h, indexes, tables) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const start = h.headerSize + h.zBytes;
  const words = new Uint32Array(h.yWords);
  for (let i = 0; i < h.yWords; i++) words[i] = view.getUint32(start + 4 * i, true);
  if (h.yWords && words[h.yWords - 1] === 0) throw err("payload_stream_invalid", "payload: y's rANS stream ends in a zero word");
  const k = tables.channels;
  const counts = new Int32Array(k + 1);
  for (const i of indexes) counts[i + 1] += 1;
  for (let j = 0; j < k; j++) counts[j + 1] += counts[j];
  const order = new Int32Array(indexes.length); // stable sort by index
  const fill = counts.slice(0, k);
  for (let i = 0; i < indexes.length; i++) order[fill[indexes[i]]++] = i;
  const coder = new AnsDecoder(words);
  const tableIndex = new Int32Array(indexes.length);
  for (let j = 0; j < k; j++) {
    if (counts[j + 1] === counts[j]) continue;
    if (coder.wordsLeft() === 0 && coder.state < STATE_FLOOR) throw err("payload_stream_invalid", "payload: y's rANS stream ends early");
    const cdf = tables.cdfs[j];
    for (let n = counts[j]; n < counts[j + 1]; n++) tableIndex[n] = coder.decode(cdf);
  }
  const height = coder.decodeUniform16();
  const width = coder.decodeUniform16();
  if (height !== h.height || width !== h.width || !coder.isEmpty()) {
    throw err("payload_stream_invalid", "payload: y's rANS stream does not hold exactly its symbols");
  }
  const y = new Int32Array(indexes.length);
  const escaped = [];
  for (let n = 0; n < order.length; n++) {
    const g = indexes[order[n]];
    if (tableIndex[n] === tables.lengths[g] - 2) escaped.push(n);
    y[order[n]] = tableIndex[n] + tables.offsets[g];
  }
  if (escaped.length !== h.escapeCount) {
    throw err("payload_escape_invalid", `payload: y's stream holds ${escaped.length} escapes, the header ${h.escapeCount}`);
  }
  if (escaped.length) {
    const at = start + 4 * h.yWords;
    const raws = readVarints(bytes.subarray(at, at + h.escapeBytes), escaped.length);
    escaped.forEach((n, e) => {
      const g = indexes[order[n]];
      const raw = raws[e];
      const value = (raw % 2 === 1 ? -((raw + 1) / 2) : raw / 2 + (tables.lengths[g] - 2)) + tables.offsets[g];
      if (value < -(2 ** 31) || value > 2 ** 31 - 1) throw err("payload_escape_invalid", "payload: an escaped symbol is outside int32");
      y[order[n]] = value;
    });
  }
  return y;
}
