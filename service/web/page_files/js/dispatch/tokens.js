// The spec's vocabulary (§1, §2, §7), as in dispatch/tokens.py: units, backends, arithmetic,
// tiers (ordered), registry classes and the seven refusal codes.

export const UNITS = Object.freeze(["npu", "gpu", "cpu"]);
export const BACKENDS = Object.freeze(["model-runtime", "webnn", "onnx-runtime", "wai-ops", "wgsl"]);
export const ARITHMETICS = Object.freeze(["float", "integer"]);

/** Tiers in their order: none < entropy-consistency < decode-equivalence (§2). */
export const TIERS = Object.freeze(["none", "entropy-consistency", "decode-equivalence"]);
export const NONE = "none";
export const ENTROPY_CONSISTENCY = "entropy-consistency";
export const DECODE_EQUIVALENCE = "decode-equivalence";

export const REGISTRY_CLASSES = Object.freeze(["NeuralIntegerExact", "NeuralEntropyExact", "Neural"]);

/** The seven refusal codes of §7, with the spec's meaning. */
export const CODES = Object.freeze({
  dispatch_tier_refused: "the decode needs decode-equivalence and the path computes in floating point",
  dispatch_arithmetic_mismatch: "an integer path offered for a capability whose networks are not integer",
  dispatch_unit_absent: "the device has no such unit, or the backend is absent",
  dispatch_program_absent: "the parameter set holds no program for the backend",
  dispatch_shape_mismatch: "the set's program does not take this payload's shape",
  dispatch_not_placed: "the backend's plan places no operation on the path's unit",
  dispatch_backend_failed: "the backend failed the decode",
});

/** A typed error with a stable code, as WaiError in Python. */
export class WaiError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

export function tierRank(tier) {
  const rank = TIERS.indexOf(tier);
  if (rank < 0) throw new WaiError("unknown_token", `unknown tier token ${JSON.stringify(tier)}`);
  return rank;
}

/** The tier a registry class fixes (§2). */
export function registeredTier(registryClass) {
  if (registryClass === "NeuralIntegerExact") return DECODE_EQUIVALENCE;
  if (registryClass === "NeuralEntropyExact") return ENTROPY_CONSISTENCY;
  if (registryClass === "Neural") return NONE;
  throw new WaiError("unknown_token", `unknown registry class ${JSON.stringify(registryClass)}`);
}

/** Read a token of a vocabulary from outside; an unknown one is an `unknown_token` error. */
export function parseToken(kind, known, value, where = "") {
  if (typeof value === "string" && known.includes(value)) return value;
  const at = where ? ` in ${where}` : "";
  throw new WaiError(
    "unknown_token",
    `unknown ${kind} token ${JSON.stringify(value)}${at}; known: ${known.join(", ")}`,
  );
}
