// Entropy tables (wai-entropy-tables/1, docs/payload.md "Tables"): read and checked as
// codec/tables.py checks them, so the page decodes only tables the native sink decodes.
import { WaiError } from "../dispatch/tokens.js";

const MEMBERS = ["cdf_lengths", "cdfs", "channels", "format", "medians", "offsets", "precision"];
const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

function fail(message) {
  throw new WaiError("tables_invalid", message);
}

/** Parse the tables' JSON text; {channels, cdfs: Uint32Array[], lengths, offsets, medians: Float32Array}. */
export function readTables(text) {
  let obj;
  try {
    obj = JSON.parse(text);
  } catch (err) {
    fail(`tables: not JSON (${err.message})`);
  }
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) fail("tables: not a JSON object");
  const keys = Object.keys(obj).sort();
  if (keys.join() !== MEMBERS.join()) fail(`tables: members are exactly ${MEMBERS.join(", ")}`);
  if (obj.format !== "wai-entropy-tables/1") fail(`tables: format ${JSON.stringify(obj.format)}`);
  if (obj.precision !== 16) fail(`tables: precision ${obj.precision} (only 16)`);
  const channels = obj.channels;
  if (!Number.isInteger(channels) || channels < 1) fail("tables: channels is a count >= 1");
  for (const name of ["cdfs", "cdf_lengths", "offsets", "medians"]) {
    if (!Array.isArray(obj[name]) || obj[name].length !== channels) fail(`tables: ${name} has not ${channels} entries`);
  }
  const cdfs = [];
  const medians = new Float32Array(channels);
  for (let c = 0; c < channels; c++) {
    const cdf = obj.cdfs[c];
    const length = obj.cdf_lengths[c];
    const offset = obj.offsets[c];
    if (!Number.isInteger(length) || length < 3 || !Array.isArray(cdf) || cdf.length !== length) {
      fail(`tables: channel ${c}: cdf length ${length} and ${Array.isArray(cdf) ? cdf.length : "no"} entries`);
    }
    if (cdf[0] !== 0 || cdf[length - 1] !== 65536) fail(`tables: channel ${c}: the cdf runs from 0 to 65536`);
    for (let i = 0; i < length; i++) {
      if (!Number.isInteger(cdf[i])) fail(`tables: channel ${c}: entry ${i} is not an integer`);
      if (i > 0 && cdf[i] <= cdf[i - 1]) fail(`tables: channel ${c}: the cdf does not increase at ${i}`);
    }
    if (!Number.isInteger(offset) || offset < INT32_MIN || offset + length - 2 > INT32_MAX) {
      fail(`tables: channel ${c}: offset ${offset} leaves int32`);
    }
    const median = obj.medians[c];
    if (typeof median !== "number" || !Number.isFinite(Math.fround(median))) fail(`tables: channel ${c}: median`);
    medians[c] = median;
    cdfs.push(Uint32Array.from(cdf));
  }
  return Object.freeze({
    channels,
    cdfs,
    lengths: Int32Array.from(obj.cdf_lengths),
    offsets: Int32Array.from(obj.offsets),
    medians,
  });
}
