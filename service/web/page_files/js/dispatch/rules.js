// §2–§4 as functions, as dispatch/rules.py: demand (the tier a decode needs), admit (which
// paths may run it), choose (the first offered path that runs, with the report).
//
// choose is async: the page's adapters answer with promises (createContext, requestAdapter);
// a scripted adapter's plain values are awaited the same way.
import { DECODE_EQUIVALENCE } from "./tokens.js";
import { pathKey, parseOffer } from "./offer.js";
import { reportToJson } from "./report.js";

/** §2. pins: [{capability, digest, tier}]; a pin over another capability is not read. */
export function demand(cap, { intent = null, pins = [] } = {}) {
  if (cap.registeredTier === DECODE_EQUIVALENCE) return DECODE_EQUIVALENCE;
  if (intent === "replicate") return DECODE_EQUIVALENCE;
  for (const pin of pins) {
    if (pin.capability === cap.name && pin.tier === DECODE_EQUIVALENCE) return DECODE_EQUIVALENCE;
  }
  return cap.registeredTier;
}

/** §3: null when the path may run the decode, else the refusal code. */
export function admit(p, needed, cap) {
  if (p.arithmetic === "float") return needed === DECODE_EQUIVALENCE ? "dispatch_tier_refused" : null;
  return cap.networks !== "integer" ? "dispatch_arithmetic_mismatch" : null;
}

/** §3: a float path holds the registered tier; an integer path decode-equivalence. */
export function heldTier(p, cap) {
  return p.arithmetic === "float" ? cap.registeredTier : DECODE_EQUIVALENCE;
}

/**
 * §4: try each offered path in order. adapters: Map key → adapter with unitPresent(),
 * programPresent(job), takesShape(job), plan(job), run(job) (each may return a promise).
 * A path with no adapter is dispatch_unit_absent; an adapter that throws refuses its path with
 * dispatch_backend_failed (the error kept in failures). Returns {report, output, failures}.
 */
export async function choose(cap, needed, offer, adapters, job = null) {
  offer = parseOffer(offer);
  const refused = [];
  const failures = new Map();
  for (const p of offer) {
    const admitted = admit(p, needed, cap); // §4.1: a path §3 refuses is not tried
    if (admitted !== null) {
      refused.push({ path: p, reason: admitted });
      continue;
    }
    const adapter = adapters.get(pathKey(p));
    if (adapter === undefined || adapter === null) {
      refused.push({ path: p, reason: "dispatch_unit_absent" });
      continue;
    }
    let code;
    let placement;
    let output;
    try {
      [code, placement] = await ask(adapter, p, job);
      if (code === null) output = await adapter.run(job); // §4.3
    } catch (err) {
      failures.set(pathKey(p), err);
      refused.push({ path: p, reason: "dispatch_backend_failed" });
      continue;
    }
    if (code !== null) {
      refused.push({ path: p, reason: code });
      continue;
    }
    const ran = { path: p, tier: heldTier(p, cap), placement };
    return { report: reportToJson({ capability: cap.name, needed, ran, refused }), output, failures };
  }
  return { report: reportToJson({ capability: cap.name, needed, ran: null, refused }), output: null, failures };
}

/** §4.2's questions in order; the first "no" is the refusal. */
async function ask(adapter, p, job) {
  if (!(await adapter.unitPresent())) return ["dispatch_unit_absent", null];
  if (!(await adapter.programPresent(job))) return ["dispatch_program_absent", null];
  if (!(await adapter.takesShape(job))) return ["dispatch_shape_mismatch", null];
  const placement = (await adapter.plan(job)) ?? null;
  if (placement !== null && (placement[p.unit] ?? 0) === 0) return ["dispatch_not_placed", null]; // §5
  return [null, placement];
}
