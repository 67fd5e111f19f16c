/**
 * The runner: parses input with the adapter's schema, prepares, asks the gateway hook, then moves
 * the run through its phases, writing each one durably before the next side effect:
 *
 *   prepared ─admit─► admitted ─► executing ─► executed ─► verified
 *       │                            │  │           └────► verify_failed
 *       └─► refused                  │  └─► failed (─► compensating, when partial + reversible)
 *                                    └────► outcome_unknown
 *   verified | verify_failed | compensate_failed ─compensate()─► compensating ─► compensated
 *                                                                          └──► compensate_failed
 *
 * `resume()` (at start-up, when no other runner is live on the database: the daemon's lock makes
 * that so) finishes what a crash interrupted: `prepared` → refused (admission needs a live
 * caller), `admitted` → execute, `executing` → reconcile (applied → executed → verify;
 * not_applied → execute again with the same idempotency key; unknown or no reconcile →
 * outcome_unknown), `executed` → verify, `compensating` → compensate again.
 *
 * The runner never decides whether a run may happen: that is the `admit` hook (policy, approvals,
 * budgets), which the caller supplies.
 */
import { logger, randomHex, TermadaError, toTermadaError } from "../shared/mod.ts";
import { parseInput } from "../wire/mod.ts";
import {
  AdapterError,
  type AnyAdapter,
  failureOutcome,
  type JsonValue,
  type PhaseContext,
  type Prepared,
  type Risk,
  utf8Bytes,
} from "./sdk.ts";
import {
  ADAPTER_STORE_LIMITS,
  type AdapterRunPhase,
  type AdapterRunRow,
  type AdapterRunStore,
  type RunError,
} from "./store.ts";

const log = logger("adapters");

export const RUNNER_LIMITS = {
  /** Input of a run as UTF-8 JSON, unless the adapter declares its own `maxInputBytes`. */
  inputBytes: 256 * 1024,
  /** Runs one `list` or `resume` call handles. */
  listMax: ADAPTER_STORE_LIMITS.listMax,
  /** Registered adapters. */
  adapters: 64,
} as const;

/** What the gateway hook sees: the exact change, before anything happens. */
export interface AdmissionRequest {
  runId: string;
  adapter: string;
  agent: string;
  resource: string;
  summary: string;
  risk: Risk;
  reversible: boolean;
  cost?: number;
  plan: JsonValue;
}

export type Admission =
  | { allowed: true }
  | { allowed: false; reason: string; code: string };

export type AdmitHook = (request: AdmissionRequest) => Promise<Admission>;

export interface RunOptions {
  agent: string;
  admit: AdmitHook;
  signal?: AbortSignal;
  /** Compensate a reversible run whose verification failed (default false). */
  compensateOnVerifyFailure?: boolean;
}

/** The run as callers see it. */
export interface AdapterRun {
  id: string;
  adapter: string;
  agent: string;
  phase: AdapterRunPhase;
  resource: string;
  summary: string;
  risk: Risk;
  reversible: boolean;
  receipt: JsonValue | null;
  verified: boolean;
  /** What verify saw, once it ran. */
  observed?: JsonValue;
  /** What compensate reported, once it ran. */
  compensation?: JsonValue;
  error?: RunError;
  created_at: number;
  updated_at: number;
}

export interface AdapterRunnerOptions {
  adapters: readonly AnyAdapter[];
}

function view(row: AdapterRunRow): AdapterRun {
  const v = row.verification as { holds?: unknown; observed?: JsonValue } | null;
  return {
    id: row.id,
    adapter: row.adapter,
    agent: row.agent,
    phase: row.phase,
    resource: row.resource,
    summary: row.summary,
    risk: row.risk,
    reversible: row.reversible,
    receipt: row.receipt,
    verified: row.phase === "verified",
    ...(v === null ? {} : { observed: v.observed ?? null }),
    ...(row.compensation === null ? {} : { compensation: row.compensation }),
    ...(row.error === null ? {} : { error: row.error }),
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

function runError(err: unknown): RunError {
  const e = toTermadaError(err);
  return {
    code: e.code,
    message: e.message,
    ...(e instanceof AdapterError ? { reason: e.reason } : {}),
    ...(e instanceof AdapterError && e.status !== undefined ? { status: e.status } : {}),
  };
}

const NEVER = new AbortController().signal;

export class AdapterRunner {
  readonly #store: AdapterRunStore;
  readonly #adapters = new Map<string, AnyAdapter>();

  /** `store` must have its schema ensured; the caller owns (and closes) its connection. */
  constructor(store: AdapterRunStore, options: AdapterRunnerOptions) {
    this.#store = store;
    if (options.adapters.length > RUNNER_LIMITS.adapters) {
      throw new RangeError(`At most ${RUNNER_LIMITS.adapters} adapters can be registered`);
    }
    for (const a of options.adapters) {
      if (this.#adapters.has(a.name)) {
        throw new TypeError(`Adapter "${a.name}" is registered twice`);
      }
      this.#adapters.set(a.name, a);
    }
  }

  /** Names of the registered adapters. */
  adapters(): string[] {
    return [...this.#adapters.keys()];
  }

  get(runId: string): AdapterRun | undefined {
    const row = this.#store.get(runId);
    return row === undefined ? undefined : view(row);
  }

  /** A run's plan (what the gateway decides an undo on), or undefined. */
  plan(runId: string): JsonValue | undefined {
    return this.#store.get(runId)?.plan;
  }

  list(
    options: { agent?: string; phases?: AdapterRunPhase[]; limit?: number; newest?: boolean } = {},
  ): AdapterRun[] {
    return this.#store.list(options).map(view);
  }

  /**
   * Parses, prepares, admits, executes and verifies one run. Throws (and stores nothing) when the
   * input is invalid or prepare refuses; otherwise returns the run in whatever phase it reached.
   */
  async run(adapterName: string, rawInput: unknown, options: RunOptions): Promise<AdapterRun> {
    const adapter = this.#adapter(adapterName);
    const signal = options.signal ?? NEVER;
    const max = Math.min(
      adapter.maxInputBytes ?? RUNNER_LIMITS.inputBytes,
      ADAPTER_STORE_LIMITS.jsonBytes,
    );
    let json: string | undefined;
    try {
      json = JSON.stringify(rawInput ?? {});
    } catch {
      json = undefined; // cycles, bigint: reported below as not JSON
    }
    if (json === undefined) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Cannot run "${adapterName}": the input is not JSON`,
      );
    }
    if (utf8Bytes(json) > max) {
      throw new AdapterError(
        "TOO_LARGE",
        `Cannot run "${adapterName}": the input is larger than ${max} bytes as JSON`,
      );
    }
    const input = parseInput(adapter.input, JSON.parse(json));
    const prepared: Prepared<unknown> = await adapter.prepare(input, {
      agent: options.agent,
      signal,
    });
    let row = this.#store.insert({
      adapter: adapter.name,
      agent: options.agent,
      resource: prepared.resource,
      input,
      plan: prepared.plan,
      summary: prepared.summary,
      risk: prepared.risk,
      reversible: prepared.reversible,
      cost: prepared.cost ?? null,
      idempotency_key: `idem_${randomHex(16)}`,
    });

    let admission: Admission;
    try {
      admission = await options.admit({
        runId: row.id,
        adapter: row.adapter,
        agent: row.agent,
        resource: row.resource,
        summary: row.summary,
        risk: row.risk,
        reversible: row.reversible,
        ...(row.cost === null ? {} : { cost: row.cost }),
        plan: row.plan,
      });
    } catch (err) {
      return view(this.#move(row, "refused", { error: runError(err) }));
    }
    if (!admission.allowed) {
      return view(
        this.#move(row, "refused", { error: { code: admission.code, message: admission.reason } }),
      );
    }
    row = this.#move(row, "admitted");
    row = await this.#execute(adapter, row, signal);
    if (row.phase === "executed") {
      row = await this.#verify(adapter, row, signal, options.compensateOnVerifyFailure ?? false);
    }
    return view(row);
  }

  /**
   * Finishes runs a crash interrupted, oldest first, at most `limit` (default and most:
   * RUNNER_LIMITS.listMax); call again while it returns a full batch. Returns the runs it moved.
   */
  async resume(options: { signal?: AbortSignal; limit?: number } = {}): Promise<AdapterRun[]> {
    const signal = options.signal ?? NEVER;
    const rows = this.#store.list({
      phases: ["prepared", "admitted", "executing", "executed", "compensating"],
      limit: options.limit ?? RUNNER_LIMITS.listMax,
    });
    const out: AdapterRun[] = [];
    for (const found of rows) {
      try {
        out.push(view(await this.#resumeOne(found, signal)));
      } catch (err) {
        // One run's failure (an unknown adapter, a lost race) must not stop the others.
        log.warn("cannot resume run", { run: found.id, error: err });
      }
    }
    return out;
  }

  /** Undoes a reversible run (operator or agent undo). */
  async compensate(runId: string, options: { signal?: AbortSignal } = {}): Promise<AdapterRun> {
    const row = this.#store.get(runId);
    if (row === undefined) throw new TermadaError("NOT_FOUND", `No adapter run "${runId}"`);
    const adapter = this.#adapter(row.adapter);
    if (!row.reversible || adapter.compensate === undefined) {
      throw new AdapterError(
        "NOT_REVERSIBLE",
        `Cannot compensate run "${runId}": it is not reversible`,
      );
    }
    if (!["verified", "verify_failed", "compensate_failed"].includes(row.phase)) {
      throw new AdapterError(
        "PHASE_CONFLICT",
        `Cannot compensate run "${runId}": it is ${row.phase}`,
        { hint: "Only verified, verify_failed or compensate_failed runs can be compensated" },
      );
    }
    return view(
      await this.#compensate(adapter, this.#move(row, "compensating"), options.signal ?? NEVER),
    );
  }

  async #resumeOne(found: AdapterRunRow, signal: AbortSignal): Promise<AdapterRunRow> {
    if (found.phase === "prepared") {
      return this.#move(found, "refused", {
        error: { code: "STOPPED", message: "The daemon stopped before the run was admitted" },
      });
    }
    const adapter = this.#adapter(found.adapter);
    if (found.phase === "admitted") {
      const row = await this.#execute(adapter, found, signal);
      return row.phase === "executed" ? await this.#verify(adapter, row, signal, false) : row;
    }
    if (found.phase === "executed") return await this.#verify(adapter, found, signal, false);
    if (found.phase === "compensating") {
      return await this.#compensate(adapter, this.#move(found, "compensating"), signal);
    }
    // executing: claim it first (a same-phase write bumps the version), then ask the world.
    let row = this.#move(found, "executing");
    const ctx = this.#ctx(row, signal);
    if (adapter.reconcile === undefined) {
      return this.#move(row, "outcome_unknown", {
        error: { code: "INTERNAL", message: `Adapter "${adapter.name}" cannot reconcile` },
      });
    }
    let reconciled;
    try {
      reconciled = await adapter.reconcile(row.plan, ctx);
    } catch (err) {
      return this.#move(row, "outcome_unknown", { error: runError(err) });
    }
    if (reconciled.status === "unknown") {
      return this.#move(row, "outcome_unknown", {
        error: {
          code: "INTERNAL",
          message: `Cannot tell whether run "${row.id}" was applied: ${
            (JSON.stringify(reconciled.detail) ?? "null").slice(0, 500)
          }`,
        },
      });
    }
    if (reconciled.status === "applied") {
      row = this.#move(row, "executed", { receipt: reconciled.receipt });
    } else {
      row = await this.#runExecute(adapter, row, signal);
    }
    return row.phase === "executed" ? await this.#verify(adapter, row, signal, false) : row;
  }

  /** admitted → executing (durable intent) → execute. */
  async #execute(
    adapter: AnyAdapter,
    row: AdapterRunRow,
    signal: AbortSignal,
  ): Promise<AdapterRunRow> {
    return await this.#runExecute(adapter, this.#move(row, "executing"), signal);
  }

  /** Calls execute on a run already in `executing`. */
  async #runExecute(
    adapter: AnyAdapter,
    row: AdapterRunRow,
    signal: AbortSignal,
  ): Promise<AdapterRunRow> {
    let receipt: unknown;
    try {
      receipt = await adapter.execute(row.plan, this.#ctx(row, signal));
    } catch (err) {
      const outcome = failureOutcome(err);
      if (outcome === "unknown") {
        return this.#move(row, "outcome_unknown", { error: runError(err) });
      }
      const failed = this.#move(row, "failed", { error: runError(err) });
      if (outcome === "partial" && failed.reversible && adapter.compensate !== undefined) {
        return await this.#compensate(adapter, this.#move(failed, "compensating"), signal);
      }
      return failed;
    }
    return this.#move(row, "executed", { receipt: receipt ?? null });
  }

  async #verify(
    adapter: AnyAdapter,
    row: AdapterRunRow,
    signal: AbortSignal,
    compensateOnFailure: boolean,
  ): Promise<AdapterRunRow> {
    let result;
    try {
      result = await adapter.verify(row.plan, row.receipt, this.#ctx(row, signal));
    } catch (err) {
      // Could not look: the run stays executed (resume verifies again), with the error noted.
      return this.#move(row, "executed", { error: runError(err) });
    }
    const holds = result.holds === true;
    const next = this.#move(row, holds ? "verified" : "verify_failed", {
      verification: { holds, observed: result.observed ?? null },
      error: holds ? null : {
        code: "INTERNAL",
        message: `Run "${row.id}" did not verify: the change does not hold`,
      },
    });
    if (!holds && compensateOnFailure && next.reversible && adapter.compensate !== undefined) {
      return await this.#compensate(adapter, this.#move(next, "compensating"), signal);
    }
    return next;
  }

  /** Calls compensate on a run already in `compensating`. */
  async #compensate(
    adapter: AnyAdapter,
    row: AdapterRunRow,
    signal: AbortSignal,
  ): Promise<AdapterRunRow> {
    try {
      const result = await adapter.compensate!(
        row.plan,
        row.receipt ?? undefined,
        this.#ctx(row, signal),
      );
      return this.#move(row, result.done ? "compensated" : "compensate_failed", {
        compensation: { done: result.done, detail: result.detail ?? null },
      });
    } catch (err) {
      return this.#move(row, "compensate_failed", { error: runError(err) });
    }
  }

  #ctx(row: AdapterRunRow, signal: AbortSignal): PhaseContext {
    return { idempotencyKey: row.idempotency_key, signal };
  }

  #adapter(name: string): AnyAdapter {
    const a = this.#adapters.get(name);
    if (a === undefined) {
      throw new AdapterError("UNKNOWN_ADAPTER", `Cannot run "${name}": no such adapter`, {
        hint: `Registered: ${[...this.#adapters.keys()].join(", ") || "none"}`,
      });
    }
    return a;
  }

  /** One compare-and-set phase change; losing it means another runner owns the run. */
  #move(
    row: AdapterRunRow,
    to: AdapterRunPhase,
    patch: Parameters<AdapterRunStore["transition"]>[3] = {},
  ): AdapterRunRow {
    const next = this.#store.transition(row.id, row, to, patch);
    if (next === undefined) {
      throw new AdapterError(
        "PHASE_CONFLICT",
        `Cannot move run "${row.id}" from ${row.phase} to ${to}: another runner changed it`,
      );
    }
    return next;
  }
}
