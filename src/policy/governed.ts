/**
 * Structured rules (`policies.<name>.rules[]`, docs/GOVERNANCE.md): each one matches the
 * authenticated principal and tenant, the typed action, its resource, its context (the target's
 * environment label, a time window), its risk and whether it can be undone — every matcher given
 * must hold. The strictest matching rule wins (deny > confirm > allow); the approval
 * requirements of every matching confirm rule add up (highest quorum, all roles, MFA if any asks).
 *
 * A policy's glob lists are the same form: `allow: ["git *"]` is `{effect: allow, action: exec,
 * resource: "git *"}`. Command resources (exec, input, fleet) are matched by the command
 * analyser (src/policy/policy.ts) with the same semantics as those lists; other resources
 * (paths, servers, forwards, tools) with the resource glob (`*` within a `/` segment, `**`
 * across). Principal, tenant and environment match with the resource glob too.
 *
 * Pure: no clock of its own (the caller passes `now`), no I/O.
 */
import { type CompiledPolicy, compilePolicy } from "./policy.ts";
import { compileResourceGlob, matchTokens } from "./resource.ts";

export type GovernedKind =
  | "exec"
  | "input"
  | "session"
  | "file.read"
  | "file.write"
  | "fleet"
  | "forward"
  | "plugin"
  | "adapter";
export type Risk = "low" | "medium" | "high" | "critical";
const RISK_ORDER: Record<Risk, number> = { low: 0, medium: 1, high: 2, critical: 3 };

/**
 * Who must approve (the config's `approval`). `roles`: each counted approver holds at least one
 * of them. When several rules' requirements add up, `role_sets` keeps each rule's list: an
 * approver must hold a role of every set (`roles` is then their union, for display).
 */
export interface ApprovalRequirement {
  quorum: number;
  roles: readonly string[];
  mfa: boolean;
  exclude_requester: boolean;
  role_sets?: readonly (readonly string[])[];
}

/** The role sets an approver must each hold one role of (none: any operator). */
export function roleSets(r: ApprovalRequirement): readonly (readonly string[])[] {
  return r.role_sets ?? (r.roles.length > 0 ? [r.roles] : []);
}

/** Whether someone holding `held` meets the role part of `r`. */
export function holdsRoles(r: ApprovalRequirement, held: readonly string[]): boolean {
  return roleSets(r).every((set) => set.some((x) => held.includes(x)));
}

/** One structured rule as the config holds it (already validated by the schema). */
export interface StructuredRuleInput {
  effect: "allow" | "deny" | "confirm";
  action?: readonly GovernedKind[];
  resource?: readonly string[];
  principal?: readonly string[];
  tenant?: readonly string[];
  environment?: readonly string[];
  time?: { days?: readonly string[]; from: string; to: string; tz: string };
  risk?: readonly Risk[];
  reversible?: boolean;
  approval?: ApprovalRequirement;
  reason?: string;
}

/** What the rules see of one action. */
export interface GovernedFacts {
  kind: GovernedKind;
  principal: string;
  tenant?: string;
  /** The target's environment label (absent: none). */
  environment?: string;
  risk: Risk;
  reversible: boolean;
  /** Epoch ms. */
  now: number;
  /** A command (exec, fleet: argv or one shell line) or a typed line (input). */
  command?: { argv: readonly string[] } | { line: string };
  /** Other resources as text (a path, `<server>:<host>:<port>`, a server name, a tool). */
  resources?: readonly string[];
  /** Decides a command against one compiled single-rule policy (the policy port's analyser). */
  judge?: (policies: readonly CompiledPolicy[]) => ("allow" | "deny" | "confirm")[];
}

export interface GovernedVerdict {
  action: "allow" | "deny" | "confirm";
  /** `rules[<i>]`, and the rule's own reason when it has one. */
  rule: { list: "rules"; pattern: string };
  reason: string;
  /** For confirm: the combined requirements of every matching confirm rule. */
  approval?: ApprovalRequirement;
}

interface CompiledRule {
  index: number;
  input: StructuredRuleInput;
  resources?: Int32Array[];
  /** For command actions: the rule as a one-list policy (its globs in its effect's list). */
  commandPolicies?: CompiledPolicy[];
  principal?: Int32Array[];
  tenant?: Int32Array[];
  environment?: Int32Array[];
  time?: {
    days: Set<string>;
    from: number;
    to: number;
    fmt: Intl.DateTimeFormat;
    cachedMinute: number;
    cachedAnswer: boolean;
  };
}

/** The pattern named when allow rules exist for the kind and none matched. */
export const NO_ALLOW_RULE = "rules[*]";

const COMMAND_KINDS = new Set<GovernedKind>(["exec", "input", "fleet"]);

/** A policy's structured rules, compiled once (a RangeError for a bad pattern). */
export class CompiledGovernance {
  readonly rules: readonly CompiledRule[];
  readonly defaultApproval: ApprovalRequirement | undefined;

  constructor(rules: readonly StructuredRuleInput[], defaultApproval?: ApprovalRequirement) {
    this.defaultApproval = defaultApproval;
    this.rules = rules.map((r, index) => {
      const c: CompiledRule = { index, input: r };
      if (r.resource) {
        c.resources = r.resource.map(compileResourceGlob);
        const onlyCommands = r.action !== undefined && r.action.every((k) => COMMAND_KINDS.has(k));
        if (r.action === undefined || r.action.some((k) => COMMAND_KINDS.has(k))) {
          // One policy with every glob of the rule in its effect's list: an allow rule covers a
          // line whose commands each match one of its globs.
          const globs = [...r.resource];
          c.commandPolicies = [compilePolicy({
            allow: r.effect === "allow" ? globs : [],
            deny: r.effect === "deny" ? globs : [],
            confirm: r.effect === "confirm" ? globs : [],
          })];
        }
        if (onlyCommands) delete c.resources;
      }
      if (r.principal) c.principal = r.principal.map(compileResourceGlob);
      if (r.tenant) c.tenant = r.tenant.map(compileResourceGlob);
      if (r.environment) c.environment = r.environment.map(compileResourceGlob);
      if (r.time) {
        c.time = {
          days: new Set(r.time.days ?? ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]),
          from: minutes(r.time.from),
          to: minutes(r.time.to),
          fmt: new Intl.DateTimeFormat("en-US", {
            timeZone: r.time.tz,
            weekday: "short",
            hour: "2-digit",
            minute: "2-digit",
            hourCycle: "h23",
          }),
          cachedMinute: -1,
          cachedAnswer: false,
        };
      }
      return c;
    });
  }

  get empty(): boolean {
    return this.rules.length === 0;
  }

  /**
   * Program names the deny and confirm rules on exec start with (literal first words,
   * basenames): the exec gate resolves them to files, so a renamed copy is matched by content.
   */
  programNames(): string[] {
    const out = new Set<string>();
    for (const c of this.rules) {
      const r = c.input;
      if (r.effect === "allow" || (r.action && !r.action.includes("exec"))) continue;
      for (const g of r.resource ?? []) {
        const first = g.trim().split(/\s+/)[0] ?? "";
        if (first === "" || /[*?\\]/.test(first)) continue;
        out.add(first.includes("/") ? first.slice(first.lastIndexOf("/") + 1) : first);
      }
    }
    return [...out];
  }

  readonly #unions = new Map<string, CompiledPolicy>();

  /** One allow list of every glob of `rules` (cached: at most 64 combinations are kept). */
  unionPolicy(rules: readonly CompiledRule[]): CompiledPolicy {
    const key = rules.map((r) => r.index).join(",");
    let p = this.#unions.get(key);
    if (!p) {
      p = compilePolicy({
        allow: rules.flatMap((r) => [...(r.input.resource ?? [])]),
        deny: [],
        confirm: [],
      });
      if (this.#unions.size >= 64) this.#unions.delete(this.#unions.keys().next().value!);
      this.#unions.set(key, p);
    }
    return p;
  }
}

function minutes(hhmm: string): number {
  return Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));
}

function anyGlob(globs: Int32Array[] | undefined, value: string | undefined): boolean {
  if (globs === undefined) return true;
  if (value === undefined) return false;
  return globs.some((g) => matchTokens(g, value));
}

function inWindow(t: NonNullable<CompiledRule["time"]>, now: number): boolean {
  // Windows are minute-grained, and formatting a time zone costs ~10 µs: one answer per minute.
  const minute = Math.floor(now / 60_000);
  if (t.cachedMinute === minute) return t.cachedAnswer;
  const answer = inWindowNow(t, now);
  t.cachedMinute = minute;
  t.cachedAnswer = answer;
  return answer;
}

function inWindowNow(t: NonNullable<CompiledRule["time"]>, now: number): boolean {
  const parts = t.fmt.formatToParts(new Date(now));
  const day = (parts.find((p) => p.type === "weekday")?.value ?? "").slice(0, 3).toLowerCase();
  const h = Number(parts.find((p) => p.type === "hour")?.value ?? "0");
  const m = Number(parts.find((p) => p.type === "minute")?.value ?? "0");
  const at = h * 60 + m;
  if (!t.days.has(day)) return false;
  // A window like 22:00-06:00 wraps past midnight; from = to is the whole day.
  if (t.from === t.to) return true;
  return t.from < t.to ? at >= t.from && at < t.to : at >= t.from || at < t.to;
}

/** Does the rule's resource part hold for these facts? */
function resourceMatches(c: CompiledRule, f: GovernedFacts): boolean {
  const r = c.input;
  if (r.resource === undefined) return true;
  if (COMMAND_KINDS.has(f.kind) && f.command && c.commandPolicies && f.judge) {
    // A rule "matches" a command when its own single-rule policy answers with its effect
    // (allow: every command it runs matches; deny/confirm: some command could match).
    // A deny or confirm rule also "matches" what the analyser cannot see through (it answers
    // deny for an opaque command under a policy with rules): fail closed.
    return f.judge(c.commandPolicies).some((a) =>
      a === r.effect || (r.effect !== "allow" && a === "deny")
    );
  }
  const texts = f.resources ?? [];
  if (!c.resources) return false;
  // Allow needs every resource covered; deny and confirm any one of them.
  const hit = (t: string) => c.resources!.some((g) => matchTokens(g, t));
  if (texts.length === 0) return false;
  return r.effect === "allow" ? texts.every(hit) : texts.some(hit);
}

function ruleMatches(c: CompiledRule, f: GovernedFacts): boolean {
  const r = c.input;
  if (r.action && !r.action.includes(f.kind)) return false;
  if (!anyGlob(c.principal, f.principal)) return false;
  if (!anyGlob(c.tenant, f.tenant)) return false;
  if (!anyGlob(c.environment, f.environment)) return false;
  if (r.risk && !r.risk.includes(f.risk)) return false;
  if (r.reversible !== undefined && r.reversible !== f.reversible) return false;
  if (c.time && !inWindow(c.time, f.now)) return false;
  return true;
}

/**
 * Do the allow rules whose other matchers hold cover the action together? Like a glob allow
 * list: a line is covered when each command it runs matches a glob of one of them; several
 * resources when each matches one. Returns the first rule of those that cover it.
 */
function coveredBy(
  g: CompiledGovernance,
  allows: readonly CompiledRule[],
  f: GovernedFacts,
): CompiledRule | undefined {
  const open = allows.find((c) => c.input.resource === undefined);
  if (open) return open;
  if (COMMAND_KINDS.has(f.kind) && f.command) {
    const withGlobs = allows.filter((c) => c.commandPolicies);
    if (withGlobs.length === 0 || !f.judge) return undefined;
    const union = g.unionPolicy(withGlobs);
    return f.judge([union])[0] === "allow" ? withGlobs[0] : undefined;
  }
  const texts = f.resources ?? [];
  if (texts.length === 0) return undefined;
  const globs = allows.flatMap((c) => c.resources ?? []);
  return texts.every((t) => globs.some((gl) => matchTokens(gl, t))) ? allows[0] : undefined;
}

/** How strict each answer is: a stricter one always wins. */
export const RANK = { allow: 0, confirm: 1, deny: 2 } as const;

/** Requirements that hold for both (the stricter of each). */
export function combineRequirements(
  a: ApprovalRequirement | undefined,
  b: ApprovalRequirement | undefined,
): ApprovalRequirement | undefined {
  if (!a) return b;
  if (!b) return a;
  // A set that holds another adds nothing (whoever holds a role of the smaller one holds one
  // of it), and the same set twice counts once.
  const sets = [...roleSets(a), ...roleSets(b)];
  const within = (s: readonly string[], t: readonly string[]) => s.every((x) => t.includes(x));
  const kept = sets.filter((s, i) =>
    !sets.some((t, j) => j !== i && within(t, s) && (!within(s, t) || j < i))
  );
  return {
    quorum: Math.max(a.quorum, b.quorum),
    roles: [...new Set(kept.flat())],
    mfa: a.mfa || b.mfa,
    exclude_requester: a.exclude_requester || b.exclude_requester,
    ...(kept.length > 1 ? { role_sets: kept.map((s) => [...s]) } : {}),
  };
}

/** Is `need` at most as strict as `have` (an approval under `have` satisfies `need`)? */
export function requirementCovered(
  need: ApprovalRequirement | undefined,
  have: ApprovalRequirement | undefined,
): boolean {
  const n = need ?? ONE_OPERATOR;
  const h = have ?? ONE_OPERATOR;
  // Every approver `have` admitted must be one `need` admits: each set `need` asks for is
  // implied by a set `have` asked for (holding one of H ⊆ N means holding one of N).
  const hs = roleSets(h);
  const rolesOk = roleSets(n).every((ns) => hs.some((s) => s.every((x) => ns.includes(x))));
  return n.quorum <= h.quorum && (!n.mfa || h.mfa) &&
    (!n.exclude_requester || h.exclude_requester) && rolesOk;
}

export const ONE_OPERATOR: ApprovalRequirement = Object.freeze({
  quorum: 1,
  roles: Object.freeze([]) as unknown as string[],
  mfa: false,
  exclude_requester: false,
});

/**
 * The structured rules' answer for one action, or undefined when none matches (the caller's
 * other layers decide then: the glob lists, and strict mode's default deny).
 */
export function decideGoverned(
  g: CompiledGovernance,
  given: GovernedFacts,
): GovernedVerdict | undefined {
  const candidates = g.rules.filter((c) => ruleMatches(c, given));
  // One analysis of the command for every rule that needs it: the judge is asked once, with
  // every rule's policy (and the allow rules' union), and rules read the answers back.
  let facts = given;
  if (COMMAND_KINDS.has(given.kind) && given.command && given.judge) {
    const needed: CompiledPolicy[] = [];
    for (const c of candidates) {
      if (c.input.effect !== "allow" && c.commandPolicies) needed.push(...c.commandPolicies);
    }
    const allowGlobs = candidates.filter((c) => c.input.effect === "allow" && c.commandPolicies);
    if (allowGlobs.length > 0) needed.push(g.unionPolicy(allowGlobs));
    const answers = new Map<CompiledPolicy, "allow" | "deny" | "confirm">();
    if (needed.length > 0) {
      given.judge(needed).forEach((a, i) => answers.set(needed[i]!, a));
    }
    facts = { ...given, judge: (ps) => ps.map((p) => answers.get(p) ?? "deny") };
  }
  let best: CompiledRule | undefined;
  let approval: ApprovalRequirement | undefined;
  const allows: CompiledRule[] = [];
  for (const c of candidates) {
    if (c.input.effect === "allow") {
      allows.push(c);
      continue;
    }
    if (!resourceMatches(c, facts)) continue;
    if (c.input.effect === "confirm") {
      approval = combineRequirements(
        approval,
        c.input.approval ?? g.defaultApproval ?? ONE_OPERATOR,
      );
    }
    if (!best || RANK[c.input.effect] > RANK[best.input.effect]) best = c;
  }
  if (!best && allows.length > 0) best = coveredBy(g, allows, facts);
  if (!best) {
    // Like a glob allow list: allow rules for this kind of action name what may happen, so
    // what none of them matches is denied.
    const allows = g.rules.filter((c) =>
      c.input.effect === "allow" && (!c.input.action || c.input.action.includes(facts.kind))
    );
    if (allows.length === 0) return undefined;
    return {
      action: "deny",
      rule: { list: "rules", pattern: NO_ALLOW_RULE },
      reason: `denied: no allow rule of the policy's rules matches this ${facts.kind}`,
    };
  }
  const r = best.input;
  const what = r.effect === "deny"
    ? "denied"
    : r.effect === "confirm"
    ? "confirmation required"
    : "allowed";
  return {
    action: r.effect,
    rule: { list: "rules", pattern: `rules[${best.index}]` },
    reason: `${what} by rules[${best.index}] for ${facts.kind}` +
      (r.reason ? `: ${r.reason}` : ""),
    ...(r.effect === "confirm" && approval ? { approval } : {}),
  };
}

/** How risky an action is when nothing else says: by kind, raised one level on production. */
export function classifyRisk(kind: GovernedKind, environment: string | undefined): Risk {
  const base: Record<GovernedKind, Risk> = {
    "file.read": "low",
    session: "low",
    exec: "medium",
    input: "medium",
    "file.write": "medium",
    forward: "medium",
    plugin: "medium",
    // An adapter's own prepare says better (its risk); this is the default when it does not.
    adapter: "medium",
    fleet: "high",
  };
  const r = base[kind];
  if (!isProduction(environment)) return r;
  const up = Math.min(3, RISK_ORDER[r] + 1);
  return (Object.keys(RISK_ORDER) as Risk[]).find((k) => RISK_ORDER[k] === up)!;
}

/** Whether an action of this kind can be undone by Termada or by closing what it opened. */
export function isReversible(kind: GovernedKind): boolean {
  return kind === "file.read" || kind === "session" || kind === "forward";
}

/** `prod` / `production` labels (any case) count as production (budgets, risk). */
export function isProduction(environment: string | undefined): boolean {
  return environment !== undefined && /^prod(uction)?$/i.test(environment);
}
