/**
 * Who an agent is: a configured agent's static token (compared in constant time), an agent JWT
 * (verified offline against the pinned keys of `security.agent_jwt`), or — in development mode,
 * on the socket, with the socket key — a name it gives itself. Strict identity mode accepts only
 * the first two, for agents that exist and have their own policy; every refusal is reported
 * (the daemon audits it). The directory also remembers who is behind each agent (principal,
 * tenant) for the gateway's rules and approvals.
 */
import type { AgentDirectory, CallerIdentity } from "../api/mod.ts";
import type { Config } from "../config/mod.ts";
import { JwtError, type JwtVerifier, looksLikeJwt } from "../governance/mod.ts";
import { sameSecret } from "../shared/mod.ts";

export interface AgentDirectoryOptions {
  /** Agent JWTs (present when `security.agent_jwt` is configured). */
  jwt?: JwtVerifier;
  /** A caller was refused (audited by the daemon): never the credential itself. */
  refused?: (r: { transport: string; reason: string; agent?: string }) => void;
}

/** Who is behind an agent, as rules and approvals see it. */
export interface Principal {
  principal: string;
  tenant?: string;
  via: "token" | "jwt" | "dev";
  /**
   * Every principal that authenticated as this agent id since the daemon started (at most
   * MAX_PRINCIPALS_PER_AGENT, newest kept): an approval that excludes the requester excludes
   * them all, since a request cannot be told apart by who of them made it.
   */
  principals: readonly string[];
}

/** Principals remembered per agent id (an agent id several people's JWTs name). */
export const MAX_PRINCIPALS_PER_AGENT = 16;

/** At most this many dev-mode or JWT identities are remembered (least recently seen dropped). */
export const MAX_REMEMBERED_IDENTITIES = 1024;

export interface Directory extends AgentDirectory {
  /** Who is behind `agent` (its last authentication; a configured agent's own fields first). */
  principalOf(agent: string): Principal;
  /** Swaps the config (policy reload): agents, tokens and JWT trust as now configured. */
  reload(config: Config, jwt?: JwtVerifier): void;
}

export function agentDirectory(
  config: Config,
  socketKey: string,
  options: AgentDirectoryOptions = {},
): Directory {
  let cfg = config;
  let jwt = options.jwt;
  let known = tokens(cfg);
  const seen = new Map<string, Principal>();
  const everyone = new Map<string, string[]>();
  const strict = () => cfg.security.identity_mode === "strict";
  const remember = (agent: string, p: Omit<Principal, "principals">) => {
    const list = (everyone.get(agent) ?? []).filter((x) => x !== p.principal);
    list.push(p.principal);
    if (list.length > MAX_PRINCIPALS_PER_AGENT) list.shift();
    everyone.delete(agent);
    everyone.set(agent, list);
    if (everyone.size > MAX_REMEMBERED_IDENTITIES) everyone.delete(everyone.keys().next().value!);
    seen.delete(agent);
    seen.set(agent, { ...p, principals: list });
    if (seen.size > MAX_REMEMBERED_IDENTITIES) seen.delete(seen.keys().next().value!);
  };
  const configured = (id: string) => Object.hasOwn(cfg.agents, id) ? cfg.agents[id] : undefined;
  const configuredIdentity = (id: string, via: "token" | "jwt"): CallerIdentity => {
    const a = configured(id);
    return {
      agent: id,
      principal: a?.principal ?? `agent:${id}`,
      ...(a?.tenant ? { tenant: a.tenant } : {}),
      via,
    };
  };
  /** Strict mode: an agent without its own existing policy is refused (fail closed). */
  const policyProblem = (id: string): string | undefined => {
    if (!strict()) return undefined;
    const name = configured(id)?.policy;
    if (name === undefined || !Object.hasOwn(cfg.policies, name)) {
      return `Agent "${id}" has no policy of its own (strict identity mode)`;
    }
    return undefined;
  };
  const refuse = (transport: string, reason: string, agent?: string) => {
    options.refused?.({ transport, reason, ...(agent ? { agent } : {}) });
    return { error: reason };
  };

  return {
    get devMode() {
      return cfg.auth.dev_mode && !strict();
    },
    get strict() {
      return strict();
    },
    devKey: (key) => key !== undefined && sameSecret(socketKey, key),
    isConfigured: (id: string) => configured(id) !== undefined,
    async authenticate(credential, transport) {
      if (looksLikeJwt(credential)) {
        if (!jwt) return refuse(transport, "Agent JWTs are not configured (security.agent_jwt)");
        let claims;
        try {
          claims = await jwt.verify(credential);
        } catch (err) {
          const reason = err instanceof JwtError ? err.reason : "invalid";
          return refuse(transport, `Agent JWT refused (${reason})`);
        }
        const id = claims.agent;
        if (id === undefined) return refuse(transport, "Agent JWT names no agent");
        const a = configured(id);
        if (!a || !a.jwt) {
          return refuse(transport, `Agent JWT for "${id}", which does not accept JWTs`, id);
        }
        const bad = policyProblem(id);
        if (bad) return refuse(transport, bad, id);
        const who: CallerIdentity = {
          agent: id,
          principal: claims.principal,
          ...(claims.tenant ?? a.tenant ? { tenant: claims.tenant ?? a.tenant } : {}),
          via: "jwt",
          expiresAt: claims.expiresAt * 1000,
        };
        remember(id, who);
        return who;
      }
      // Every entry is compared, so the time does not tell which one matched.
      let found: string | undefined;
      for (const k of known) if (sameSecret(k.token, credential)) found = k.id;
      if (found === undefined) return refuse(transport, "Unknown agent token");
      const bad = policyProblem(found);
      if (bad) return refuse(transport, bad, found);
      const who = configuredIdentity(found, "token");
      remember(found, who);
      return who;
    },
    devIdentity(agent: string): CallerIdentity {
      const who: CallerIdentity = { agent, principal: `agent:${agent}`, via: "dev" };
      remember(agent, who);
      return who;
    },
    noCredential(transport: string) {
      refuse(transport, "No agent credential");
    },
    principalOf(agent: string): Principal {
      const s = seen.get(agent);
      if (s) return s;
      const a = configured(agent);
      const principal = a?.principal ?? `agent:${agent}`;
      return {
        principal,
        ...(a?.tenant ? { tenant: a.tenant } : {}),
        via: a ? (a.token ? "token" : "jwt") : "dev",
        principals: [...new Set([...(everyone.get(agent) ?? []), principal])],
      };
    },
    reload(next: Config, nextJwt?: JwtVerifier) {
      cfg = next;
      jwt = nextJwt;
      known = tokens(next);
      // A token agent's principal and tenant come from the config: take them as now configured.
      // (A JWT's stay: they came from the token, which is still the one its session holds.)
      for (const [id, p] of [...seen]) if (p.via === "token") seen.delete(id);
    },
  };
}

function tokens(config: Config): { id: string; token: string }[] {
  return Object.entries(config.agents).flatMap(([id, a]) =>
    a.token === undefined ? [] : [{ id, token: a.token }]
  );
}
