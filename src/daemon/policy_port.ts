/**
 * The gateway's view of the configured policies: each agent's rules (its own `policy:` or the
 * `default_policy`), compiled once at start, asked for argv and for lines typed into shells.
 */
import { type Config, policyFor } from "../config/mod.ts";
import type { PolicyPort } from "../control/mod.ts";
import { compilePolicy, decide, decideLine } from "../policy/mod.ts";

export function policyPort(config: Config): PolicyPort {
  // Keyed by the rules object (one per configured policy), not by agent: dev-mode agent names
  // are unbounded, policies are not.
  const compiled = new WeakMap<object, ReturnType<typeof compilePolicy>>();
  const rulesOf = (agent: string) => {
    const rules = policyFor(config, agent);
    let c = compiled.get(rules);
    if (!c) {
      c = compilePolicy(rules);
      compiled.set(rules, c);
    }
    return c;
  };
  return {
    decide: (agent, command, env) => decide(command, rulesOf(agent), { env }),
    decideLine: (agent, line) => decideLine(line, rulesOf(agent)),
    autoAnswer: (agent, prompt) =>
      rulesOf(agent).autoAnswer.find((a) => a.prompt.test(prompt))?.answer,
  };
}
