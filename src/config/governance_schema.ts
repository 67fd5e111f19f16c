/**
 * The governance parts of the config (docs/GOVERNANCE.md): who callers are (`security.identity_mode`,
 * agent and operator JWT trust), the quotas, the structured rules and budgets a policy may hold,
 * and the audit anchors. Strict like the rest of the schema: every value bounded, unknown keys
 * are errors.
 */
import { z } from "zod";
import { ACTION_KINDS, type ActionKind } from "../shared/mod.ts";

/** Bounds of the governance values (docs/CONFIG.md, docs/GOVERNANCE.md). */
export const GOVERNANCE_LIMITS = {
  /** An agent JWT lives at most an hour. */
  agentJwtMaxTtlS: 3600,
  /** An operator JWT at most 12 hours (a working day). */
  operatorJwtMaxTtlS: 43_200,
  clockSkewMaxS: 300,
  inlineKeys: 64,
  claimNameChars: 64,
  structuredRules: 256,
  budgets: 64,
  roleChars: 64,
  rolesPerRule: 16,
  quorumMax: 8,
  anchorReceivers: 8,
  /** Documented maxima of the quotas (defaults 32 / 128). */
  sessionsPerOwnerMax: 4096,
  sessionsTotalMax: 65_536,
  pendingPerOwnerMax: 256,
  pendingTotalMax: 1000,
} as const;

const int = (min: number, max: number) => z.number().int().min(min).max(max);
// deno-lint-ignore no-control-regex
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;
const Text = (max: number) =>
  z.string().min(1).max(max).refine(
    (s) => !CONTROL_CHARS.test(s),
    "must not contain control characters",
  );

const ClaimName = z.string().min(1).max(GOVERNANCE_LIMITS.claimNameChars).regex(
  /^[A-Za-z0-9_.:/-]+$/,
  "must be a claim name (letters, digits, '_', '.', ':', '/', '-')",
);

/** A public JWK as the config holds it (only the members keys need; private members refused). */
const PublicJwk = z.looseObject({
  kty: z.enum(["OKP", "EC", "RSA"]),
  kid: z.string().min(1).max(256).optional(),
  alg: z.enum(["EdDSA", "ES256", "RS256"]).optional(),
}).refine(
  (k) => !["d", "p", "q", "dp", "dq", "qi", "k", "oth", "priv"].some((m) => Object.hasOwn(k, m)),
  "must be a public key (it holds a private member)",
);

const jwtTrust = (maxTtl: number, defaultTtl: number) =>
  z.strictObject({
    /** Exact `iss`. */
    issuer: Text(512),
    /** Must be one of the token's `aud`. */
    audience: Text(512),
    /** A pinned JWKS file (public keys), read at start and on `termada policy reload`. */
    jwks_file: z.string().min(1).max(4096).refine((s) => s.startsWith("/"), "must be absolute")
      .optional(),
    /** Public keys inline. */
    keys: z.array(PublicJwk).max(GOVERNANCE_LIMITS.inlineKeys).optional(),
    algorithms: z.array(z.enum(["EdDSA", "ES256", "RS256"])).min(1).max(3).optional(),
    /** Longest lifetime a token may claim (exp − iat). */
    max_ttl_s: int(1, maxTtl).default(defaultTtl),
    clock_skew_s: int(0, GOVERNANCE_LIMITS.clockSkewMaxS).default(60),
    /** Claim names: principal (default `sub`), tenant, agent (agent id), roles. */
    claims: z.strictObject({
      principal: ClaimName.optional(),
      tenant: ClaimName.optional(),
      agent: ClaimName.optional(),
      roles: ClaimName.optional(),
    }).optional(),
  }).refine(
    (t) => t.jwks_file !== undefined || (t.keys !== undefined && t.keys.length > 0),
    "needs jwks_file or keys",
  );

export const AgentJwtTrust = jwtTrust(GOVERNANCE_LIMITS.agentJwtMaxTtlS, 3600);
export type AgentJwtTrust = z.infer<typeof AgentJwtTrust>;
export const OperatorJwtTrust = jwtTrust(GOVERNANCE_LIMITS.operatorJwtMaxTtlS, 3600);
export type OperatorJwtTrust = z.infer<typeof OperatorJwtTrust>;

export const Role = z.string().min(1).max(GOVERNANCE_LIMITS.roleChars).regex(
  /^[A-Za-z0-9_.:-]+$/,
  "must be a role name (letters, digits, '_', '.', ':', '-')",
);

/** Per-owner and overall bounds (configurable down, not up past the documented maxima). */
export const Quotas = z.strictObject({
  pending_per_owner: int(1, GOVERNANCE_LIMITS.pendingPerOwnerMax).default(32),
  pending_total: int(1, GOVERNANCE_LIMITS.pendingTotalMax).default(128),
});

/** The typed actions rules and budgets name (the one list: src/shared/actions.ts). */
export { ACTION_KINDS };
export type ActionKindName = ActionKind;
export const RISK_LEVELS = ["low", "medium", "high", "critical"] as const;

/** `Mon-Fri 09:00-17:30` in a time zone (IANA name, default UTC). */
const TimeWindow = z.strictObject({
  days: z.array(z.enum(["mon", "tue", "wed", "thu", "fri", "sat", "sun"])).min(1).max(7)
    .optional(),
  from: z.string().regex(/^([01][0-9]|2[0-3]):[0-5][0-9]$/, 'must be "HH:MM"'),
  to: z.string().regex(/^([01][0-9]|2[0-3]):[0-5][0-9]$/, 'must be "HH:MM"'),
  tz: z.string().min(1).max(64).refine((tz) => {
    try {
      new Intl.DateTimeFormat("en-US", { timeZone: tz });
      return true;
    } catch {
      return false;
    }
  }, "must be an IANA time zone such as UTC or Europe/Paris").default("UTC"),
});

export const ApprovalRequirement = z.strictObject({
  /** Distinct approvers needed (1..8). */
  quorum: int(1, GOVERNANCE_LIMITS.quorumMax).default(1),
  /** Each counted approver holds at least one of these roles (none: any operator). */
  roles: z.array(Role).max(GOVERNANCE_LIMITS.rolesPerRule).default([]),
  /** Each counted approver signed in with a second factor (`amr` of their JWT). */
  mfa: z.boolean().default(false),
  /** The principal behind the requesting agent may not approve it. */
  exclude_requester: z.boolean().default(false),
});
export type ApprovalRequirement = z.infer<typeof ApprovalRequirement>;

/** A structured rule's glob: not blank, no lone trailing backslash (checked at load). */
const Glob = Text(4096)
  .refine((s) => s.trim() !== "", "must not be blank")
  .refine((s) => /(^|[^\\])(\\\\)*$/.test(s), "must not end with a lone backslash");
const oneOrMany = <T extends z.ZodType>(t: T) =>
  z.union([t, z.array(t).min(1).max(64)]).transform((v) =>
    (Array.isArray(v) ? v : [v]) as z.infer<T>[]
  );

/**
 * One structured rule (`policies.<name>.rules[]`): every matcher given must hold; an absent one
 * matches anything. The glob lists of a policy (`allow`/`deny`/`confirm`) are the same thing with
 * `action: exec` and the glob as `resource`.
 */
export const StructuredRule = z.strictObject({
  effect: z.enum(["allow", "deny", "confirm"]),
  action: oneOrMany(z.enum(ACTION_KINDS)).optional(),
  /** Glob on the action's resource: the command (exec/input/fleet), path, server, forward, tool. */
  resource: oneOrMany(Glob).optional(),
  principal: oneOrMany(Glob).optional(),
  tenant: oneOrMany(Glob).optional(),
  /** The target's environment label (`servers[].environment`, `security.environment`). */
  environment: oneOrMany(Glob).optional(),
  /** When the rule applies (outside the window it does not). */
  time: TimeWindow.optional(),
  risk: oneOrMany(z.enum(RISK_LEVELS)).optional(),
  reversible: z.boolean().optional(),
  /** For confirm: who must approve. */
  approval: ApprovalRequirement.optional(),
  /** Shown to people when the rule decides. */
  reason: Text(512).optional(),
});
export type StructuredRule = z.infer<typeof StructuredRule>;

export const StructuredRules = z.array(StructuredRule).max(GOVERNANCE_LIMITS.structuredRules);

/** `30s`, `15m`, `1h`, `1d`, `7d`, or null (never resets). */
const Window = z.union([
  z.null(),
  z.string().regex(/^[1-9][0-9]{0,5}(s|m|h|d)$/, 'must be like "30m", "1h", "1d"'),
]).transform((w) => {
  if (w === null) return null;
  const n = Number(w.slice(0, -1));
  const unit = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[w.slice(-1) as "s"];
  return n * unit;
}).refine((ms) => ms === null || (ms >= 1000 && ms <= 366 * 86_400_000), "must be 1s..366d");

export const BudgetEntry = z.strictObject({
  name: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "must be a lowercase word"),
  scope: z.enum(["global", "tenant", "principal", "recipient"]),
  metric: z.enum(["operations", "runtime_s", "cost", "prod_changes", "failures"]),
  limit: z.number().finite().min(0).max(1e12),
  window: Window.default(null),
  kinds: z.array(z.enum(ACTION_KINDS)).min(1).max(8).optional(),
  /** Only this scope value (a tenant, principal or server name). */
  match: Text(256).optional(),
});
export type BudgetEntry = z.infer<typeof BudgetEntry>;

export const Budgets = z.array(BudgetEntry).max(GOVERNANCE_LIMITS.budgets).superRefine(
  (list, ctx) => {
    const seen = new Set<string>();
    list.forEach((b, i) => {
      if (seen.has(b.name)) {
        ctx.addIssue({ code: "custom", path: [i, "name"], message: `"${b.name}" is listed twice` });
      }
      seen.add(b.name);
    });
  },
);

const AnchorReceiver = z.strictObject({
  name: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "must be a lowercase word"),
  url: z.string().max(2048).refine((u) => {
    try {
      return new URL(u).protocol === "https:";
    } catch {
      return false;
    }
  }, "must be an https:// URL"),
  /** A PEM CA bundle to trust for this receiver (a private CA). */
  ca_file: z.string().min(1).max(4096).refine((s) => s.startsWith("/"), "must be absolute")
    .optional(),
  timeout_ms: int(500, 120_000).default(10_000),
});

/** Signed anchors of the audit chain (docs/AUDIT.md). */
export const Anchors = z.strictObject({
  /** How often the head is anchored when it moved (null: only on demand). */
  every_s: int(10, 86_400).nullable().default(300),
  receivers: z.array(AnchorReceiver).max(GOVERNANCE_LIMITS.anchorReceivers).default([]),
});
