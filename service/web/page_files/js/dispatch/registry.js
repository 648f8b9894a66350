// Capabilities and their registration (§2, §3), as in dispatch/registry.py.
import { WaiError, parseToken, REGISTRY_CLASSES, ARITHMETICS, registeredTier } from "./tokens.js";

/** A capability: name, registry class, network arithmetic; integer networks only for
 * NeuralIntegerExact (§3). */
export function capability(name, registryClass, networks) {
  parseToken("registryclass", REGISTRY_CLASSES, registryClass, name);
  parseToken("arithmetic", ARITHMETICS, networks, name);
  if ((registryClass === "NeuralIntegerExact") !== (networks === "integer")) {
    throw new WaiError(
      "wai_error",
      `capability ${JSON.stringify(name)}: registry class ${registryClass} cannot have ${networks} networks`,
    );
  }
  return Object.freeze({ name, registryClass, networks, registeredTier: registeredTier(registryClass) });
}

export const BMSHJ2018 = capability("wai.neural.bmshj2018", "Neural", "float");
export const INT_SYNTH = capability("wai.neural.int_synth", "NeuralIntegerExact", "integer");
export const BMSHJ2018_HYPERPRIOR = capability("wai.neural.bmshj2018_hyperprior", "NeuralEntropyExact", "float");

/** The registry: name → capability. */
export const REGISTRY = Object.freeze(new Map([
  [BMSHJ2018.name, BMSHJ2018], [INT_SYNTH.name, INT_SYNTH], [BMSHJ2018_HYPERPRIOR.name, BMSHJ2018_HYPERPRIOR],
]));

export function lookup(name, registry = REGISTRY) {
  const cap = registry.get(name);
  if (cap === undefined) {
    const known = [...registry.keys()].sort().join(", ");
    throw new WaiError("unknown_capability", `capability ${JSON.stringify(name)} is not registered; known: ${known}`);
  }
  return cap;
}
