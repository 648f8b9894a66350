// The payload (WAIP version 1, or 2 with the picture's size) and its rANS stage, decoded in the page (docs/payload.md; spec
// §6.3): the same symbols as codec/payload.py, integer and table reads only.
//
// The stream is constriction's AnsCoder (64-bit state, 32-bit words, 24-bit precision), which
// decodes a symbol from the state's low 24 bits and refills one word from the end of the word
// list when the state falls below 2^32. The state is a BigInt here: exact, and fast enough for
// the 49,152 symbols of a 256 × 256 picture.
import { WaiError } from "../dispatch/tokens.js";

export const HEADER_SIZE = 24;
/** Version 2 (docs/payload.md): version 1's header, then the picture's width and height (u32). */
export const PICTURE_VERSION = 2;
const PICTURE_SIZE = 8;
const MAGIC = [0x57, 0x41, 0x49, 0x50]; // "WAIP"
const PRECISION = 24n;
const MASK = (1n << PRECISION) - 1n;
const WORD_FLOOR = 1n << 32n;
const STATE_FLOOR = 1n << 24n;
const CHUNK = 65536;
const MAX_VARINT_BYTES = 5;

/** The page's limits: the service's defaults (codec/errors.py Limits). */
export const LIMITS = Object.freeze({
  maxPayloadBytes: 64 * 1024 * 1024,
  maxChannels: 1024,
  maxLatentHeight: 256,
  maxLatentWidth: 256,
  maxSymbols: 192 * 256 * 256,
});

function err(code, message) {
  return new WaiError(code, message);
}

/** A version-2 WAIP or WAIH payload's picture {width, height} (right after the 24-byte version-1
 * header, in both), else null. */
export function readPicture(bytes) {
  if (bytes.length < HEADER_SIZE + PICTURE_SIZE || bytes[4] !== PICTURE_VERSION) return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const width = view.getUint32(HEADER_SIZE, true);
  const height = view.getUint32(HEADER_SIZE + 4, true);
  if (width === 0 || height === 0) throw err("payload_header_invalid", `payload: empty picture ${width}×${height}`);
  return { width, height };
}

/** Parse and check the header; allocates nothing that depends on it. */
export function readHeader(bytes, limits = LIMITS) {
  const size = bytes.length;
  if (size > limits.maxPayloadBytes) throw err("payload_too_large", `payload of ${size} bytes exceeds the limit of ${limits.maxPayloadBytes}`);
  if (size < 4 || MAGIC.some((b, i) => bytes[i] !== b)) {
    if (size < 4 && MAGIC.slice(0, size).every((b, i) => bytes[i] === b)) throw err("payload_truncated", `payload of ${size} bytes is shorter than its header`);
    throw err("payload_magic", "payload: bad magic (expected WAIP)");
  }
  if (size >= 5 && bytes[4] !== 1 && bytes[4] !== PICTURE_VERSION) throw err("payload_version", `payload: version ${bytes[4]} is not supported (only 1 and 2)`);
  const headerSize = HEADER_SIZE + (bytes[4] === PICTURE_VERSION ? PICTURE_SIZE : 0);
  if (size < headerSize) throw err("payload_truncated", `payload of ${size} bytes is shorter than its ${headerSize}-byte header`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const h = {
    headerSize,
    picture: readPicture(bytes),
    flags: bytes[5],
    channels: view.getUint16(6, true),
    height: view.getUint16(8, true),
    width: view.getUint16(10, true),
    streamWords: view.getUint32(12, true),
    escapeCount: view.getUint32(16, true),
    escapeBytes: view.getUint32(20, true),
  };
  const symbols = h.channels * h.height * h.width;
  if (h.flags !== 0) throw err("payload_header_invalid", `payload: reserved flags byte is ${h.flags}, must be 0`);
  if (symbols === 0) throw err("payload_header_invalid", "payload: empty latent shape");
  if (h.channels > limits.maxChannels || h.height > limits.maxLatentHeight || h.width > limits.maxLatentWidth || symbols > limits.maxSymbols) {
    throw err("payload_shape_over_limits", `payload: latent shape 1×${h.channels}×${h.height}×${h.width} exceeds the limits`);
  }
  if (h.escapeCount > symbols || !(h.escapeCount <= h.escapeBytes && h.escapeBytes <= MAX_VARINT_BYTES * h.escapeCount)) {
    throw err("payload_header_invalid", `payload: ${h.escapeCount} escapes in ${h.escapeBytes} bytes for ${symbols} symbols`);
  }
  const total = headerSize + 4 * h.streamWords + h.escapeBytes;
  if (total > size) throw err("payload_truncated", `payload: header declares ${total} bytes, ${size} present`);
  if (total < size) throw err("payload_trailing", `payload: ${size - total} trailing bytes after the declared ${total}`);
  return Object.freeze({ ...h, symbols, shape: [1, h.channels, h.height, h.width] });
}

/** Payload bytes → {header, symbols: Int32Array (C·H·W, payload order)}. */
export function decodePayload(bytes, tables, limits = LIMITS) {
  const h = readHeader(bytes, limits);
  if (h.channels !== tables.channels) throw err("payload_tables_mismatch", `payload has ${h.channels} channels, the tables ${tables.channels}`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const words = new Uint32Array(h.streamWords);
  for (let i = 0; i < h.streamWords; i++) words[i] = view.getUint32(h.headerSize + 4 * i, true);
  if (h.streamWords && words[h.streamWords - 1] === 0) throw err("payload_stream_invalid", "payload: the rANS stream ends in a zero word");
  const coder = new AnsDecoder(words);
  const count = h.height * h.width;
  const index = new Int32Array(h.symbols);
  for (let c = 0; c < h.channels; c++) {
    const cdf = tables.cdfs[c];
    for (let start = 0; start < count; start += CHUNK) {
      if (coder.wordsLeft() === 0 && coder.state < STATE_FLOOR) {
        throw err("payload_stream_invalid", `payload: the rANS stream ends within channel ${c} of ${h.channels}`);
      }
      const end = Math.min(count, start + CHUNK);
      for (let i = start; i < end; i++) index[c * count + i] = coder.decode(cdf);
    }
  }
  const height = coder.decodeUniform16();
  const width = coder.decodeUniform16();
  if (height !== h.height || width !== h.width || !coder.isEmpty()) {
    throw err("payload_stream_invalid", `payload: the rANS stream does not hold exactly ${h.symbols} symbols`);
  }
  const symbols = new Int32Array(h.symbols);
  const escaped = [];
  for (let c = 0; c < h.channels; c++) {
    const escape = tables.lengths[c] - 2;
    const offset = tables.offsets[c];
    for (let i = c * count; i < (c + 1) * count; i++) {
      if (index[i] === escape) escaped.push(i);
      symbols[i] = index[i] + offset;
    }
  }
  if (escaped.length !== h.escapeCount) {
    throw err("payload_escape_invalid", `payload: the stream holds ${escaped.length} escapes, the header ${h.escapeCount}`);
  }
  if (escaped.length) {
    const start = h.headerSize + 4 * h.streamWords;
    const raws = readVarints(bytes.subarray(start, start + h.escapeBytes), escaped.length);
    escaped.forEach((at, k) => {
      const c = Math.floor(at / count);
      const raw = raws[k];
      const value = (raw % 2 === 1 ? -((raw + 1) / 2) : raw / 2 + (tables.lengths[c] - 2)) + tables.offsets[c];
      if (value < -(2 ** 31) || value > 2 ** 31 - 1) throw err("payload_escape_invalid", "payload: an escaped symbol is outside int32");
      symbols[at] = value;
    });
  }
  return { header: h, symbols };
}

/** Exactly `count` minimal LEB128 values (at most 5 bytes each) filling `data`. */
export function readVarints(data, count) {
  const out = [];
  let value = 0;
  let shift = 0;
  let length = 0;
  for (let i = 0; i < data.length; i++) {
    const b = data[i];
    value += (b & 0x7f) * 2 ** shift;
    shift += 7;
    length += 1;
    if (b < 0x80) {
      if (length > MAX_VARINT_BYTES || (length > 1 && b === 0)) {
        throw err("payload_escape_invalid", "payload: an escape value is not a minimal varint of at most 5 bytes");
      }
      out.push(value);
      value = 0;
      shift = 0;
      length = 0;
    }
  }
  if (out.length !== count || length !== 0) {
    throw err("payload_escape_invalid", `payload: the escape section does not hold exactly ${count} values`);
  }
  return out;
}

/** constriction's AnsCoder, decoding only. */
export class AnsDecoder {
  constructor(words) {
    this.words = words;
    this.top = words.length; // words[0 .. top) are still to be read, from the end
    let state = 0n;
    if (this.top > 0) {
      state = BigInt(this.words[--this.top]);
      while (this.top > 0 && state < WORD_FLOOR) state = (state << 32n) | BigInt(this.words[--this.top]);
    }
    this.state = state;
  }

  wordsLeft() {
    return this.top;
  }

  isEmpty() {
    return this.top === 0 && this.state === 0n;
  }

  #advance(quantile, left, probability) {
    this.state = (this.state >> PRECISION) * BigInt(probability) + BigInt(quantile - left);
    if (this.state < WORD_FLOOR && this.top > 0) this.state = (this.state << 32n) | BigInt(this.words[--this.top]);
  }

  /** One table index against a 16-bit cdf, which constriction holds at 24 bits as cdf << 8. */
  decode(cdf) {
    const quantile = Number(this.state & MASK);
    const q16 = quantile >>> 8;
    let lo = 0;
    let hi = cdf.length - 1; // cdf[lo] <= q16 < cdf[hi]
    while (hi - lo > 1) {
      const mid = (lo + hi) >>> 1;
      if (cdf[mid] <= q16) lo = mid;
      else hi = mid;
    }
    this.#advance(quantile, cdf[lo] << 8, (cdf[lo + 1] - cdf[lo]) << 8);
    return lo;
  }

  /** One value uniform over 0 … 65535 (constriction's Uniform(2^16): 2^8 per value). */
  decodeUniform16() {
    const quantile = Number(this.state & MASK);
    const value = quantile >>> 8;
    this.#advance(quantile, value << 8, 256);
    return value;
  }
}

/** The int32 little-endian bytes of the symbols (§6.3's digest input). */
export function symbolBytes(symbols) {
  const out = new Uint8Array(symbols.length * 4);
  const view = new DataView(out.buffer);
  for (let i = 0; i < symbols.length; i++) view.setInt32(4 * i, symbols[i], true);
  return out;
}

/** The latent: float32(symbol) + median[c], in float32 (§6.3). */
export function latentOf(symbols, header, tables) {
  const count = header.height * header.width;
  const out = new Float32Array(symbols.length);
  for (let c = 0; c < header.channels; c++) {
    const median = tables.medians[c];
    for (let i = c * count; i < (c + 1) * count; i++) out[i] = Math.fround(Math.fround(symbols[i]) + median);
  }
  return out;
}
