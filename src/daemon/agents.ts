/** Who an agent is: configured agents by token (compared in constant time), dev-mode rules. */
import type { AgentDirectory } from "../api/mod.ts";
import type { Config } from "../config/mod.ts";
import { sameSecret } from "../shared/mod.ts";

export function agentDirectory(config: Config, socketKey: string): AgentDirectory {
  const known = Object.entries(config.agents).map(([id, a]) => ({ id, token: a.token }));
  return {
    devMode: config.auth.dev_mode,
    devKey: (key) => key !== undefined && sameSecret(socketKey, key),
    isConfigured: (id: string) => Object.hasOwn(config.agents, id),
    agentForToken(token: string): string | undefined {
      // Every entry is compared, so the time does not tell which one matched.
      let found: string | undefined;
      for (const k of known) if (sameSecret(k.token, token)) found = k.id;
      return found;
    },
  };
}
