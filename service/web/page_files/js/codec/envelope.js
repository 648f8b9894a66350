// The envelope wai-envelope/1 in its JSON form (docs/envelope.md), read in the page: the parts
// a sink tries (primary, then fallback), the intent and the pins. The CBOR form is the
// service's; the page reads JSON.
import { WaiError } from "../dispatch/tokens.js";

const TOP = new Set(["format", "capability", "payload", "set", "intent", "pins", "fallback"]);
const FALLBACK = new Set(["capability", "payload", "set"]);
const DIGEST = /^[0-9a-f]{64}$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function invalid(message) {
  return new WaiError("envelope_invalid", message);
}

function base64(text, where) {
  if (typeof text !== "string" || !BASE64.test(text)) throw invalid(`${where}: not standard base64 with padding`);
  const binary = atob(text);
  if (btoa(binary) !== text) throw invalid(`${where}: not standard base64 with padding (unused bits set)`);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

function digest(value, where) {
  if (value === undefined || value === null) return null;
  if (typeof value !== "string" || !DIGEST.test(value)) throw invalid(`${where}: not a BLAKE3 digest (64 lowercase hex digits)`);
  return value;
}

function capabilityName(value, where) {
  if (typeof value !== "string" || value.length < 1 || value.length > 256) throw invalid(`${where}: a capability name of 1–256 characters`);
  return value;
}

function unknownMembers(obj, known, where) {
  for (const key of Object.keys(obj)) {
    if (!known.has(key)) throw new WaiError("envelope_unknown_field", `${where}${key}: not a member of wai-envelope/1`);
  }
}

/** Parse an envelope's JSON bytes; {intent, pins, parts: [{role, capability, payload, set, pin}]}. */
export function parseEnvelope(bytes) {
  let obj;
  try {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    if (!text.trimStart().startsWith("{")) throw new Error("not a JSON object (the page reads the JSON form; CBOR goes to the service)");
    obj = JSON.parse(text);
  } catch (err) {
    throw new WaiError("envelope_malformed", `envelope: ${err.message}`);
  }
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) throw invalid("envelope: not an object");
  unknownMembers(obj, TOP, "");
  if (obj.format !== "wai-envelope/1") throw new WaiError("envelope_format_unsupported", `format ${JSON.stringify(obj.format)} is not wai-envelope/1`);
  const intent = obj.intent ?? null;
  if (intent !== null && typeof intent !== "string") throw invalid("intent: a string or null");
  const pins = [];
  for (const [i, pin] of (obj.pins ?? []).entries()) {
    if (pin === null || typeof pin !== "object" || Array.isArray(pin)) throw invalid(`pins.${i}: an object`);
    const tier = pin.tier ?? null;
    if (tier !== null && typeof tier !== "string") throw invalid(`pins.${i}.tier: a string`);
    const cap = capabilityName(pin.capability, `pins.${i}.capability`);
    if (pins.some((p) => p.capability === cap)) throw new WaiError("envelope_duplicate_pin", `pins.${i}: a second pin over ${cap}`);
    pins.push({ capability: cap, digest: digest(pin.set, `pins.${i}.set`), tier });
  }
  const parts = [];
  const part = (role, src, where) => {
    const capability = capabilityName(src.capability, `${where}capability`);
    const pin = pins.find((p) => p.capability === capability) ?? null;
    const given = digest(src.set, `${where}set`);
    if (given !== null && pin !== null && pin.digest !== given) {
      throw new WaiError("envelope_pin_conflict", `${where}set names ${given.slice(0, 16)}…, its pin ${pin.digest.slice(0, 16)}…`);
    }
    return { role, capability, payload: base64(src.payload, `${where}payload`), set: given ?? (pin ? pin.digest : null), pin };
  };
  parts.push(part("primary", obj, ""));
  if (obj.fallback !== undefined && obj.fallback !== null) {
    if (typeof obj.fallback !== "object" || Array.isArray(obj.fallback)) throw invalid("fallback: an object");
    unknownMembers(obj.fallback, FALLBACK, "fallback.");
    const fallback = part("fallback", obj.fallback, "fallback.");
    if (fallback.capability === parts[0].capability) throw invalid("fallback: the primary's capability");
    parts.push(fallback);
  }
  return { intent, pins, parts };
}
