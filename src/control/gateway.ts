/**
 * The admission gateway: the one gate every side effect passes, in this order — kill-switch
 * barrier → audit health → policy decision → (confirm: the approval book parks it) → intent
 * record on disk → it runs. Refusals are recorded too. The gateway decides; the trail writes
 * the records; the engine acts only after the gateway said so. Later side-effect paths (files,
 * fleet, forwards, plugins) pass the same gate.
 */
import type { DecisionRecord } from "../audit/mod.ts";
import type { ExecAnswer, ExecContext, ExecEvent, ExecFastPath, Job } from "../engine/mod.ts";
import { type Clock, logger, newId, systemClock, TermadaError } from "../shared/mod.ts";
import type { BudgetLedger, BudgetOutcome, BudgetRule } from "../governance/mod.ts";
import type { ResourceSubject } from "../policy/mod.ts";
import {
  type ApprovalRequirement,
  combineRequirements,
  describeSubject,
  ONE_OPERATOR,
  RANK,
  requirementCovered,
} from "../policy/mod.ts";
import { APPROVED_WITH } from "./_approved.ts";

const log = logger("control");
import type { Recorder } from "./recorder.ts";
import type { Trail } from "./trail.ts";

/** What the policy says (src/policy's Decision satisfies it). */
export interface PolicyVerdict {
  action: "allow" | "deny" | "confirm";
  /** At exec: the answer depended on what the program is (rules exist): verify it after exec. */
  verify?: boolean;
  reason: string;
  rule?: { list: string; pattern: string };
  opaque?: boolean;
  /** For confirm: who must approve (default one operator). */
  approval?: ApprovalRequirement;
}

/** One program at its execve, as the exec gate read it from the kernel (for the policy). */
export interface ExecFacts {
  /** The path it was exec'd by ("" for fexecve of an fd). */
  path: string;
  argv: readonly string[];
  /** SHA-256 of the file's content, when it could be read. */
  sha256?: string;
  /** A `#!` script's interpreter (the last of `chain`). */
  interpreter?: { path: string; arg?: string; sha256?: string };
  /** Every `#!` level, outermost first. */
  chain?: { path: string; arg?: string; sha256?: string }[];
  /** The program the dynamic loader runs, when the loader itself is exec'd. */
  loads?: { path: string; argv: readonly string[]; sha256?: string; unknown?: boolean };
  /** The file could not be identified (unreadable, vanished): its content is unknown. */
  unknown?: boolean;
}

export interface PolicyPort {
  /** Decides one program at its execve (the exec gate); absent: every exec is allowed. */
  decideExec?(agent: string, exec: ExecFacts): PolicyVerdict;
  /**
   * What the exec gate's own thread may decide alone for `agent` (src/sandbox/fast_path.ts): it
   * must give decideExec's answers. Undefined: every exec is asked here. Valid until `onReload`.
   */
  execFastPath?(agent: string): ExecFastPath | undefined;
  /** Calls `fn` whenever the rules change (a policy reload): exec fast paths are stale then. */
  onReload?(fn: () => void): void;
  /** The policy's standing answer for a prompt (`auto_answer`), if any. */
  autoAnswer?(agent: string, prompt: string): string | undefined;
  /** `env`: variables the command gets (LD_PRELOAD and friends are part of what runs). */
  /** `remote`: it runs on a server, where no exec gate checks its programs. */
  decide(
    agent: string,
    command: readonly string[],
    env?: Record<string, string>,
    opts?: { remote?: boolean; posix?: boolean; target?: string; kind?: "exec" | "fleet" },
  ): PolicyVerdict;
  /** Decides the environment a session on a server gets (no exec gate there). */
  decideEnv?(agent: string, env: Record<string, string>): PolicyVerdict;
  /**
   * Decides a server, a forward or a file (policy `servers`, `forwards`, `files`); `kind`: the
   * action it is part of (a server of a fleet run is decided as `fleet`).
   */
  decideResource?(agent: string, subject: ResourceSubject, kind?: ActionKind): PolicyVerdict;
  decideLine(
    agent: string,
    line: string,
    opts?: { remote?: boolean; target?: string },
  ): PolicyVerdict;
  /** The budgets the agent's policy holds, and who and where for them. */
  budgetsFor?(agent: string, target: string): BudgetFacts;
  /** Every budget of every policy (status views). */
  allBudgets?(): BudgetRule[];
}

/** What budgets need to know of an action beyond its kind. */
export interface BudgetFacts {
  rules: readonly BudgetRule[];
  principal: string;
  tenant?: string;
  /** The target is production (its environment label). */
  production: boolean;
}

export type ExecVerdict =
  | { verdict: "run" }
  | {
    verdict: "confirm";
    decision: DecisionRecord;
    rule?: string;
    reason: string;
    approval?: ApprovalRequirement;
    /** The policy as it is when the approved job is about to run. */
    recheck: () => PolicyVerdict;
    /** Admits it (budgets, the durable action row) once approved; throws to refuse. */
    admit: () => void;
  };

export interface GatewayOptions {
  policy: PolicyPort;
  /** Budgets and every admitted action's durable intent and outcome (the `actions` table). */
  ledger?: BudgetLedger;
  trail: Trail;
  recorder: Recorder;
  clock?: Clock;
}

/** Kinds of action that are not a job but pass the same gate. */
export type ActionKind =
  | "session"
  | "fleet"
  | "forward"
  | "file.read"
  | "file.write"
  | "plugin"
  | "adapter";

/** An action an agent asks for: what it touches (each decided) and what it runs, if anything. */
export interface ActionRequest {
  owner: string;
  kind: ActionKind;
  subjects: readonly ResourceSubject[];
  /** A command it runs (fleet): decided by the command rules too (no exec gate remotely). */
  command?: readonly string[];
  /** What people see in the approval queue and the audit (argv, path, forward spec). */
  summary: readonly string[];
  sessionId?: string;
  /** Refused whatever the policy says (e.g. a path of Termada's own control plane): why. */
  forbidden?: string;
  /** Environment it gives programs on a server (decided: no exec gate sees its effect). */
  env?: Record<string, string>;
  /** What it is expected to cost (an adapter's estimate), for `cost` budgets. */
  estimate?: { cost?: number };
}

/** An admitted action: its id (act_…) and the decision, its intent record on disk. */
export interface AdmittedAction {
  id: string;
  kind: ActionKind;
  owner: string;
  decision: DecisionRecord;
  approvalId?: string;
}

/** How the gateway asks a person (the approval book's askAction). */
export type AskAction = (
  action: { id: string; owner: string; kind: string; sessionId?: string; summary: string[] },
  confirm: {
    decision: DecisionRecord;
    rule?: string;
    reason: string;
    approval?: ApprovalRequirement;
    recheck?: () => PolicyVerdict;
  },
) => Promise<{ approved: boolean; approvalId: string; reason: string }>;

/** The strictest of several verdicts; confirms add up their approval requirements. */
export function strictest(verdicts: readonly PolicyVerdict[]): PolicyVerdict {
  // The first decides among equals; a stricter one always wins.
  let d: PolicyVerdict = verdicts[0] ?? { action: "allow", reason: "nothing to decide" };
  let approval: ApprovalRequirement | undefined;
  for (const v of verdicts) {
    if (RANK[v.action] > RANK[d.action]) d = v;
    if (v.action === "confirm") approval = combineRequirements(approval, v.approval);
  }
  return d.action === "confirm" && approval ? { ...d, approval } : d;
}

/** A line an agent types into a program that reads commands (a shell, an interpreter). */
export interface InputAdmission {
  job: Job;
  line: string;
  /** Command name of the reading process (bash, python3…). */
  reader: string;
  /** The agent marked it secret (exec_write `secret`): the audit must not keep the text. */
  secret: boolean;
  /**
   * The terminal does not echo (a kernel fact: a password prompt of su, ssh, sudo…): the line
   * is not a command. An agent's `secret` flag alone never skips the policy.
   */
  echoOff: boolean;
  /** Typed into a program on a server (no exec gate checks what it runs). */
  remote?: boolean;
  /** Typed by a person on exec_write {human}'s one-time page (a password prompt only). */
  human?: boolean;
  /** Where the program runs (`local` or a server's name), for structured rules. */
  target?: string;
  /**
   * The value of this vault entry is typed (its use was decided by the vault rules): the text
   * is the operator's, not the agent's, so no command rule applies; the audit names the entry.
   */
  vault?: string;
}

const STOPPED_HINT = (until: number) =>
  `New commands are refused until ${new Date(until).toISOString()}`;

export class Gateway {
  readonly #o: GatewayOptions;
  readonly #clock: Clock;
  #barrierUntil = 0;
  #onBarrier: ((up: boolean) => void) | undefined;
  /** Jobs admitted with an action row, until their end is settled. */
  readonly #admittedJobs = new Set<string>();

  constructor(options: GatewayOptions) {
    this.#o = options;
    this.#clock = options.clock ?? systemClock;
  }

  /** The gate for a reserved job: throws to refuse; "confirm" hands it to the approval book. */
  async admitExec(
    job: Job,
    env?: Record<string, string>,
    where: { remote?: boolean; posix?: boolean; target?: string } = {},
  ): Promise<ExecVerdict> {
    const trail = this.#o.trail;
    if (this.stopped) {
      trail.refused(job, "stop-all barrier");
      throw this.#stoppedError();
    }
    this.#o.recorder.assertHealthy();
    const d = this.#o.policy.decide(job.owner, job.command, env, where);
    const decision = decisionRecord(d);
    if (d.action === "deny") {
      trail.denied(job, decision);
      throw new TermadaError("DENIED_BY_POLICY", d.reason, {
        retriable: false,
        hint: "Choose a command the policy allows, or ask the operator to change the policy",
        details: d.rule ? { rule: d.rule.pattern } : undefined,
      });
    }
    if (d.action === "confirm") {
      return {
        verdict: "confirm",
        decision,
        reason: d.reason,
        rule: d.rule?.pattern,
        ...(d.approval ? { approval: d.approval } : {}),
        recheck: () => this.#o.policy.decide(job.owner, job.command, env, where),
        admit: () => this.#admitJob(job, where.target ?? "local"),
      };
    }
    try {
      this.#admitJob(job, where.target ?? "local");
    } catch (err) {
      trail.refused(job, err instanceof Error ? err.message : String(err));
      throw err;
    }
    try {
      await trail.requested(job, decision);
    } catch (err) {
      this.#admittedJobs.delete(job.id);
      this.#release(job.id, "its intent could not be recorded");
      throw err;
    }
    return { verdict: "run" };
  }

  /** The gate for a line typed into a program that runs what it reads. */
  async admitInput(req: InputAdmission): Promise<void> {
    const trail = this.#o.trail;
    const shown = req.secret ? "[secret]" : req.line;
    if (this.stopped) {
      trail.inputRefused(req.job, shown, req.reader, "stop-all barrier");
      throw this.#stoppedError();
    }
    if (req.vault !== undefined) {
      this.#admitInput(req, `[vault:${req.vault}]`);
      await trail.inputWritten(req.job, `[vault:${req.vault}]`, req.reader);
      return;
    }
    if (req.human) {
      // A person typed it on the one-time page, at a prompt that does not echo (checked).
      this.#admitInput(req, "[typed by a person]");
      await trail.inputWritten(req.job, "[typed by a person]", req.reader);
      return;
    }
    if (req.echoOff) {
      // The terminal does not echo: a password for su/ssh/sudo, not a command. Only the fact
      // is recorded, never the text.
      this.#admitInput(req, "[not echoed]");
      await trail.inputWritten(req.job, "[not echoed]", req.reader);
      return;
    }
    const d = this.#o.policy.decideLine(req.job.owner, req.line, {
      remote: req.remote,
      ...(req.target ? { target: req.target } : {}),
    });
    // For a secret line the reason (which quotes it) stays out of the audit log.
    const decision: DecisionRecord = {
      action: d.action,
      ...(req.secret ? {} : { reason: d.reason }),
      ...(d.rule ? { rule: d.rule } : {}),
    };
    if (d.action !== "allow") {
      trail.inputDenied(req.job, shown, req.reader, decision);
      throw new TermadaError(
        "DENIED_BY_POLICY",
        d.action === "confirm"
          ? `${d.reason}: a line typed into ${req.reader} cannot wait for approval`
          : d.reason,
        {
          retriable: false,
          hint: d.action === "confirm"
            ? "Run it as a command with exec_run, so an operator can approve it"
            : "Choose input the policy allows",
        },
      );
    }
    this.#admitInput(req, shown);
    await trail.inputWritten(req.job, shown, req.reader, decision);
  }

  /** A line typed to a program that does not run what it reads: counted by budgets only. */
  countInput(job: Job, shown: string): void {
    this.#admitInput({
      job,
      line: shown,
      reader: job.inputReader ?? "a program",
      secret: false,
      echoOff: false,
    }, shown);
  }

  /**
   * A typed line is an action too: budgets count it, and it has an action row (settled at
   * once: typing it is the whole effect). BUDGET_EXCEEDED refuses it, recorded.
   */
  #admitInput(req: InputAdmission, shown: string): void {
    if (!this.#o.ledger) return;
    const id = newId("act");
    try {
      this.#admitBudget(req.job.owner, id, "input", req.target ?? "local", [shown]);
    } catch (err) {
      this.#o.trail.inputRefused(
        req.job,
        shown,
        req.reader,
        err instanceof Error ? err.message : String(err),
      );
      throw err;
    }
    this.#settle(id, { ok: true });
  }

  /**
   * The gate at execve, for every process of every session (the kernel asks; see
   * src/sandbox): the same policy as for commands, on the program that really runs — its file's
   * names and content identity, exact argv, a script's interpreter. Deny → EACCES, recorded and
   * named in the job's result; confirm → the program waits in execve for an operator (once);
   * under the stop-all barrier nothing new starts.
   */
  admitProgram(
    ev: ExecEvent,
    ctx: ExecContext,
    ask: (job: Job, confirm: ProgramConfirm) => Promise<boolean>,
  ): ExecAnswer | Promise<ExecAnswer> {
    // The job running in the session now, if this process is one of its own (started while it
    // ran): a leftover of an earlier job neither borrows this job's approval nor files requests
    // under it. Looked up only when the answer is not a plain allow.
    let owner: Job | undefined | null = null;
    const jobOf = (): Job | undefined => {
      if (owner !== null) return owner;
      const current = ctx.job();
      owner = current && (!current.processes ||
          current.processes.list().some((p) => p.pid === ev.pid))
        ? current
        : undefined;
      return owner;
    };
    const lvl = (i: { path: string; arg?: string; identity?: { sha256: string } }) => ({
      path: i.path,
      ...(i.arg ? { arg: i.arg } : {}),
      ...(i.identity ? { sha256: i.identity.sha256 } : {}),
    });
    const facts: ExecFacts = {
      path: ev.path,
      argv: ev.argv,
      ...(ev.identity ? { sha256: ev.identity.sha256 } : {}),
      ...(ev.unreadable ? { unknown: true } : {}),
      ...(ev.chain ? { chain: ev.chain.map(lvl) } : {}),
      ...(ev.loads
        ? {
          loads: {
            path: ev.loads.path,
            argv: ev.loads.argv,
            ...(ev.loads.unknown ? { unknown: true } : {}),
            ...(ev.loads.identity ? { sha256: ev.loads.identity.sha256 } : {}),
          },
        }
        : {}),
      ...(ev.interpreter
        ? {
          interpreter: {
            path: ev.interpreter.path,
            ...(ev.interpreter.arg ? { arg: ev.interpreter.arg } : {}),
            ...(ev.interpreter.identity ? { sha256: ev.interpreter.identity.sha256 } : {}),
          },
        }
        : {}),
    };
    let d: PolicyVerdict;
    if (this.stopped) {
      d = { action: "deny", reason: "stop-all barrier: nothing new starts" };
    } else {
      // A barrier that ran out lifts here too (the gate thread asks while one is up).
      if (this.#barrierUntil !== 0) this.lowerBarrier();
      d = this.#o.policy.decideExec?.(ctx.owner, facts) ??
        { action: "allow", reason: "no exec policy" };
      if (d.action === "allow" && ev.truncated && d.verify) {
        d = { action: "deny", reason: "argv too long to check at exec (fail closed)" };
      }
    }
    if (d.action === "allow") return { allow: true, verify: d.verify === true };
    // An operator already approved this job's command: its confirm covers what it runs.
    const job = jobOf();
    if (
      d.action === "confirm" && job?.approved &&
      requirementCovered(d.approval, APPROVED_WITH.get(job) ?? ONE_OPERATOR)
    ) return { allow: true, verify: true };
    const program = shortArgv(ev.argv);
    const blocked = (reason: string): ExecAnswer => {
      const decision = decisionRecord({ ...d, action: "deny", reason });
      this.#o.trail.execDenied(ctx.owner, {
        ...(job ? { job_id: job.id } : {}),
        session_id: ctx.sessionId,
      }, {
        pid: ev.pid,
        path: ev.path,
        argv: program,
        ...(facts.sha256 ? { sha256: facts.sha256 } : {}),
        ...(facts.interpreter ? { interpreter: facts.interpreter.path } : {}),
      }, decision);
      job?.noteBlocked({
        program: ev.argv[0] ?? ev.path,
        path: ev.path,
        argv: program,
        ...(d.rule ? { rule: d.rule.pattern } : {}),
        reason,
      });
      return { allow: false };
    };
    if (d.action === "deny") return blocked(d.reason);
    if (!job) return blocked(`${d.reason}; no job of the agent is running here to ask for`);
    const decideNow = () =>
      this.#o.policy.decideExec?.(ctx.owner, facts) ?? { action: "allow" as const, reason: "" };
    return ask(job, {
      pid: ev.pid,
      path: ev.path,
      argv: program,
      decision: decisionRecord(d),
      ...(d.rule ? { rule: d.rule.pattern } : {}),
      reason: d.reason,
      ...(d.approval ? { approval: d.approval } : {}),
      recheck: decideNow,
    }).then((ok) => ok ? { allow: true, verify: true } : blocked(`${d.reason}: not approved`));
  }

  /**
   * An exec the gate allowed ran something else by the time the kernel did it (a second thread
   * rewrote its path or argv, or the file was swapped): the gate killed it before its first
   * instruction. Recorded as a denial and named in the job's result.
   */
  programRaced(ev: ExecEvent, ctx: ExecContext, found: string): void {
    const job = ctx.job();
    const reason = `killed at exec: ${found} (a race against the exec gate)`;
    this.#o.trail.execDenied(
      ctx.owner,
      {
        ...(job ? { job_id: job.id } : {}),
        session_id: ctx.sessionId,
      },
      { pid: ev.pid, path: ev.path, argv: shortArgv(ev.argv) },
      { action: "deny", reason },
    );
    job?.noteBlocked({
      program: ev.argv[0] ?? ev.path,
      path: ev.path,
      argv: shortArgv(ev.argv),
      reason,
    });
  }

  /**
   * The gate for an action that is not a job: barrier → audit health → one decision over every
   * resource it touches and the command it runs (strictest wins) → confirm: a person decides,
   * the call waits → intent record on disk. Throws to refuse (recorded). The caller acts only
   * after this resolves and reports the outcome with `actionDone`.
   */
  async admitAction(req: ActionRequest, ask: AskAction): Promise<AdmittedAction> {
    const rec = this.#o.recorder;
    const id = newId("act");
    const base = {
      action_id: id,
      kind: req.kind,
      ...(req.sessionId ? { session_id: req.sessionId } : {}),
      // Whole: what a person approves must be what runs (bounded by the tools' input limits).
      summary: [...req.summary],
      resources: req.subjects.map(describeSubject),
    };
    const actor = { kind: "agent" as const, id: req.owner };
    if (this.stopped) {
      rec.record(actor, "action.refused", { ...base, reason: "stop-all barrier" });
      throw this.#stoppedError();
    }
    rec.assertHealthy();
    const decideNow = () => this.#decideAction(req);
    const d = decideNow();
    let decision = decisionRecord(d);
    if (d.action === "deny") {
      rec.record(actor, "action.denied", { ...base, decision });
      throw new TermadaError("DENIED_BY_POLICY", d.reason, {
        retriable: false,
        hint: "Ask the operator to change the policy if this is needed",
        details: d.rule ? { rule: d.rule.pattern } : undefined,
      });
    }
    let approvalId: string | undefined;
    if (d.action === "confirm") {
      const answer = await ask(
        { id, owner: req.owner, kind: req.kind, sessionId: req.sessionId, summary: base.summary },
        {
          decision,
          rule: d.rule?.pattern,
          reason: d.reason,
          ...(d.approval ? { approval: d.approval } : {}),
          recheck: decideNow,
        },
      );
      approvalId = answer.approvalId;
      if (!answer.approved && this.stopped) throw this.#stoppedError();
      if (!answer.approved) {
        throw new TermadaError("DENIED_BY_POLICY", `Not approved: ${answer.reason}`, {
          retriable: false,
          details: { approval_id: answer.approvalId },
          hint: "An operator declined (or nobody decided in time)",
        });
      }
      if (this.stopped) {
        rec.record(actor, "action.refused", { ...base, reason: "stop-all barrier" });
        throw this.#stoppedError();
      }
      decision = { ...decision, reason: `${d.reason}; approved (${answer.approvalId})` };
    }
    const target = req.subjects.find((s) => s.kind === "server")?.name ??
      req.subjects.flatMap((s) =>
        s.kind === "forward" ? [s.server] : "target" in s ? [s.target] : []
      )[0] ?? "local";
    try {
      this.#admitBudget(req.owner, id, req.kind, target, base.summary, req.estimate);
    } catch (err) {
      rec.record(actor, "action.refused", {
        ...base,
        reason: err instanceof Error ? err.message : String(err),
      });
      throw err;
    }
    try {
      await rec.intent(actor, "action.requested", { ...base, decision });
    } catch (err) {
      // Not recorded, so it does not happen: what it reserved is given back.
      this.#release(id, "its intent could not be recorded");
      throw err;
    }
    return {
      id,
      kind: req.kind,
      owner: req.owner,
      decision,
      ...(approvalId ? { approvalId } : {}),
    };
  }

  /** Every resource an action touches and the command it runs, decided (strictest wins). */
  #decideAction(req: ActionRequest): PolicyVerdict {
    const port = this.#o.policy;
    const verdicts: PolicyVerdict[] = [];
    if (req.forbidden) verdicts.push({ action: "deny", reason: req.forbidden });
    for (const s of req.subjects) {
      verdicts.push(
        port.decideResource?.(req.owner, s, req.kind) ??
          { action: "allow", reason: "no resource rules" },
      );
    }
    if (req.env && Object.keys(req.env).length > 0 && port.decideEnv) {
      verdicts.push(port.decideEnv(req.owner, req.env));
    }
    if (req.command) {
      const servers = req.subjects.flatMap((s) => s.kind === "server" ? [s.name] : []);
      // Once per target server: structured rules see each one's environment.
      for (const target of servers.length > 0 ? servers : [undefined]) {
        verdicts.push(port.decide(req.owner, req.command, undefined, {
          remote: true,
          kind: req.kind === "fleet" ? "fleet" : "exec",
          ...(target ? { target } : {}),
        }));
      }
    }
    return strictest(verdicts);
  }

  /** What an admitted action did (durable with the next group sync). */
  actionDone(
    a: AdmittedAction,
    outcome: {
      ok: boolean;
      error?: string;
      facts?: Record<string, string | number | boolean | null>;
    },
  ): void {
    this.#settle(a.id, { ok: outcome.ok, ...(outcome.facts ? { facts: outcome.facts } : {}) });
    try {
      this.#o.recorder.note({ kind: "agent", id: a.owner }, "action.done", {
        action_id: a.id,
        kind: a.kind,
        ok: outcome.ok,
        ...(outcome.error ? { error: outcome.error } : {}),
        ...(outcome.facts ? { facts: outcome.facts } : {}),
      });
    } catch {
      // The audit latched unhealthy: the next admission says so (AUDIT_UNAVAILABLE).
    }
  }

  /**
   * A job's admission: its budgets reserved and its durable action row written in one
   * transaction (BUDGET_EXCEEDED refuses it and writes nothing); settled when it ends.
   */
  #admitJob(job: Job, target: string): void {
    this.#admitBudget(job.owner, job.id, "exec", target, job.command);
    if (this.#o.ledger) this.#admittedJobs.add(job.id);
  }

  /**
   * A job's end was stored (the trail calls this, after its reply went out): its budgets are
   * settled and its action row gets the outcome.
   */
  jobEnded(job: Job): void {
    if (!this.#admittedJobs.delete(job.id)) return;
    if (job.status === "orphaned") {
      // The link to its server dropped while it ran: nobody can say what it did.
      try {
        this.#o.ledger?.unknown(job.id, { status: job.status, reason: job.reason ?? "" });
      } catch (err) {
        log.warn("could not mark an action's outcome unknown", { action: job.id, error: err });
      }
      return;
    }
    const ran = job.endedAt !== undefined ? (job.endedAt - job.startedAt) / 1000 : 0;
    this.#settle(job.id, {
      ok: job.status === "exited" && job.exitCode === 0,
      runtime_s: Math.max(0, ran),
      facts: {
        status: job.status,
        ...(job.exitCode === undefined ? {} : { exit_code: job.exitCode }),
      },
    });
  }

  #admitBudget(
    owner: string,
    actionId: string,
    kind: string,
    target: string,
    summary: readonly string[],
    estimate?: { cost?: number },
  ): void {
    const ledger = this.#o.ledger;
    if (!ledger) return;
    const f = this.#o.policy.budgetsFor?.(owner, target) ??
      { rules: [], principal: `agent:${owner}`, production: false };
    ledger.admit(
      f.rules,
      {
        actionId,
        kind,
        principal: f.principal,
        ...(f.tenant ? { tenant: f.tenant } : {}),
        recipient: target,
        production: f.production,
        readOnly: kind === "file.read",
      },
      { owner, summary: actionSummary(summary) },
      estimate ?? {},
    );
  }

  #release(actionId: string, reason: string): void {
    try {
      this.#o.ledger?.release(actionId, reason);
    } catch (err) {
      log.warn("could not release an action", { action: actionId, error: err });
    }
  }

  #settle(actionId: string, outcome: BudgetOutcome): void {
    try {
      this.#o.ledger?.settle(actionId, outcome);
    } catch (err) {
      // Already settled or released (a job ended twice is not possible; a crash left it
      // unknown): the record says so; nothing to undo.
      log.warn("could not settle an action", { action: actionId, error: err });
    }
  }

  /** The gate for a new session: no shell starts under the barrier or without an audit log. */
  admitSession(): void {
    if (this.stopped) throw this.#stoppedError();
    this.#o.recorder.assertHealthy();
  }

  /** The operator's standing answer for a prompt, recorded before it is typed. */
  autoAnswer(job: Job, prompt: string): string | undefined {
    if (this.stopped) return undefined;
    const answer = this.#o.policy.autoAnswer?.(job.owner, prompt);
    if (answer === undefined) return undefined;
    this.#o.trail.autoAnswered(job, prompt, answer);
    return answer;
  }

  /** When the stop-all barrier lifts (epoch ms; 0 when none was set). */
  get barrierUntil(): number {
    return this.#barrierUntil;
  }

  get stopped(): boolean {
    return this.#clock.now() < this.#barrierUntil;
  }

  /** Refuses new admissions (STOPPED) for `ms`. */
  raiseBarrier(ms: number): void {
    this.#barrierUntil = this.#clock.now() + ms;
    this.#onBarrier?.(true);
  }

  lowerBarrier(): void {
    this.#barrierUntil = 0;
    this.#onBarrier?.(false);
  }

  /** Tells `fn` when the stop-all barrier rises and lifts (the exec gate's thread asks here). */
  watchBarrier(fn: (up: boolean) => void): void {
    this.#onBarrier = fn;
  }

  /**
   * What the exec gate's thread may allow alone for `ctx`'s agent (its snapshot of the rules):
   * all when there is no exec policy; nothing from a port that cannot say when its rules change.
   * (The stop-all barrier is the thread's own check: see watchBarrier.)
   */
  execFastPath(ctx: ExecContext): ExecFastPath | undefined {
    const p = this.#o.policy;
    if (!p.decideExec) return { allowAll: true };
    return p.onReload ? p.execFastPath?.(ctx.owner) : undefined;
  }

  #stoppedError(): TermadaError {
    return new TermadaError("STOPPED", "Termada is stopped: an operator ran stop-all", {
      retriable: true,
      hint: STOPPED_HINT(this.#barrierUntil),
    });
  }
}

/** What an exec-time approval shows and records. */
export interface ProgramConfirm {
  pid: number;
  path: string;
  argv: string[];
  decision: DecisionRecord;
  rule?: string;
  reason: string;
  approval?: ApprovalRequirement;
  /** The policy when it is approved (consume-time check). */
  recheck?: () => PolicyVerdict;
}

/** An action's summary as the actions table keeps it: at most 64 lines, 16 KiB in all. */
function actionSummary(lines: readonly string[]): string[] {
  const out: string[] = [];
  let size = 0;
  for (const l of lines.slice(0, 64)) {
    const t = l.length > 1024 ? l.slice(0, 1023) + "…" : l;
    size += new TextEncoder().encode(t).length;
    if (size > 15_000) break;
    out.push(t);
  }
  return out;
}

/** argv as recorded and shown: at most 64 words of 256 characters. */
function shortArgv(argv: readonly string[]): string[] {
  const out = argv.slice(0, 64).map((a) => a.length > 256 ? a.slice(0, 255) + "…" : a);
  if (argv.length > 64) out.push(`… (${argv.length - 64} more)`);
  return out;
}

function decisionRecord(d: PolicyVerdict): DecisionRecord {
  return { action: d.action, reason: d.reason, ...(d.rule ? { rule: d.rule } : {}) };
}
