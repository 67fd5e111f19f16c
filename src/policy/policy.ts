/**
 * The decision: allow, deny or confirm a command, from the simple commands `_analyze.ts` finds
 * and the rules of a policy. Strictest wins over every command found; what cannot be known is
 * denied whenever the policy has any rule (fail closed).
 */
import {
  type Analysis,
  analyzeArgv,
  analyzeEnv,
  analyzeLine,
  type FoundCommand,
} from "./_analyze.ts";
import { compileRegex, type LinearRegex, wordsStartWith } from "../shared/mod.ts";
import { type CompiledGlob, compileGlob, matchEvery, matchSome, mayMatchLiteral } from "./glob.ts";
import { literalWord, subjectOf } from "./_words.ts";
import type { ResourceRules } from "./resource.ts";

export type PolicyAction = "allow" | "deny" | "confirm";
export type RuleList = "allow" | "deny" | "confirm";

/** An answer the engine may type when a job's prompt matches (used by the engine, not here). */
export interface AutoAnswer {
  /** A regular expression (JavaScript syntax) matched against the prompt line. */
  prompt: string;
  answer: string;
}

/** One policy as the config holds it (`policies.<name>`). */
export interface PolicyRules {
  allow: readonly string[];
  deny: readonly string[];
  confirm: readonly string[];
  auto_answer?: readonly AutoAnswer[];
  /** Servers sessions and fleet runs may target (src/policy/resource.ts). */
  servers?: ResourceRules;
  /** Port forwards: `<server>:<remote host>:<remote port>`. */
  forwards?: ResourceRules;
  /** Files for file_read / file_write: absolute path globs, optionally `<server>:`-prefixed. */
  files?: { read?: ResourceRules; write?: ResourceRules };
}

export interface Decision {
  action: PolicyAction;
  /** The rule that decided, when one did. */
  rule?: { list: RuleList; pattern: string };
  /** For people: which rule, for which command, or why nothing could be known. */
  reason: string;
  /** Every simple command found, normalised (program basename, wrappers peeled, each level). */
  commands: string[][];
  /** `NAME=value` assignments that were dropped from those commands. */
  assignments: string[];
  /** Some of what runs cannot be known before it runs. */
  opaque: boolean;
}

/** A policy with its patterns compiled; build it once per config and reuse it. */
export class CompiledPolicy {
  readonly rules: PolicyRules;
  readonly allow: readonly CompiledGlob[];
  readonly deny: readonly CompiledGlob[];
  readonly confirm: readonly CompiledGlob[];
  readonly autoAnswer: readonly { prompt: LinearRegex; answer: string }[];

  constructor(rules: PolicyRules) {
    this.rules = rules;
    this.allow = rules.allow.map(compileGlob);
    this.deny = rules.deny.map(compileGlob);
    this.confirm = rules.confirm.map(compileGlob);
    this.autoAnswer = (rules.auto_answer ?? []).map((a) => ({
      // Matched against prompt text an agent's program prints: linear time, never backtracking.
      prompt: compileRegex(a.prompt, { label: "auto_answer.prompt" }),
      answer: a.answer,
    }));
  }

  get empty(): boolean {
    return this.allow.length + this.deny.length + this.confirm.length === 0;
  }
}

/** Compiles a policy's patterns (a RangeError or SyntaxError for a bad pattern or regex). */
export function compilePolicy(rules: PolicyRules): CompiledPolicy {
  return new CompiledPolicy(rules);
}

const compiled = new WeakMap<PolicyRules, CompiledPolicy>();

function compiledFor(policy: PolicyRules | CompiledPolicy): CompiledPolicy {
  if (policy instanceof CompiledPolicy) return policy;
  let c = compiled.get(policy);
  if (c === undefined) {
    c = new CompiledPolicy(policy);
    compiled.set(policy, c);
  }
  return c;
}

export interface DecideOptions {
  /**
   * An exec gate checks every program this command starts (src/sandbox): a shell or interpreter
   * running a program file is then allowed here (what it runs is decided at each exec);
   * without one, such a file is opaque and denied by a policy with rules.
   */
  execGate?: boolean;
  /**
   * Environment the engine sets for this command (`exec_run`'s `env`): listed in the decision's
   * assignments, and opaque where it makes the shell or the loader run code (`LD_PRELOAD`, …).
   */
  env?: Readonly<Record<string, string>>;
}

/**
 * Decides a command as an agent sent it: one word is a shell command line, several words are an
 * exact argv (see `src/shell/quote.ts`).
 */
export function decide(
  command: readonly string[],
  policy: PolicyRules | CompiledPolicy,
  options: DecideOptions = {},
): Decision {
  const analysis = command.length === 1 ? analyzeLine(command[0]!) : analyzeArgv(command);
  return judge(gateFiles(withEnv(analysis, options.env), options), compiledFor(policy));
}

/**
 * Decides one command against several policies with one analysis (structured rules: one
 * single-rule policy each). `line`: a typed line rather than an argv/command.
 */
export function decideEach(
  command: readonly string[] | { line: string },
  policies: readonly (PolicyRules | CompiledPolicy)[],
  options: DecideOptions = {},
): Decision[] {
  const analysis = "line" in command
    ? analyzeLine(command.line)
    : command.length === 1
    ? analyzeLine(command[0]!)
    : analyzeArgv(command);
  const a = gateFiles(withEnv(analysis, options.env), options);
  return policies.map((p) => judge(a, compiledFor(p)));
}

function withEnv(analysis: Analysis, env: DecideOptions["env"]): Analysis {
  if (env === undefined || Object.keys(env).length === 0) return analysis;
  analyzeEnv(analysis, env);
  const words = Object.entries(env).map(([k, v]) => literalWord(`${k}=${v}`));
  for (const c of analysis.commands) c.assignments.unshift(...words);
  return analysis;
}

/** Decides a line typed into an interactive shell (exec_write to a shell at its prompt). */
export function decideLine(
  line: string,
  policy: PolicyRules | CompiledPolicy,
  options: DecideOptions = {},
): Decision {
  return judge(gateFiles(withEnv(analyzeLine(line), options.env), options), compiledFor(policy));
}

/** Program files count as opaque unless an exec gate will check what they run. */
function gateFiles(analysis: Analysis, options: DecideOptions): Analysis {
  if (options.execGate || analysis.programFiles.length === 0) return analysis;
  for (const r of analysis.programFiles) {
    if (analysis.opaque.length < 8) analysis.opaque.push(`${r} (no exec gate checks what it runs)`);
  }
  return analysis;
}

function judge(analysis: Analysis, policy: CompiledPolicy): Decision {
  const found = analysis.commands;
  const base = {
    commands: found.map((c) => c.argv.map((w) => w.display)),
    assignments: found.flatMap((c) => c.assignments.map((w) => w.display)),
    opaque: analysis.opaque.length > 0,
  };
  const subjects = found.map((c) => subjectOf(c.argv));

  for (const [list, globs] of [["deny", policy.deny], ["confirm", policy.confirm]] as const) {
    if (list === "confirm" && base.opaque && !policy.empty) break;
    for (let i = 0; i < found.length; i++) {
      const glob = globs.find((g) => matchSome(g, subjects[i]!));
      if (glob === undefined) continue;
      const maybe = matchEvery(glob, subjects[i]!)
        ? ""
        : " (a value known only at run time could match)";
      const what = list === "deny" ? "denied" : "confirmation required";
      return {
        action: list,
        rule: { list, pattern: glob.source },
        reason: `${what} by rule "${glob.source}" (${list}) for "${shown(found[i]!)}"${maybe}`,
        ...base,
      };
    }
  }

  if (base.opaque) {
    const why = analysis.opaque.join("; ");
    if (policy.empty) {
      return {
        action: "allow",
        reason: `allowed: the policy has no rules (note: ${why})`,
        ...base,
      };
    }
    return {
      action: "deny",
      reason: `denied: cannot tell what runs (${why}); the policy denies what it cannot check`,
      ...base,
    };
  }

  if (policy.allow.length === 0) {
    const reason = policy.empty
      ? "allowed: the policy has no rules"
      : "allowed: no deny or confirm rule matches and the allow list is empty";
    return { action: "allow", reason, ...base };
  }

  let first: CompiledGlob | undefined;
  for (let i = 0; i < found.length; i++) {
    const glob = policy.allow.find((g) => matchEvery(g, subjects[i]!));
    if (glob === undefined) {
      const action: PolicyAction = policy.confirm.length > 0 ? "confirm" : "deny";
      const what = action === "deny" ? "denied" : "confirmation required";
      return {
        action,
        reason: `${what}: "${shown(found[i]!)}" matches no allow rule`,
        ...base,
      };
    }
    first ??= glob;
  }
  if (first === undefined) return { action: "allow", reason: "allowed: nothing to run", ...base };
  const reason = found.length === 1
    ? `allowed by rule "${first.source}" (allow) for "${shown(found[0]!)}"`
    : `allowed: each of the ${found.length} commands matches an allow rule`;
  return { action: "allow", rule: { list: "allow", pattern: first.source }, reason, ...base };
}

function shown(c: FoundCommand): string {
  const text = c.argv.map((w) => w.display).join(" ");
  return text.length > 200 ? text.slice(0, 199) + "…" : text;
}

/** One program an `execve` will run, as the exec gate saw it. */
export interface ExecSubject {
  /** Every name it goes by: the file's basename, argv[0]'s, and names known by its content. */
  names: readonly string[];
  /** Its arguments (argv without argv[0]). */
  args: readonly string[];
}

/**
 * Decides one `execve` at run time (the exec gate). The argv is exact — no holes, nothing
 * opaque: whatever this program runs next comes back through the gate on its own exec. Only deny
 * and confirm rules apply here (allow lists are the static layer's: they name what an agent may
 * ask for, not every helper a tool execs). Strictest wins over every subject and name.
 */
export function decideExec(
  subjects: readonly ExecSubject[],
  policy: PolicyRules | CompiledPolicy,
): Decision {
  const p = compiledFor(policy);
  const commands: string[][] = [];
  for (const s of subjects) {
    for (const n of s.names) commands.push([n, ...s.args]);
  }
  const base = { commands, assignments: [], opaque: false };
  // Every exec comes here (the daemon's thread, per execve): most match no rule's literal start,
  // and then no rule is run at all.
  if (!execMayMatch(subjects, p)) {
    return { action: "allow", reason: ALLOWED_AT_EXEC, ...base };
  }
  for (const [list, globs] of [["deny", p.deny], ["confirm", p.confirm]] as const) {
    if (globs.length === 0) continue;
    for (const words of commands) {
      const text = words.join(" ");
      let subject: Int32Array | undefined;
      const glob = globs.find((g) =>
        mayMatchLiteral(g, text) && matchSome(g, subject ??= subjectOf(words.map(literalWord)))
      );
      if (glob === undefined) continue;
      const what = list === "deny" ? "denied" : "confirmation required";
      return {
        action: list,
        rule: { list, pattern: glob.source },
        reason: `${what} at exec by rule "${glob.source}" (${list}) for "${
          text.length > 200 ? text.slice(0, 199) + "…" : text
        }"`,
        ...base,
      };
    }
  }
  return { action: "allow", reason: ALLOWED_AT_EXEC, ...base };
}

/** What `decideExec` says when no rule matches. */
export const ALLOWED_AT_EXEC = "allowed at exec: no deny or confirm rule matches";

/**
 * False when no deny or confirm rule can match any name of any subject (`decideExec` then
 * allows), judged by the rules' literal starts alone, allocating nothing. True: ask decideExec.
 */
export function execMayMatch(
  subjects: readonly ExecSubject[],
  policy: PolicyRules | CompiledPolicy,
): boolean {
  const p = compiledFor(policy);
  for (const globs of [p.deny, p.confirm]) {
    for (const g of globs) {
      for (const s of subjects) {
        for (const name of s.names) {
          if (wordsStartWith(name, s.args, g.prefix)) return true;
        }
      }
    }
  }
  return false;
}

/**
 * Program names the deny and confirm rules start with (literal first words, basenames): the
 * exec gate resolves them to files so a copy or link under another name is still recognised.
 */
export function ruleProgramNames(policy: PolicyRules | CompiledPolicy): string[] {
  const p = compiledFor(policy);
  const out = new Set<string>();
  for (const g of [...p.deny, ...p.confirm]) {
    const first = g.source.trim().split(/\s+/)[0] ?? "";
    if (first === "" || /[*?\\]/.test(first)) continue;
    out.add(first.includes("/") ? first.slice(first.lastIndexOf("/") + 1) : first);
  }
  return [...out];
}
