/**
 * The daemon's governance wiring (docs/GOVERNANCE.md): JWT trust built from the config, the
 * operator identity an operator JWT proves, refusals of callers audited (bounded: a flood of bad
 * credentials cannot fill the disk), and `policy reload` — re-reading the config file and
 * swapping policies, agents and JWT trust without a restart.
 */
import type { AgentJwtTrust, Config, OperatorJwtTrust } from "../config/mod.ts";
import { loadConfig } from "../config/mod.ts";
import type { OperatorAuth, Recorder } from "../control/mod.ts";
import { SYSTEM } from "../control/mod.ts";
import { type JwtTrust, JwtVerifier } from "../governance/mod.ts";
import { dirname } from "node:path";
import { logger, TermadaError } from "../shared/mod.ts";
import { loadShellParser, shellParserLoaded } from "../policy/mod.ts";

const log = logger("daemon");

function trustOf(t: AgentJwtTrust | OperatorJwtTrust, defaults: JwtTrust["claims"]): JwtTrust {
  return {
    issuer: t.issuer,
    audience: t.audience,
    ...(t.jwks_file ? { jwksFile: t.jwks_file } : {}),
    ...(t.keys ? { keys: t.keys as JsonWebKey[] } : {}),
    ...(t.algorithms ? { algorithms: t.algorithms } : {}),
    maxTtlSeconds: t.max_ttl_s,
    clockSkewSeconds: t.clock_skew_s,
    claims: { ...defaults, ...t.claims },
  };
}

export interface Verifiers {
  agent?: JwtVerifier;
  operator?: JwtVerifier;
}

/**
 * A pinned JWKS file decides who may act: it must be a regular file (not a link) owned by this
 * user or root, and neither it nor its directory writable by group or others — else an agent
 * that can write there could pin its own key for the next reload. Throws a clear error.
 */
export function checkTrustFile(path: string, what: string): void {
  const refuse = (why: string, fix: string) => {
    throw new TermadaError("INVALID_ARGUMENT", `Cannot trust ${what} "${path}": ${why}`, {
      hint: fix,
    });
  };
  let info: Deno.FileInfo;
  try {
    info = Deno.lstatSync(path);
  } catch (err) {
    return refuse(err instanceof Error ? err.message : String(err), "Check the path in the config");
  }
  if (!info.isFile) {
    refuse("it is not a regular file (links are refused)", "Point at the file itself");
  }
  const me = Deno.uid();
  const own = (i: Deno.FileInfo) => i.uid === null || i.uid === 0 || i.uid === me;
  if (!own(info)) refuse("another user owns it", `chown it to this user or root`);
  if ((info.mode ?? 0) & 0o022) {
    refuse("group or others can write it", `chmod go-w ${path}`);
  }
  const dir = dirname(path);
  const d = Deno.statSync(dir);
  if (!own(d) || ((d.mode ?? 0) & 0o022) !== 0) {
    refuse(
      `its directory "${dir}" is writable by others (or owned by another user)`,
      "Keep pinned keys in a directory only this user (or root) can write",
    );
  }
}

/** The JWT verifiers the config asks for (a bad JWKS file stops the start, naming it). */
export async function jwtVerifiers(config: Config): Promise<Verifiers> {
  const s = config.security;
  if (s.agent_jwt?.jwks_file) checkTrustFile(s.agent_jwt.jwks_file, "the agent JWKS file");
  if (s.operator_jwt?.jwks_file) checkTrustFile(s.operator_jwt.jwks_file, "the operator JWKS file");
  return {
    ...(s.agent_jwt
      ? { agent: await JwtVerifier.create(trustOf(s.agent_jwt, { agent: "agent_id" })) }
      : {}),
    ...(s.operator_jwt
      ? { operator: await JwtVerifier.create(trustOf(s.operator_jwt, { roles: "roles" })) }
      : {}),
  };
}

/** What an operator JWT proves, for approvals and records. */
export async function operatorIdentity(v: JwtVerifier, token: string): Promise<OperatorAuth> {
  const c = await v.verify(token);
  return {
    via: "jwt",
    principal: c.principal,
    ...(c.tenant ? { tenant: c.tenant } : {}),
    roles: c.roles,
    amr: c.amr,
    ...(c.delegation.length > 0 ? { delegation: c.delegation } : {}),
  };
}

/** At most this many refusals are audited per minute; the rest are counted in the next one. */
export const REFUSALS_AUDITED_PER_MINUTE = 60;

/** Audits refused callers, at most 60 a minute (then one record says how many were dropped). */
export function refusalAuditor(
  recorder: () => Recorder | undefined,
  now: () => number = Date.now,
): (r: { transport: string; reason: string; agent?: string }) => void {
  let windowStart = 0;
  let written = 0;
  let suppressed = 0;
  return (r) => {
    const t = now();
    if (t - windowStart >= 60_000) {
      windowStart = t;
      written = 0;
    }
    if (written >= REFUSALS_AUDITED_PER_MINUTE) {
      suppressed++;
      return;
    }
    written++;
    try {
      recorder()?.note(SYSTEM, "auth.refused", {
        ...r,
        ...(suppressed > 0 ? { suppressed } : {}),
      });
      suppressed = 0;
    } catch (err) {
      log.warn("could not audit a refused caller", { error: err });
    }
  };
}

/** Config sections a reload applies; a change anywhere else needs a restart (and is named). */
const RELOADED = new Set(["policies", "default_policy", "agents", "security", "plugins"]);
const SECURITY_RELOADED = new Set([
  "identity_mode",
  "agent_jwt",
  "operator_jwt",
  "operator_token_roles",
  "environment",
]);

export interface ReloadTarget {
  path: string;
  env: Record<string, string | undefined>;
  current: () => Config;
  apply: (next: Config, verifiers: Verifiers) => void;
  recorder: Recorder;
}

export interface ReloadResult {
  ok: true;
  path: string;
  policies: string[];
  agents: string[];
  /** Sections that changed but apply only after a restart. */
  restart_needed: string[];
}

/**
 * Re-reads the config file and applies its policies, agents, identity settings and plugins: all or
 * nothing (a bad file changes nothing and the error names it), recorded in the audit log.
 */
export async function reloadPolicy(t: ReloadTarget): Promise<ReloadResult> {
  const loaded = await loadConfig(t.path, t.env, { required: true });
  const next = loaded.config;
  const current = t.current();
  for (const k of ["agent_jwt", "operator_jwt"] as const) {
    const before = current.security[k]?.jwks_file;
    const after = next.security[k]?.jwks_file;
    if (after !== undefined && after !== before) {
      // Sessions were started with the old path hidden; a new one is hidden only after a
      // restart, so until then an agent could write it.
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Cannot reload: security.${k}.jwks_file changed ("${after}"); a new key file needs a restart`,
        { hint: "Restart the daemon, or keep the path and replace the file's content" },
      );
    }
  }
  // Rules need the bash parser (without it every shell line is opaque: denied).
  if (!shellParserLoaded()) await loadShellParser();
  const verifiers = await jwtVerifiers(next);
  const now = current;
  const restart: string[] = [];
  for (const key of Object.keys(next) as (keyof Config)[]) {
    if (key === "security") {
      for (const k of Object.keys(next.security) as (keyof Config["security"])[]) {
        if (SECURITY_RELOADED.has(k)) continue;
        if (JSON.stringify(next.security[k]) !== JSON.stringify(now.security[k])) {
          restart.push(`security.${k}`);
        }
      }
      continue;
    }
    if (RELOADED.has(key)) continue;
    if (JSON.stringify(next[key]) !== JSON.stringify(now[key])) restart.push(key);
  }
  // Intent first: the change is on disk before any decision is made by it.
  await t.recorder.intent(SYSTEM, "policy.reloaded", {
    path: t.path,
    policies: Object.keys(next.policies),
    agents: Object.keys(next.agents),
    restart_needed: restart,
  });
  // Only what a reload applies changes; the rest stays as the daemon started with it, so a
  // later reload still names what needs a restart.
  const security = { ...now.security };
  for (const k of SECURITY_RELOADED) {
    (security as Record<string, unknown>)[k] = (next.security as Record<string, unknown>)[k];
  }
  const merged: Config = {
    ...now,
    policies: next.policies,
    default_policy: next.default_policy,
    agents: next.agents,
    security,
    // Plugins follow the file: changed entries restart, removed ones stop, new ones start.
    plugins: next.plugins,
  };
  t.apply(merged, verifiers);
  return {
    ok: true,
    path: t.path,
    policies: Object.keys(next.policies),
    agents: Object.keys(next.agents),
    restart_needed: restart,
  };
}
