/**
 * The config file's schema: strict (an unknown key is an error), every number and string bounded,
 * and the defaults are the product's embedded defaults (`DEFAULT_CONFIG` is the parse of `{}`).
 * Keys are snake_case as in the YAML file; `engineOptionsFrom` maps them to the engine's names.
 */
import { basename, dirname } from "node:path";
import { z } from "zod";
import { compileRegex } from "../shared/mod.ts";
import { NotificationsConfig } from "../notify/mod.ts";
import { AdaptersConfig, MAX_PLUGINS, PluginConfig } from "./plugins_schema.ts";
import { MAX_SOCKET_PATH_BYTES, mcpSocketBeside, type TermadaPaths } from "../paths/mod.ts";
import {
  AgentJwtTrust,
  Anchors,
  ApprovalRequirement,
  Budgets,
  GOVERNANCE_LIMITS,
  OperatorJwtTrust,
  Quotas,
  Role,
  StructuredRules,
} from "./governance_schema.ts";

/** Bounds of the config values, documented in docs/CONFIG.md. */
export const CONFIG_LIMITS = {
  fileBytes: 1 << 20,
  pathBytes: 4096,
  agents: 256,
  tokenMinChars: 24,
  tokenMaxChars: 512,
  agentNameChars: 128,
  policies: 64,
  rulesPerList: 1000,
  ruleChars: 4096,
  autoAnswers: 100,
  promptChars: 1024,
  answerChars: 4096,
  servers: 1024,
  serverNameChars: 63,
  hostChars: 253,
  userChars: 64,
  tagsPerServer: 16,
  tagChars: 64,
  hostKeyChars: 16384,
  resourceRules: 1000,
} as const;

/** Server names: lowercase words like agent ids, plus dots; `local` is the daemon's own host. */
export const SERVER_NAME_PATTERN: RegExp = /^[a-z0-9][a-z0-9_.-]{0,62}$/;

export const AGENT_ID_PATTERN: RegExp = /^[a-z0-9][a-z0-9_-]{0,63}$/;
/** Policy names follow the agent id rules. */
export const POLICY_NAME_PATTERN: RegExp = AGENT_ID_PATTERN;

const encoder = new TextEncoder();
const bytes = (s: string) => encoder.encode(s).length;
// deno-lint-ignore no-control-regex
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;

/** A YAML section left empty (`sessions:` with everything commented out) means "all defaults". */
function section<T extends z.ZodType>(schema: T) {
  return z.preprocess((v) => (v === null ? undefined : v), schema);
}

const int = (min: number, max: number) => z.number().int().min(min).max(max);

/**
 * A regular expression the linear-time engine accepts (JavaScript syntax without backreferences
 * or lookaround): config patterns run over output agents control, so none may backtrack.
 */
function linearRegex(source: string, ctx: z.RefinementCtx): void {
  try {
    compileRegex(source);
  } catch (err) {
    const why = err instanceof Error
      ? err.message.replace(/^Invalid "pattern": /, "")
      : String(err);
    ctx.addIssue({ code: "custom", message: `is not a usable regular expression: ${why}` });
  }
}

const AbsolutePath = (maxBytes: number) =>
  z.string()
    .refine((s) => s.startsWith("/"), "must be an absolute path")
    .refine((s) => !s.includes("\0"), "must not contain NUL bytes")
    .refine((s) => bytes(s) <= maxBytes, `must be at most ${maxBytes} bytes`);

/**
 * Splits `host:port` / `[v6]:port` and accepts only loopback hosts (127.0.0.0/8, ::1), so the
 * TCP listener can never face the network. Port 0 asks the system for a free port (tests).
 * Returns undefined for anything else. `hostname` is in the form `Deno.serve` takes.
 */
export function parseBind(bind: string): { hostname: string; port: number } | undefined {
  const m = /^(?:\[([0-9A-Fa-f:]+)\]|([0-9.]+)):(0|[1-9][0-9]{0,4})$/.exec(bind);
  if (!m) return undefined;
  const port = Number(m[3]);
  if (port > 65535) return undefined;
  const v6 = m[1];
  if (v6 !== undefined) {
    const loopback = v6 === "::1" || /^(?:0{1,4}:){7}0{0,3}1$/.test(v6);
    return loopback ? { hostname: "::1", port } : undefined;
  }
  const octets = (m[2] ?? "").split(".");
  if (octets.length !== 4) return undefined;
  for (const o of octets) {
    // No leading zeros: "127.0.0.010" is octal to some resolvers and decimal to others.
    if (!/^(0|[1-9][0-9]{0,2})$/.test(o) || Number(o) > 255) return undefined;
  }
  return octets[0] === "127" ? { hostname: octets.join("."), port } : undefined;
}

const Server = z.strictObject({
  bind: z.string().max(64).superRefine((bind, ctx) => {
    if (parseBind(bind) === undefined) {
      ctx.addIssue({
        code: "custom",
        message: `must be a loopback address and a port, like "127.0.0.1:7717" or ` +
          `"[::1]:7717" (127.0.0.0/8 or ::1 only), not "${bind}"`,
      });
    }
  }).nullable().default(null),
  // "-mcp" is added beside it for the MCP socket: keep room for those 4 bytes.
  socket: AbsolutePath(MAX_SOCKET_PATH_BYTES - 4).nullable().default(null),
});

const Log = z.strictObject({
  level: z.enum(["debug", "info", "warn", "error"]).default("info"),
});

const Auth = z.strictObject({
  dev_mode: z.boolean().default(true),
});

/** A user or group name (as useradd allows, plus `$` for machine accounts) or a numeric id. */
const AccountName = z.string().min(1).max(CONFIG_LIMITS.userChars).regex(
  /^(?:[0-9]{1,10}|[A-Za-z_][A-Za-z0-9_.-]*\$?)$/,
  "must be a user or group name (letters, digits, '_', '.', '-', starting with a letter or '_') or a numeric id",
);

const Security = z.strictObject({
  /**
   * The kernel boundary around sessions (docs/SECURITY.md): `required` refuses to start sessions
   * and jobs without the exec gate; `auto` uses what the machine has and says what it lacks;
   * `off` runs programs directly (no exec gate, no Landlock, no cgroups).
   */
  exec_gate: z.enum(["required", "auto", "off"]).default("auto"),
  /**
   * Local session shells and one-shot jobs run as this user (and group: its primary one unless
   * given), names or numeric ids; the daemon keeps its own and its state dir stays out of their
   * reach. Resolved from /etc/passwd and /etc/group at start (docs/SECURITY.md, run_as).
   */
  run_as: z.strictObject({
    user: AccountName,
    group: AccountName.optional(),
  }).optional(),
  /**
   * `development` (default): agents may name themselves on the socket, policies without rules
   * allow everything. `strict`: every caller proves who it is (a configured agent's strong token
   * or an agent JWT), every agent has its own policy, and what no allow rule matches is denied.
   */
  identity_mode: z.enum(["development", "strict"]).default("development"),
  /** Agent JWTs (short-lived, verified offline): `agents.<id>.jwt: true` accepts them. */
  agent_jwt: AgentJwtTrust.optional(),
  /** Operator JWTs on `/api/*`, `/metrics` and the socket's operator routes (besides the token). */
  operator_jwt: OperatorJwtTrust.optional(),
  /** Roles the static operator token (CLI, dashboard) holds in approval requirements. */
  operator_token_roles: z.array(Role).max(16).default([]),
  /** The environment label of the daemon's own machine (`local`) for structured rules. */
  environment: z.string().min(1).max(64).regex(/^[A-Za-z0-9._-]+$/).nullable().default(null),
  quotas: Quotas.prefault({}),
});

/**
 * One remote server (`servers[]`): reached by name over SSH. `auth` names a vault entry (when the
 * vault exists); without it the daemon tries ssh-agent (`SSH_AUTH_SOCK`), then the unencrypted
 * `~/.ssh/id_ed25519`, `id_ecdsa`, `id_rsa` of its own user. `~/.ssh/config` is not read.
 * `host_key` pins the key (`ssh-ed25519 AAAA…` or `SHA256:…`); absent, the first key seen is
 * recorded (trust on first use, `<state>/known_hosts`).
 */
export const ServerEntry = z.strictObject({
  name: z.string().regex(
    SERVER_NAME_PATTERN,
    "must be 1-63 characters: lowercase letters, digits, '.', '_' and '-', starting with a letter or digit",
  ).refine((n) => n !== "local", '"local" is the daemon\'s own machine'),
  host: z.string().min(1).max(CONFIG_LIMITS.hostChars).regex(
    /^[A-Za-z0-9._:-]+$/,
    "must be a host name or an IP address",
  ),
  port: int(1, 65535).default(22),
  user: z.string().min(1).max(CONFIG_LIMITS.userChars).regex(
    /^[A-Za-z0-9._][A-Za-z0-9._-]*\$?$/,
    "must be a user name (letters, digits, '.', '_', '-')",
  ),
  tags: z.array(
    z.string().min(1).max(CONFIG_LIMITS.tagChars).regex(
      /^[A-Za-z0-9._:-]+$/,
      "must be a plain word",
    ),
  ).max(CONFIG_LIMITS.tagsPerServer).default([]),
  auth: z.string().min(1).max(64).regex(/^[A-Za-z0-9._-]+$/, "must name a vault entry").optional(),
  /** The environment label structured rules match (`prod`, `staging`…). */
  environment: z.string().min(1).max(64).regex(/^[A-Za-z0-9._-]+$/).optional(),
  host_key: z.string().min(1).max(CONFIG_LIMITS.hostKeyChars).refine(
    (k) =>
      /^SHA256:[A-Za-z0-9+/]{43}=?$/.test(k) || /^[a-z0-9@.-]+ [A-Za-z0-9+/]+=*( .*)?$/.test(k),
    'must be an OpenSSH public key ("ssh-ed25519 AAAA…") or a fingerprint ("SHA256:…")',
  ).optional(),
});
export type ServerEntry = z.infer<typeof ServerEntry>;

const Servers = z.array(ServerEntry).max(CONFIG_LIMITS.servers).superRefine((list, ctx) => {
  const seen = new Set<string>();
  list.forEach((s, i) => {
    if (seen.has(s.name)) {
      ctx.addIssue({ code: "custom", path: [i, "name"], message: `"${s.name}" is listed twice` });
    }
    seen.add(s.name);
  });
});

/** Remote work (src/remote): connection bounds. */
const Remote = z.strictObject({
  /** How long a connection may take (TCP + key exchange + auth) before SERVER_UNREACHABLE. */
  connect_timeout_ms: int(500, 120_000).default(8000),
  /** SSH keepalive interval; a link that misses 3 is dropped (and sessions reconnect). */
  keepalive_ms: int(1000, 600_000).default(15_000),
  /** Reconnect attempts of a session whose link dropped, before it is closed. */
  reconnect_attempts: int(0, 100).default(8),
});

const AgentId = z.string().regex(
  AGENT_ID_PATTERN,
  "must be 1-64 lowercase letters, digits, _ or -, starting with a letter or digit",
);

const PolicyName = z.string().regex(
  POLICY_NAME_PATTERN,
  "must be 1-64 lowercase letters, digits, _ or -, starting with a letter or digit",
);

const Agent = z.strictObject({
  token: z.string()
    .min(CONFIG_LIMITS.tokenMinChars)
    .max(CONFIG_LIMITS.tokenMaxChars)
    .regex(/^[\x21-\x7e]+$/, "must be printable ASCII without spaces")
    .optional(),
  /** Accepts agent JWTs whose agent claim is this id (`security.agent_jwt`). */
  jwt: z.boolean().default(false),
  /** Who is behind the agent (a person or team): rules and `exclude_requester` match it. */
  principal: z.string().min(1).max(256).regex(/^[A-Za-z0-9._@:+-]+$/).optional(),
  tenant: z.string().min(1).max(256).regex(/^[A-Za-z0-9._@:+-]+$/).optional(),
  name: z.string().min(1).max(CONFIG_LIMITS.agentNameChars)
    .refine((s) => !CONTROL_CHARS.test(s), "must not contain control characters")
    .optional(),
  /** The policy under `policies` for this agent; absent = `default_policy`. */
  policy: PolicyName.optional(),
}).refine((a) => a.token !== undefined || a.jwt, "needs a token or jwt: true");

const Agents = z.record(AgentId, Agent).superRefine((agents, ctx) => {
  const ids = Object.keys(agents);
  if (ids.length > CONFIG_LIMITS.agents) {
    ctx.addIssue({ code: "custom", message: `at most ${CONFIG_LIMITS.agents} agents` });
  }
  const owner = new Map<string, string>();
  for (const id of ids) {
    const token = agents[id]?.token;
    if (token === undefined) continue;
    const first = owner.get(token);
    if (first === undefined) {
      owner.set(token, id);
    } else {
      // Never echo the token itself: error messages end up in logs.
      ctx.addIssue({
        code: "custom",
        path: [id, "token"],
        message: `is the same as agent "${first}"'s token; each agent needs its own`,
      });
    }
  }
});

const Sessions = z.strictObject({
  shell: z.enum(["bash", "zsh", "sh"]).default("bash"),
  cwd: AbsolutePath(CONFIG_LIMITS.pathBytes).nullable().default(null),
  user_rc: z.boolean().default(false),
  max_per_agent: int(1, GOVERNANCE_LIMITS.sessionsPerOwnerMax).default(32),
  max_total: int(1, GOVERNANCE_LIMITS.sessionsTotalMax).default(128),
  record: z.boolean().default(true),
  recording_max_file_bytes: int(64 * 1024, 1 << 30).default(16 * 1024 * 1024),
  recording_keep_files: int(1, 1000).default(3),
  /**
   * After an agent's last connection closed, its sessions are reaped this much later (idle ones
   * closed, running jobs allowed to finish first); null: never.
   */
  reap_after_ms: int(100, 7 * 86_400_000).nullable().default(300_000),
});

const Jobs = z.strictObject({
  kill_grace_ms: int(0, 60_000).default(2000),
  retention_bytes: int(64 * 1024, 1 << 30).default(8 * 1024 * 1024),
  finished_per_agent: int(1, 100_000).default(200),
  spool_max_bytes: int(64 * 1024, 2 ** 36).default(16 * 1024 * 1024),
});

const Redaction = z.strictObject({
  /** Extra regexes (JavaScript syntax, ASCII) masked in outputs, prompts and the audit log. */
  patterns: z.array(
    z.string().min(1).max(1024).superRefine((src, ctx) => linearRegex(src, ctx)),
  ).max(64).default([]),
});

const Approvals = z.strictObject({
  /** An approval nobody answers is denied after this long. */
  confirm_timeout_ms: int(100, 86_400_000).default(120_000),
  /**
   * Also ask the human in the agent's own MCP client (elicitation) when it supports it: their
   * answer is one approval by `client:<agent>`, for the default requirement only (off: nothing
   * proves who answers in a client the operator does not run).
   */
  elicitation: z.boolean().default(false),
});

/** A rule pattern (glob syntax in docs/POLICY.md). */
const RulePattern = z.string()
  .max(CONFIG_LIMITS.ruleChars)
  .refine((s) => s.trim() !== "", "must not be empty")
  .refine((s) => !CONTROL_CHARS.test(s), "must not contain control characters")
  .refine((s) => /(^|[^\\])(\\\\)*$/.test(s), "must not end with a lone backslash");

const RuleList = section(z.array(RulePattern).max(CONFIG_LIMITS.rulesPerList).default([]));

const AutoAnswer = z.strictObject({
  prompt: z.string().min(1).max(CONFIG_LIMITS.promptChars).superRefine((prompt, ctx) =>
    linearRegex(prompt, ctx)
  ),
  answer: z.string().max(CONFIG_LIMITS.answerChars)
    .refine((s) => !s.includes("\0"), "must not contain NUL"),
});

const ResourcePattern = z.string().min(1).max(CONFIG_LIMITS.ruleChars)
  .refine((s) => s.trim() !== "", "must not be empty")
  .refine((s) => !CONTROL_CHARS.test(s), "must not contain control characters");
const ResourceList = section(
  z.array(ResourcePattern).max(CONFIG_LIMITS.resourceRules).default([]),
);
/** allow / deny / confirm patterns for one kind of resource (servers, forwards, files). */
const ResourceRules = z.strictObject({
  allow: ResourceList,
  deny: ResourceList,
  confirm: ResourceList,
});
const FilePattern = ResourcePattern.refine(
  (s) => /^\s*(\/|[^/:]+:\/)/.test(s),
  'must be an absolute path ("/etc/**") or "<server>:<absolute path>"',
);
const FileList = section(z.array(FilePattern).max(CONFIG_LIMITS.resourceRules).default([]));
const VaultPattern = ResourcePattern.refine(
  (s) => /^\s*([^:\s]+:)?[^:\s]+\s*$/.test(s),
  'must be "<entry>" or "<target>:<entry>" (globs allowed)',
);
const VaultList = section(z.array(VaultPattern).max(CONFIG_LIMITS.resourceRules).default([]));
const FileRules = z.strictObject({ allow: FileList, deny: FileList, confirm: FileList });

/**
 * `policies.<name>.snapshot`: before a command matching `commands` (the same globs as the command
 * lists, on every simple command a line runs; a command that cannot be analysed counts as
 * matching) starts, a snapshot of its working directory is taken; when that fails the command is
 * refused (`on_failure: refuse`, the default) or runs anyway (`run`), both audited.
 */
const SnapshotRules = z.strictObject({
  commands: section(z.array(RulePattern).min(1).max(CONFIG_LIMITS.rulesPerList)),
  on_failure: z.enum(["refuse", "run"]).default("refuse"),
  /** Replace the default excludes (node_modules); `.git` only with include_git. */
  excludes: z.array(z.string().min(1).max(256)).max(64).optional(),
  include_git: z.boolean().default(false),
  max_files: z.number().int().min(1).max(100_000).optional(),
  max_bytes: z.number().int().min(0).max(4 * 1024 ** 3).optional(),
});

/**
 * One command policy (`policies.<name>`): glob rules matched against every command a line would
 * run (src/policy), and prompt answers for the engine. All lists empty = allow everything.
 */
export const PolicyRules = z.strictObject({
  allow: RuleList,
  deny: RuleList,
  confirm: RuleList,
  auto_answer: section(z.array(AutoAnswer).max(CONFIG_LIMITS.autoAnswers).default([])),
  /** Which servers sessions and fleet runs may target (names, or `tag:<tag>`). */
  servers: section(ResourceRules.optional()),
  /** Which port forwards may be opened (`<server>:<remote host>:<remote port>`). */
  forwards: section(ResourceRules.optional()),
  /** Which plugin tools agents may call (`<plugin>.<tool>`, globs: `notes.*`). */
  plugins: section(ResourceRules.optional()),
  /** What adapter runs may change (`<adapter>:<resource>`: `file.patch:/srv/app/**`). */
  adapters: section(ResourceRules.optional()),
  /** Which files `file_read` / `file_write` may touch (path globs, `<server>:` prefixed for one server). */
  files: section(
    z.strictObject({
      read: section(FileRules.optional()),
      write: section(FileRules.optional()),
    })
      .optional(),
  ),
  /**
   * Which vault entries agents of this policy may use, and where: `<entry>` or
   * `<target>:<entry>` globs (target `local` or a server's name). No `vault` rules: no entry
   * may be used (secrets fail closed, even under an otherwise open policy).
   */
  vault: section(
    z.strictObject({ allow: VaultList, deny: VaultList }).optional(),
  ),
  /** Structured rules over principal, tenant, typed action, resource, context, risk (docs/GOVERNANCE.md). */
  rules: section(StructuredRules.default([])),
  /** Who must approve what the `confirm` list holds (default: one operator). */
  approval: section(ApprovalRequirement.optional()),
  /** Budgets this policy's agents spend (docs/GOVERNANCE.md). */
  budgets: section(Budgets.default([])),
  /** Commands a snapshot of their directory is taken before (docs/SNAPSHOTS.md). */
  snapshot: section(SnapshotRules.optional()),
});
export type PolicyRules = z.infer<typeof PolicyRules>;

const Policies = z.record(PolicyName, section(PolicyRules.prefault({}))).refine(
  (policies) => Object.keys(policies).length <= CONFIG_LIMITS.policies,
  `at most ${CONFIG_LIMITS.policies} policies`,
);

/** The whole config file. Schema and inferred type share this name. */
export const Config = z.strictObject({
  server: section(Server.prefault({})),
  log: section(Log.prefault({})),
  auth: section(Auth.prefault({})),
  security: section(Security.prefault({})),
  agents: section(Agents.prefault({})),
  sessions: section(Sessions.prefault({})),
  jobs: section(Jobs.prefault({})),
  approvals: section(Approvals.prefault({})),
  redaction: section(Redaction.prefault({})),
  policies: section(Policies.prefault({ default: {} })),
  default_policy: PolicyName.default("default"),
  servers: section(Servers.default([])),
  remote: section(Remote.prefault({})),
  audit: section(z.strictObject({ anchors: section(Anchors.prefault({})) }).prefault({})),
  /** Desktop and Telegram notifications (docs/NOTIFICATIONS.md). */
  notifications: section(NotificationsConfig.prefault({})),
  /** Out-of-process MCP plugins whose tools agents call as `<plugin>.<tool>` (docs/PLUGINS.md). */
  plugins: section(z.array(PluginConfig).max(MAX_PLUGINS).default([])),
  /** Typed adapters: `file.patch` roots and `http.request` endpoints (docs/PLUGINS.md). */
  adapters: section(AdaptersConfig.prefault({})),
}).superRefine((config, ctx) => {
  const seen = new Set<string>();
  config.plugins.forEach((p, i) => {
    if (seen.has(p.name)) {
      ctx.addIssue({
        code: "custom",
        path: ["plugins", i, "name"],
        message: `plugin "${p.name}" is declared twice`,
      });
    }
    seen.add(p.name);
  });
  const known = Object.keys(config.policies);
  const missing = (name: string) =>
    `no policy named "${name}" under "policies" (defined: ${known.join(", ") || "none"})`;
  if (!Object.hasOwn(config.policies, config.default_policy)) {
    ctx.addIssue({
      code: "custom",
      path: ["default_policy"],
      message: missing(config.default_policy),
    });
  }
  const { agent_jwt: aj, operator_jwt: oj } = config.security;
  if (aj && oj && aj.issuer === oj.issuer && aj.audience === oj.audience) {
    // The same issuer and audience would make every agent JWT an operator credential.
    ctx.addIssue({
      code: "custom",
      path: ["security", "operator_jwt", "audience"],
      message: "must differ from security.agent_jwt's (same issuer and audience: an agent's " +
        "token would pass as an operator's)",
    });
  }
  const strict = config.security.identity_mode === "strict";
  for (const [id, agent] of Object.entries(config.agents)) {
    if (agent.policy !== undefined && !Object.hasOwn(config.policies, agent.policy)) {
      ctx.addIssue({
        code: "custom",
        path: ["agents", id, "policy"],
        message: missing(agent.policy),
      });
    }
    if (agent.jwt && config.security.agent_jwt === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["agents", id, "jwt"],
        message: "needs security.agent_jwt (the issuer and keys agent JWTs are checked against)",
      });
    }
    if (!strict) continue;
    if (agent.policy === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["agents", id, "policy"],
        message: "is required in strict identity mode (every agent names its own policy)",
      });
    }
    const weak = agent.token === undefined ? undefined : weakToken(agent.token);
    if (weak) {
      ctx.addIssue({ code: "custom", path: ["agents", id, "token"], message: weak });
    }
  }
});

/**
 * Why a static token is too weak for strict mode (never quoting it), or undefined: at least 32
 * characters, at least 16 distinct ones, and not one character class only.
 */
export function weakToken(token: string): string | undefined {
  if (token.length < 32) return "must be at least 32 characters in strict identity mode";
  if (new Set(token).size < 16) {
    return "must have at least 16 distinct characters in strict identity mode";
  }
  const classes = [/[a-z]/, /[A-Z]/, /[0-9]/, /[^A-Za-z0-9]/].filter((r) => r.test(token)).length;
  if (classes < 2) return "must mix letters and digits (or symbols) in strict identity mode";
  return undefined;
}
export type Config = z.infer<typeof Config>;

/** Fails closed for a config built without the schema's checks: denies everything. */
const DENY_ALL: PolicyRules = Object.freeze({
  allow: Object.freeze([]) as unknown as string[],
  deny: Object.freeze(["*"]) as unknown as string[],
  confirm: Object.freeze([]) as unknown as string[],
  auto_answer: Object.freeze([]) as unknown as PolicyRules["auto_answer"],
  servers: Object.freeze({ allow: [], deny: ["*"], confirm: [] }),
  rules: Object.freeze([]) as unknown as PolicyRules["rules"],
  budgets: Object.freeze([]) as unknown as PolicyRules["budgets"],
});

/**
 * The policy for an agent: its own `policy`, else `default_policy`. An agent missing from
 * `agents` (dev mode) gets the default. The schema guarantees the name exists; if a config was
 * assembled without it, the answer is a policy that denies everything.
 */
export function policyFor(config: Config, agentId: string): PolicyRules {
  const agent = Object.hasOwn(config.agents, agentId) ? config.agents[agentId] : undefined;
  const name = agent?.policy ?? config.default_policy;
  return (Object.hasOwn(config.policies, name) ? config.policies[name] : undefined) ?? DENY_ALL;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object") {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/** The embedded defaults: what a missing config file means. Frozen: it is shared. */
export const DEFAULT_CONFIG: Config = deepFreeze(Config.parse({}));

/**
 * The engine's options as named in `EngineOptions` (src/engine), as a plain object: config does
 * not import the engine. Assignable to `Partial<EngineOptions>`.
 */
export interface EngineSettings {
  runtimeDir: string;
  /** Asciicast recordings (the engine's default would be `<runtimeDir>/recordings`). */
  recordingsDir: string;
  limits: { sessionsPerOwner: number; sessionsTotal: number; finishedJobsPerOwner: number };
  output: { retentionBytes: number };
  defaultShell: "bash" | "zsh" | "sh";
  /** Absent when the config leaves it to the engine ($HOME). */
  defaultCwd?: string;
  userRc: boolean;
  record: boolean;
  recording: { maxFileBytes: number; keepFiles: number };
  killGraceMs: number;
  /** Extra redaction patterns (`redaction.patterns`). */
  redactPatterns: string[];
  /** The session boundary: mode, and what no session may reach. */
  sandbox: { mode: "required" | "auto" | "off"; hide: string[]; launcherCache: string };
}

export function engineOptionsFrom(config: Config, paths: TermadaPaths): EngineSettings {
  const { sessions, jobs } = config;
  return {
    runtimeDir: paths.runtimeDir,
    recordingsDir: paths.recordingsDir,
    limits: {
      sessionsPerOwner: sessions.max_per_agent,
      sessionsTotal: sessions.max_total,
      // In memory only the newest few; the store keeps `finished_per_agent`.
      finishedJobsPerOwner: Math.min(50, jobs.finished_per_agent),
    },
    output: { retentionBytes: jobs.retention_bytes },
    defaultShell: sessions.shell,
    ...(sessions.cwd === null ? {} : { defaultCwd: sessions.cwd }),
    userRc: sessions.user_rc,
    record: sessions.record,
    recording: {
      maxFileBytes: sessions.recording_max_file_bytes,
      keepFiles: sessions.recording_keep_files,
    },
    killGraceMs: jobs.kill_grace_ms,
    redactPatterns: [...config.redaction.patterns],
    sandbox: {
      mode: config.security.exec_gate,
      hide: controlPlanePaths(paths),
      launcherCache: `${paths.stateDir}/launcher-cache`,
    },
  };
}

/**
 * What no process of a session may read or write (Landlock): the state dir (tokens, database,
 * audit, recordings, spool, other sessions' files), the config file's directory, and the
 * sockets' directories when they live elsewhere.
 */
export function controlPlanePaths(paths: TermadaPaths): string[] {
  const out = new Set<string>([paths.stateDir]);
  // A directory of Termada's own is hidden whole; a file elsewhere (`--config ./x.yaml` in a
  // project) only as itself, so the project around it stays reachable.
  const own = (p: string) => {
    const d = dirname(p);
    return d === paths.stateDir || /^\.?termada/.test(basename(d));
  };
  for (const p of [paths.configFile, paths.socketPath, paths.mcpSocketPath, paths.tokenFile]) {
    out.add(own(p) ? dirname(p) : p);
  }
  // The socket key proves "outside every session": hidden wherever the socket lives.
  if (!own(paths.mcpSocketPath)) out.add(`${paths.mcpSocketPath}.key`);
  return [...out];
}

/** The paths with the config's overrides applied (today: `server.socket`). */
export function effectivePaths(paths: TermadaPaths, config: Config): TermadaPaths {
  const socket = config.server.socket;
  return socket === null
    ? paths
    : { ...paths, socketPath: socket, mcpSocketPath: mcpSocketBeside(socket) };
}
