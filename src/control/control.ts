/**
 * The control layer, assembled: it owns the engine (no one else holds one), and exposes what the
 * edges may call — `agents` (an agent's operations), `operators` (the operator's use cases) and
 * `presence` (connections, reaping). Every side effect those take passes the one gateway and is
 * written by the one trail to the one audit log, mirrored on the one event bus.
 */
import { join } from "node:path";
import {
  Engine,
  type EngineLimits,
  type EngineOptions,
  type EngineOutputOptions,
  type GateStats,
  type Job,
} from "../engine/mod.ts";
import { type Clock, type EventBus, logger, systemClock } from "../shared/mod.ts";
import type { Store } from "../store/mod.ts";
import { AgentOps } from "./agent.ts";
import { ApprovalBook } from "./approvals.ts";
import { Gateway, type PolicyPort } from "./gateway.ts";
import { OperatorOps } from "./operator.ts";
import { RecordingOps, type RecordingsOptions } from "./recordings.ts";
import { Presence } from "./presence.ts";
import { RemoteOps, type RemoteSetup } from "./remote.ts";
import { VaultOps } from "./vault.ts";
import { PluginOps } from "./plugins.ts";
import { AdapterOps } from "./adapters.ts";
import type { AnyAdapter } from "../adapters/mod.ts";
import type { SecretSet } from "../output/mod.ts";
import type { VaultFile } from "../vault/mod.ts";
import { type AuditSink, Recorder } from "./recorder.ts";
import { Trail } from "./trail.ts";
import type { SnapshotPolicy } from "./snapshots.ts";
import { BudgetLedger } from "../governance/mod.ts";

const log = logger("control");

/** Most automatic answers typed into one job (a wrong answer must not loop forever). */
const MAX_AUTO_ANSWERS = 16;

export interface ControlOptions {
  /** How the engine runs sessions (paths, limits, shells); it is built here and only here. */
  engine: EngineOptions;
  store: Store;
  audit: AuditSink;
  bus?: EventBus;
  policy: PolicyPort;
  spoolDir: string;
  spoolMaxBytes: number;
  /** Finished jobs kept in the store per agent. */
  finishedPerAgent: number;
  /** Unanswered approvals are denied after this long (default 120 s). */
  confirmTimeoutMs?: number;
  /** Grace before a gone agent's sessions are reaped; null: never (default 5 min). */
  reapAfterMs?: number | null;
  /** Servers, connections, host keys (src/remote); absent: local sessions only. */
  remote?: RemoteSetup;
  /** Paths the file tools never touch: `all` (read and write) and `write` only. */
  forbiddenPaths?: { all: readonly string[]; write: readonly string[] };
  /** The daemon's loopback base URL, once it listens (one-time answer pages). */
  publicUrl?: () => string | undefined;
  /** Snapshots: the store's root and each agent's policy `snapshot` rules; absent: none. */
  snapshots?: { root: string; rules?: (agent: string) => SnapshotPolicy | undefined };
  /**
   * The vault file and the daemon-wide secrets its values join (the same SecretSet the engine
   * options and the audit log's redactor hold); absent: no vault.
   */
  vault?: { file: VaultFile; secrets: SecretSet };
  /** Who is behind an agent (principal), for approvals that exclude the requester. */
  whoIs?: (agent: string) => { principal: string; principals?: readonly string[] };
  /** Pending approvals at most per owner and in all (defaults 32 / 128). */
  approvalQuotas?: { perOwner: number; total: number };
  /** The daemon's version (what plugins are told the client is). */
  version?: string;
  /** Typed adapters: the runs' journal and the config's `adapters:`; absent: none. */
  adapters?: { dbPath: string; adapters: readonly AnyAdapter[] };
  clock?: Clock;
}

export class Control {
  readonly agents: AgentOps;
  readonly operators: OperatorOps;
  readonly presence: Presence;
  readonly recorder: Recorder;
  /** Remote work, when the daemon has servers support. */
  readonly remote: RemoteOps | undefined;
  /** The vault, when the daemon has one configured (always, in the daemon). */
  readonly vault: VaultOps | undefined;
  readonly limits: EngineLimits;
  /** Budgets, and every admitted action's intent and outcome (reconcile). */
  readonly ledger: BudgetLedger;
  /** The config's plugins and agents' calls to their tools (configure them after start). */
  readonly plugins: PluginOps;
  /** Typed adapter runs (resume them once after start), when configured. */
  readonly adapters: AdapterOps | undefined;
  readonly output: EngineOutputOptions;
  readonly #engine: Engine;
  readonly #trail: Trail;
  readonly #approvals: ApprovalBook;
  readonly #gateway: Gateway;
  readonly #bus: EventBus | undefined;
  #closing: Promise<void> | undefined;

  constructor(o: ControlOptions) {
    const clock = o.clock ?? o.engine.clock ?? systemClock;
    const engine = new Engine({
      ...o.engine,
      secrets: o.engine.secrets ?? o.vault?.secrets,
      clock,
    });
    this.#engine = engine;
    this.limits = engine.limits;
    this.output = engine.output;
    this.recorder = new Recorder(o.audit, o.bus);
    this.#bus = o.bus;
    this.#trail = new Trail({
      store: o.store,
      recorder: this.recorder,
      spoolDir: o.spoolDir,
      spoolMaxBytes: o.spoolMaxBytes,
      finishedPerAgent: o.finishedPerAgent,
      clock,
      sessionCwd: (id) => engine.registry.sessionById(id)?.cwd,
    });
    this.ledger = new BudgetLedger(o.store, { clock });
    this.#gateway = new Gateway({
      policy: o.policy,
      ledger: this.ledger,
      trail: this.#trail,
      recorder: this.recorder,
      clock,
    });
    this.#trail.onFinished = (job) => this.#gateway.jobEnded(job);
    this.#trail.onPrune = () => void this.ledger.prune();
    this.#approvals = new ApprovalBook({
      store: o.store,
      engine,
      trail: this.#trail,
      timeoutMs: o.confirmTimeoutMs,
      clock,
      ...(o.whoIs ? { whoIs: o.whoIs } : {}),
      ...(o.approvalQuotas ? { quotas: o.approvalQuotas } : {}),
    });
    this.remote = o.remote
      ? new RemoteOps({
        engine,
        gateway: this.#gateway,
        approvals: this.#approvals,
        recorder: this.recorder,
        setup: o.remote,
      })
      : undefined;
    this.vault = o.vault
      ? new VaultOps({
        file: o.vault.file,
        secrets: o.vault.secrets,
        recorder: this.recorder,
        decide: o.policy.decideResource
          ? (agent, subject) => o.policy.decideResource!(agent, subject)
          : undefined,
        onChange: (s) => o.bus?.publish("vault.status", { ...s }),
      })
      : undefined;
    const recordings: RecordingsOptions = {
      dir: o.engine.recordingsDir ?? join(o.engine.runtimeDir, "recordings"),
      enabled: o.engine.record !== false,
      sessions: engine.registry,
      store: o.store,
      keepFiles: o.engine.recording?.keepFiles,
    };
    const forbiddenPaths = o.forbiddenPaths ?? { all: o.engine.sandbox?.hide ?? [], write: [] };
    this.adapters = o.adapters
      ? new AdapterOps({
        gateway: this.#gateway,
        approvals: this.#approvals,
        dbPath: o.adapters.dbPath,
        adapters: o.adapters.adapters,
        forbidden: forbiddenPaths,
      })
      : undefined;
    this.agents = new AgentOps({
      engine,
      gateway: this.#gateway,
      approvals: this.#approvals,
      trail: this.#trail,
      remote: this.remote,
      vault: this.vault,
      forbiddenPaths,
      ...(this.adapters ? { adapters: this.adapters } : {}),
      ...(o.snapshots ? { snapshots: o.snapshots } : {}),
      ...(o.publicUrl ? { publicUrl: o.publicUrl } : {}),
    });
    this.agents.useRecordings(recordings);
    this.plugins = new PluginOps({
      gateway: this.#gateway,
      approvals: this.#approvals,
      redact: (text) => {
        const bytes = new TextEncoder().encode(text);
        const out = engine.newRedactor().redact(bytes);
        return out === bytes ? text : new TextDecoder().decode(out);
      },
      ...(o.version ? { version: o.version } : {}),
    });
    this.operators = new OperatorOps({
      engine,
      gateway: this.#gateway,
      approvals: this.#approvals,
      trail: this.#trail,
      recorder: this.recorder,
      remote: this.remote,
      vault: this.vault,
      ledger: this.ledger,
      store: o.store,
      ...(o.policy.allBudgets ? { budgetRules: () => o.policy.allBudgets!() } : {}),
      snapshots: this.agents.snapshotOps,
      recordings: new RecordingOps(recordings),
    });
    this.presence = new Presence({
      engine,
      agents: this.agents,
      recorder: this.recorder,
      graceMs: o.reapAfterMs === undefined ? 300_000 : o.reapAfterMs,
    });
    engine.registry.archive = this.#trail.archive();
    engine.guardExec(
      (ev, ctx) => this.#gateway.admitProgram(ev, ctx, (job, c) => this.#approvals.askExec(job, c)),
      (ev, ctx, found) => this.#gateway.programRaced(ev, ctx, found),
      (ctx) => this.#gateway.execFastPath(ctx),
    );
    // What the gate's thread decides alone depends on the rules and on stop-all: both reach it.
    this.#gateway.watchBarrier((up) => engine.sandbox.barrier(up));
    o.policy.onReload?.(() => engine.sandbox.policyChanged());
    engine.observe({
      jobCreated: (job) => {
        if (job.owner.startsWith("operator:")) this.#trail.operatorJob(job);
        this.#autoAnswer(job);
      },
      sessionUpdated: (s) => this.#trail.sessionResized(s),
      sessionClosed: (s, reason) => this.#trail.sessionClosed(s, reason),
    });
    this.#trail.pruneOrphanSpools();
  }

  /** The exec gate's counters and decision latency (bench, diagnostics). */
  execGateStats(): GateStats {
    return this.#engine.sandbox.gateStats();
  }

  /** The session boundary (diagnostics and tests: where execs are answered, injection). */
  get sandbox(): Engine["sandbox"] {
    return this.#engine.sandbox;
  }

  /** Jobs waiting for an operator (missions show theirs). */
  pendingApprovals(): ReturnType<ApprovalBook["pending"]> {
    return this.#approvals.pending();
  }

  /** The output bytes so far of every active job (the daemon's 1 Hz `jobs.output` event). */
  outputTotals(): { job_id: string; output_bytes: number }[] {
    return this.#engine.registry.activeJobs().map((j) => ({
      job_id: j.id,
      output_bytes: j.buffer.totalBytes,
    }));
  }

  /** Ends every session and job, stops timers. Idempotent. */
  shutdown(): Promise<void> {
    return this.#closing ??= (async () => {
      this.presence.close();
      await this.plugins.close();
      this.#approvals.close();
      await this.remote?.close();
      await this.#engine.shutdown();
      await this.vault?.close();
      this.adapters?.close();
      this.#trail.pruneNow();
      this.#trail.close();
    })();
  }

  /**
   * Types the policy's standing answers when the job waits at a matching prompt; when none
   * answers, says once per wait on the bus that a person or the agent must
   * (`job.awaiting_input`: notifications, the dashboard). The prompt text is never in it.
   */
  #autoAnswer(job: Job): void {
    let answered = 0;
    let busy = false;
    let waiting = false;
    const needsInput = () =>
      this.#bus?.publish("job.awaiting_input", {
        job_id: job.id,
        session_id: job.sessionId,
        owner: job.owner,
        command: [...job.command],
        ...(job.inputReader ? { reader: job.inputReader } : {}),
      });
    job.onChange(() => {
      if (job.status !== "awaiting_input") {
        waiting = false;
        return;
      }
      if (busy || waiting) return;
      waiting = true;
      if (answered >= MAX_AUTO_ANSWERS) return void needsInput();
      let answer: string | undefined;
      try {
        answer = this.#gateway.autoAnswer(job, job.prompt ?? "");
      } catch {
        return void needsInput(); // not recorded (audit down): the agent answers itself
      }
      if (answer === undefined) return void needsInput();
      let target;
      try {
        target = this.#engine.jobs.inputTarget(job);
      } catch {
        return;
      }
      busy = true;
      answered++;
      waiting = false; // the answer ends this wait; another prompt is a new one
      job.autoAnswering = true;
      target.write(answer + "\r").catch((err) =>
        log.warn("could not type an automatic answer", { job: job.id, error: err })
      ).finally(() => {
        busy = false;
        job.autoAnswering = false;
      });
    });
  }
}
