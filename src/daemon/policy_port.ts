/**
 * The gateway's view of the configured policies: each agent's rules (its own `policy:` or the
 * `default_policy`), compiled once at start, asked for argv, for lines typed into shells, and —
 * by the exec gate — for each program a session really runs.
 *
 * Identity: for the programs its deny and confirm rules name, each policy keeps the SHA-256 of
 * the file that name resolves to (PATH, then the usual system directories), so a copy or a link
 * under another name is matched by content. A multi-call binary (a name that resolves to a file
 * whose real name differs, like busybox applets) is matched by argv[0] only: its content is
 * shared by every applet.
 */
import { basename } from "node:path";
import { type BudgetEntry, type Config, policyFor } from "../config/mod.ts";
import type { BudgetRule } from "../governance/mod.ts";
import type { ExecFacts, PolicyPort, PolicyVerdict } from "../control/mod.ts";
import type { ExecFastPath } from "../sandbox/mod.ts";
import { execNames } from "../shared/mod.ts";
import {
  ALLOWED_AT_EXEC,
  classifyRisk,
  combineRequirements,
  CompiledGovernance,
  type CompiledPolicy,
  CompiledResourceRules,
  compilePolicy,
  decide,
  decideEach,
  decideExec,
  decideGoverned,
  decideLine,
  decideResource,
  execMayMatch,
  type ExecSubject,
  type GovernedFacts,
  type GovernedKind,
  type GovernedVerdict,
  isProduction,
  isReversible,
  NO_ALLOW_RULE,
  ONE_OPERATOR,
  RANK,
  type ResourceKind,
  type ResourceRules,
  type ResourceSubject,
  ruleProgramNames,
} from "../policy/mod.ts";
import { fileIdentity, programDirs } from "../sandbox/mod.ts";

/** sha256 → rule program names, for one policy. */
function identityIndex(
  names: readonly string[],
  pathVar: string | undefined,
): Map<string, Set<string>> {
  const index = new Map<string, Set<string>>();
  const dirs = programDirs(pathVar);
  for (const name of names) {
    for (const dir of dirs) {
      const file = `${dir}/${name}`;
      let real: string;
      try {
        real = Deno.realPathSync(file);
      } catch {
        continue;
      }
      if (basename(real) !== name) continue; // multi-call binary: by argv[0] only
      const id = fileIdentity(real);
      if (!id) continue;
      let set = index.get(id.sha256);
      if (!set) index.set(id.sha256, set = new Set());
      set.add(name);
    }
  }
  return index;
}

export interface PolicyPortOptions {
  /** Who is behind an agent (its principal and tenant), for structured rules. */
  whoIs?: (agent: string) => { principal: string; tenant?: string };
  /** Epoch ms (tests). */
  now?: () => number;
  /** PATH to find the programs rules name (default: the daemon's). */
  PATH?: string;
  /**
   * Whether an exec gate checks every program of a session (then a shell or interpreter running
   * a program file is allowed by the static layer: its programs are decided at exec).
   */
  execGate?: () => boolean;
}

/** The gateway's policy port, with the config it decides by swappable (`reload`). */
export interface ReloadablePolicyPort extends PolicyPort {
  /** Decides by `next` from now on (its compiled forms are built on first use). */
  reload(next: Config): void;
}

export function policyPort(
  initial: Config,
  env: PolicyPortOptions = { PATH: Deno.env.get("PATH") },
): ReloadablePolicyPort {
  let config = initial;
  const gated = () => env.execGate?.() ?? false;
  const now = env.now ?? (() => Date.now());
  const governance = new WeakMap<object, CompiledGovernance>();
  const governanceOf = (agent: string) => {
    const rules = policyFor(config, agent);
    let g = governance.get(rules);
    if (!g) {
      g = new CompiledGovernance(rules.rules ?? [], rules.approval);
      governance.set(rules, g);
    }
    return g;
  };
  const strict = () => config.security.identity_mode === "strict";
  /** No rules at all (glob lists and structured rules): today's open development policy. */
  const noRules = (agent: string) => rulesOf(agent).empty && governanceOf(agent).empty;
  const environmentOf = (target: string | undefined) =>
    target === undefined || target === "local"
      ? (config.security.environment ?? undefined)
      : config.servers.find((s) => s.name === target)?.environment;
  /** The structured rules' answer for one action (undefined: none applies). */
  const structuredVerdict = (
    agent: string,
    kind: GovernedKind,
    what: Pick<GovernedFacts, "command" | "resources">,
    target: string | undefined,
    judgeOpts?: { env?: Record<string, string>; execGate: boolean },
  ): GovernedVerdict | undefined => {
    const g = governanceOf(agent);
    if (g.empty) return undefined;
    const who = env.whoIs?.(agent) ?? { principal: `agent:${agent}` };
    const environment = environmentOf(target);
    return decideGoverned(g, {
      kind,
      principal: who.principal,
      ...(who.tenant ? { tenant: who.tenant } : {}),
      ...(environment ? { environment } : {}),
      risk: classifyRisk(kind, environment),
      reversible: isReversible(kind),
      now: now(),
      ...what,
      judge: (policies) => {
        const c = what.command;
        if (!c) return policies.map(() => "deny" as const);
        return decideEach("line" in c ? c : c.argv, policies, {
          ...(judgeOpts?.env ? { env: judgeOpts.env } : {}),
          execGate: judgeOpts?.execGate ?? false,
        }).map((x) => x.action);
      },
    });
  };
  /**
   * The structured rules and strict mode over what the glob lists decided: strictest wins; a
   * confirm carries the requirements of every matching confirm rule (the `confirm` list's own:
   * the policy's `approval`); in strict mode what no allow rule matched is denied.
   */
  const govern = (
    agent: string,
    kind: GovernedKind,
    legacy: PolicyVerdict,
    what: Pick<GovernedFacts, "command" | "resources">,
    target: string | undefined,
    judgeOpts?: { env?: Record<string, string>; execGate: boolean },
  ): PolicyVerdict => {
    const rules = policyFor(config, agent);
    let d: PolicyVerdict = legacy.action === "confirm"
      ? { ...legacy, approval: rules.approval ?? ONE_OPERATOR }
      : legacy;
    if (d.action === "deny") return d;
    const explicitAllow = legacy.rule?.list === "allow";
    const governed = structuredVerdict(agent, kind, what, target, judgeOpts);
    // A policy with structured rules has rules: what cannot be known is denied (fail closed),
    // as the glob lists do.
    if (!governanceOf(agent).empty && legacy.opaque) {
      return {
        action: "deny",
        reason: `denied: cannot tell what runs, and the policy has rules (${legacy.reason})`,
      };
    }
    if (governed) {
      if (RANK[governed.action] > RANK[d.action]) {
        d = { ...governed };
      } else if (governed.action === "confirm" && d.action === "confirm") {
        d = { ...d, approval: combineRequirements(d.approval, governed.approval) };
      }
      if (d.action === "deny") return d;
    }
    if (strict() && d.action === "allow" && !explicitAllow && governed?.action !== "allow") {
      return {
        action: "deny",
        reason: `denied: strict identity mode and no allow rule matches this ${kind}`,
      };
    }
    return d;
  };
  // Keyed by the rules object (one per configured policy), not by agent: dev-mode agent names
  // are unbounded, policies are not.
  const compiled = new WeakMap<object, ReturnType<typeof compilePolicy>>();
  const indexes = new WeakMap<object, Map<string, Set<string>>>();
  const rulesOf = (agent: string) => {
    const rules = policyFor(config, agent);
    let c = compiled.get(rules);
    if (!c) {
      c = compilePolicy(rules);
      compiled.set(rules, c);
    }
    return c;
  };
  const indexOf = (agent: string) => {
    const c = rulesOf(agent);
    let idx = indexes.get(c);
    if (!idx) {
      idx = identityIndex(
        [...new Set([...ruleProgramNames(c), ...governanceOf(agent).programNames()])],
        env.PATH,
      );
      indexes.set(c, idx);
    }
    return idx;
  };
  const namesOf = execNames;
  /**
   * What the exec gate asks for at every execve, per rules object (one per configured policy; a
   * reload brings new ones): looked up once per exec instead of one by one.
   */
  const execRules = new WeakMap<
    object,
    { c: CompiledPolicy; structured: boolean; idx: Map<string, Set<string>> }
  >();
  const execRulesOf = (agent: string) => {
    const rules = policyFor(config, agent);
    let r = execRules.get(rules);
    if (!r) {
      r = { c: rulesOf(agent), structured: structuredExecRules(agent), idx: indexOf(agent) };
      execRules.set(rules, r);
    }
    return r;
  };
  const resources = new WeakMap<object, Map<ResourceKind, CompiledResourceRules | undefined>>();
  const resourceRules = (agent: string, kind: ResourceKind) => {
    const rules = policyFor(config, agent);
    let m = resources.get(rules);
    if (!m) resources.set(rules, m = new Map());
    if (!m.has(kind)) {
      const r: ResourceRules | undefined = kind === "server"
        ? rules.servers
        : kind === "forward"
        ? rules.forwards
        : kind === "file.read"
        ? rules.files?.read
        : kind === "vault"
        ? (rules.vault ? { ...rules.vault, confirm: [] } : undefined)
        : kind === "plugin"
        ? rules.plugins
        : kind === "adapter"
        ? rules.adapters
        : rules.files?.write;
      m.set(kind, r ? new CompiledResourceRules(kind, r) : undefined);
    }
    return m.get(kind);
  };
  const fastPaths = new WeakMap<object, ExecFastPath | null>();
  const reloaded: (() => void)[] = [];
  return {
    reload: (next: Config) => {
      config = next;
      for (const fn of reloaded) fn();
    },
    onReload: (fn: () => void) => void reloaded.push(fn),
    execFastPath: (agent: string) => {
      const rules = policyFor(config, agent);
      let f = fastPaths.get(rules);
      if (f === undefined) {
        // decideAtExec's answers without a rule run: see src/sandbox/fast_path.ts.
        const { c, structured, idx } = execRulesOf(agent);
        f = structured ? null : c.deny.length + c.confirm.length === 0 ? { allowAll: true } : {
          prefixes: [...c.deny, ...c.confirm].map((g) => g.prefix),
          idx,
        };
        fastPaths.set(rules, f);
      }
      return f ?? undefined;
    },
    allBudgets: () =>
      Object.entries(config.policies).flatMap(([policy, rules]) =>
        (rules.budgets ?? []).map((b) => budgetRule(policy, b))
      ),
    budgetsFor: (agent: string, target: string) => {
      const rules = policyFor(config, agent);
      const a = Object.hasOwn(config.agents, agent) ? config.agents[agent] : undefined;
      const policy = a?.policy ?? config.default_policy;
      const who = env.whoIs?.(agent) ?? { principal: `agent:${agent}` };
      return {
        rules: (rules.budgets ?? []).map((b) => budgetRule(policy, b)),
        principal: who.principal,
        ...(who.tenant ? { tenant: who.tenant } : {}),
        production: isProduction(environmentOf(target)),
      };
    },
    decide: (agent, command, vars, opts) => {
      const kind: GovernedKind = opts?.kind ?? "exec";
      const execGate = opts?.remote ? false : gated();
      const legacy = decideLegacy(agent, command, vars, opts);
      return govern(agent, kind, legacy, { command: { argv: command } }, opts?.target, {
        ...(vars ? { env: vars } : {}),
        execGate,
      });
    },
    decideEnv: (agent, vars) =>
      remoteEnvVerdict(noRules(agent), vars) ?? {
        action: "allow",
        reason: "the environment holds no variable that makes programs run code",
      },
    decideResource: (agent: string, subject: ResourceSubject, _actionKind?: string) => {
      const legacy = decideResourceLegacy(agent, subject);
      if (subject.kind === "vault") return legacy;
      // A server is decided as a session target whatever uses it (a fleet run's command is
      // decided as `fleet` on each of its servers, in `decide`).
      const kind: GovernedKind = subject.kind === "server" ? "session" : subject.kind;
      const target = subject.kind === "server"
        ? subject.name
        : subject.kind === "forward"
        ? subject.server
        : subject.kind === "plugin" || subject.kind === "adapter"
        ? "local"
        : subject.target;
      const text = subject.kind === "server"
        ? subject.name
        : subject.kind === "forward"
        ? `${subject.server}:${subject.host}:${subject.port}`
        : subject.kind === "plugin"
        ? subject.tool
        : subject.kind === "adapter"
        ? `${subject.adapter}:${subject.resource}`
        : subject.path;
      return govern(agent, kind, legacy, { resources: [text] }, target);
    },
    decideLine: (agent, line, opts) => {
      const execGate = opts?.remote ? false : gated();
      const legacy = decideLine(line, rulesOf(agent), { execGate });
      return govern(agent, "input", legacy, { command: { line } }, opts?.target, { execGate });
    },
    autoAnswer: (agent, prompt) =>
      rulesOf(agent).autoAnswer.find((a) => a.prompt.test(prompt))?.answer,
    decideExec: (agent: string, exec: ExecFacts) => decideAtExec(agent, exec),
  };

  function decideLegacy(
    agent: string,
    command: readonly string[],
    vars: Record<string, string> | undefined,
    opts: { remote?: boolean; posix?: boolean } | undefined,
  ): PolicyVerdict {
    const c = rulesOf(agent);
    if (opts?.remote) {
      const refused = remoteEnvVerdict(noRules(agent), vars);
      if (refused) return refused;
    }
    // The line is parsed as bash; a POSIX sh (dash) reads $'…' and $"…" as other words.
    if (opts?.posix && !noRules(agent) && command.length === 1 && /\$['"]/.test(command[0]!)) {
      return {
        action: "deny",
        reason: "a line for a POSIX sh session holds $'…' or $\"…\", which sh reads differently " +
          "from bash: what would run is not what the policy read",
      };
    }
    return decide(command, c, { env: vars, execGate: opts?.remote ? false : gated() });
  }

  function decideResourceLegacy(agent: string, subject: ResourceSubject): PolicyVerdict {
    const openPolicy = noRules(agent);
    // Servers: the commands run there are still decided by the command rules. Forwards and
    // files go around the command rules, so a policy with rules and none for them fails closed.
    if (subject.kind === "vault") {
      return decideResource(subject, resourceRules(agent, "vault"), {
        action: "deny",
        reason: `the policy has no "vault" rules (secrets fail closed)`,
      });
    }
    // Structured rules that name this kind of action decide it (they deny what none of their
    // allow rules match); the lists' fail-closed fallback is for a kind nothing names.
    const kind = subject.kind === "server" ? "session" : subject.kind;
    // Only rules that name the kind explicitly count (as a `files` list would): a rule for
    // every action (no `action:`) does not open files or forwards.
    const named = governanceOf(agent).rules.some((r) => r.input.action?.includes(kind));
    const fallback = subject.kind === "server" || openPolicy || named
      ? { action: "allow" as const, reason: "the policy has no rules for it" }
      : {
        action: "deny" as const,
        reason: `the policy has command rules and no "${
          SECTION_OF[subject.kind]
        }" rules (fail closed)`,
      };
    return decideResource(subject, resourceRules(agent, subject.kind), fallback);
  }

  /** Structured deny and confirm rules that can hold at execve (on exec or on any action). */
  function structuredExecRules(agent: string): boolean {
    return governanceOf(agent).rules.some((r) =>
      r.input.effect !== "allow" && (!r.input.action || r.input.action.includes("exec"))
    );
  }

  /**
   * One program at its execve: the glob lists' deny and confirm rules, and the structured deny
   * and confirm rules on exec (allow rules and strict mode's default deny are the static
   * layer's), on every program it runs — the file under every name it goes by (its own,
   * argv[0]'s, and the names rules give programs with the same content), each `#!`
   * interpreter, and what the dynamic loader runs.
   */
  function decideAtExec(agent: string, exec: ExecFacts): PolicyVerdict {
    const { c, structured, idx } = execRulesOf(agent);
    if (c.deny.length + c.confirm.length === 0 && !structured) {
      return {
        action: "allow",
        reason: "allowed at exec: the policy has no deny or confirm rules",
      };
    }
    const subjects: ExecSubject[] = [{
      names: namesOf(idx, exec.path, exec.argv[0], exec.sha256),
      args: exec.argv.slice(1),
    }];
    // The common exec: one program, glob lists only, and no rule's literal start fits it. The
    // answer is decideExec's, without building what only a matching rule needs.
    if (
      !structured && !exec.chain && !exec.interpreter && !exec.loads && !exec.unknown &&
      !execMayMatch(subjects, c)
    ) return { action: "allow", reason: ALLOWED_AT_EXEC, verify: true };
    // Each `#!` level runs as `<interpreter> [arg] <the file below it> args…`.
    let below = exec.path;
    let rest = exec.argv.slice(1);
    for (const i of exec.chain ?? (exec.interpreter ? [exec.interpreter] : [])) {
      rest = [below, ...rest];
      subjects.push({
        names: namesOf(idx, i.path, undefined, i.sha256),
        args: [...(i.arg ? [i.arg] : []), ...rest],
      });
      below = i.path;
    }
    if (exec.loads?.unknown) {
      return {
        action: "deny",
        reason: "denied at exec: the dynamic loader runs a program its options hide",
        verify: true,
      };
    }
    if (exec.loads) {
      subjects.push({
        names: namesOf(idx, exec.loads.path, exec.loads.argv[0], exec.loads.sha256),
        args: exec.loads.argv.slice(1),
      });
    }
    let d: PolicyVerdict = decideExec(subjects, c);
    if (structured && d.action !== "deny") {
      for (const subject of subjects) {
        for (const name of subject.names) {
          const v = structuredVerdict(
            agent,
            "exec",
            {
              command: { argv: [name, ...subject.args] },
            },
            undefined,
            { execGate: true },
          );
          if (!v || v.action === "allow" || v.rule.pattern === NO_ALLOW_RULE) continue;
          if (RANK[v.action] > RANK[d.action]) d = { ...v, reason: `${v.reason} (at exec)` };
        }
      }
    }
    if (d.action === "allow" && exec.unknown && exec.path !== "") {
      // Nothing to identify it by (unreadable or gone): fail closed when rules exist. A path
      // that does not exist fails in the kernel anyway (ENOENT), denied or not.
      return {
        ...d,
        action: "deny",
        reason: `denied at exec: "${exec.path}" cannot be read to tell what it is`,
        verify: true,
      };
    }
    return { ...d, verify: true };
  }
}

/** The policy section that holds each resource kind's rules (in fail-closed reasons). */
const SECTION_OF: Record<ResourceKind, string> = {
  server: "servers",
  forward: "forwards",
  "file.read": "files.read",
  "file.write": "files.write",
  vault: "vault",
  plugin: "plugins",
  adapter: "adapters",
};

function budgetRule(policy: string, b: BudgetEntry): BudgetRule {
  return {
    policy,
    name: b.name,
    scope: b.scope,
    metric: b.metric,
    limit: b.limit,
    windowMs: b.window,
    ...(b.kinds ? { kinds: b.kinds } : {}),
    ...(b.match ? { match: b.match } : {}),
  };
}

/**
 * Variables known not to make a program run other code (locale, terminal, time zone, CI
 * markers). On a server no exec gate sees what a variable like `BASH_ENV`, `GIT_CONFIG_*`,
 * `PAGER` or `LD_PRELOAD` makes a program run: with rules, any other variable is refused.
 */
const INERT_ENV =
  /^(LANG|LANGUAGE|LC_[A-Z]+|TZ|TERM|COLORTERM|COLUMNS|LINES|NO_COLOR|FORCE_COLOR|CLICOLOR|CI|DEBIAN_FRONTEND|USER|LOGNAME|TERMADA_[A-Z_]+)$/;

function remoteEnvVerdict(
  openPolicy: boolean,
  vars: Record<string, string> | undefined,
): { action: "deny"; reason: string } | undefined {
  if (openPolicy || !vars) return undefined;
  const risky = Object.keys(vars).filter((k) => !INERT_ENV.test(k));
  if (risky.length === 0) return undefined;
  return {
    action: "deny",
    reason: `on a server no exec gate checks what ${risky.slice(0, 4).join(", ")} can make ` +
      "programs run, and the policy has rules: such variables are refused there",
  };
}
