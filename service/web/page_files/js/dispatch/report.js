// The report wai-neural-dispatch/1 (§5), as Report.to_json in dispatch/report.py: exactly §5's
// members in §5's order.
import { pathToJson } from "./offer.js";

export const KIND = "wai-neural-dispatch/1";
const PLACEMENT_KEYS = ["npu", "gpu", "cpu", "unknown"];

/** A placement {npu, gpu, cpu, unknown} as counts, or null where the backend states none. */
export function placementToJson(placement) {
  if (placement === null || placement === undefined) return null;
  const out = {};
  for (const key of PLACEMENT_KEYS) {
    const value = placement[key] ?? 0;
    if (!Number.isInteger(value) || value < 0) {
      throw new Error(`placement.${key} must be a count >= 0, not ${JSON.stringify(value)}`);
    }
    out[key] = value;
  }
  return out;
}

/** ran: {path, tier, placement} or null; refused: [{path, reason}] in the order offered. */
export function reportToJson({ capability, needed, ran, refused }) {
  return {
    kind: KIND,
    capability,
    needed,
    ran: ran === null ? null : { ...pathToJson(ran.path), tier: ran.tier, placement: placementToJson(ran.placement) },
    refused: refused.map((r) => ({ ...pathToJson(r.path), reason: r.reason })),
  };
}
