// A scripted adapter, as dispatch.ScriptedAdapter.from_json: answers chosen in advance, for
// running the conformance vectors (conformance/dispatch/README.md) in the page.
import { lookup, capability, REGISTRY } from "./registry.js";
import { parsePath, pathKey } from "./offer.js";
import { choose, demand } from "./rules.js";

export class ScriptedAdapter {
  constructor(answers = {}) {
    this.unit = answers.unit_present ?? true;
    this.program = answers.program_present ?? true;
    this.shape = answers.takes_shape ?? true;
    this.placement = answers.plan ?? null;
    this.fails = (answers.run ?? "ok") === "fail";
    this.output = answers.output ?? null;
    this.calls = [];
  }
  unitPresent() { this.calls.push("unit_present"); return this.unit; }
  programPresent() { this.calls.push("program_present"); return this.program; }
  takesShape() { this.calls.push("takes_shape"); return this.shape; }
  plan() { this.calls.push("plan"); return this.placement; }
  run() {
    this.calls.push("run");
    if (this.fails) throw new Error("scripted failure");
    return this.output;
  }
}

/** One conformance vector's report, computed by the page's rules. */
export async function runVector(vector, registry = REGISTRY) {
  const spec = vector.capability;
  const cap = typeof spec === "string" ? lookup(spec, registry) : capability(spec.name, spec.registry_class, spec.networks);
  const pins = vector.pins.map((p) => ({ capability: p.capability, digest: p.digest, tier: p.tier ?? null }));
  const adapters = new Map();
  for (const [key, answers] of Object.entries(vector.adapters)) adapters.set(pathKey(parsePath(key)), new ScriptedAdapter(answers));
  const needed = demand(cap, { intent: vector.intent, pins });
  return (await choose(cap, needed, vector.offer, adapters)).report;
}
