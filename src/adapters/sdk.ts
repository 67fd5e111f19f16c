/**
 * The contract an adapter implements: a typed, side-effect-free `prepare` that turns parsed input
 * into an exact plan, then `execute`, `verify` and the optional `compensate` and `reconcile`, each
 * taking only JSON (plans and receipts are stored in SQLite between phases and read back after a
 * restart, so an adapter never sees a live object it made in `prepare`).
 *
 * Secrets: plans, receipts, verification and compensation details are stored in plain text in the
 * `adapter_runs` table and shown to agents and operators. An adapter keeps credentials in its
 * construction options (e.g. the http adapter's `headers`) and never copies them into a plan, a
 * receipt or an error message.
 */
import type { z } from "zod";
import { type ErrorCode, TermadaError, type TermadaErrorOptions } from "../shared/mod.ts";

/** A value that survives `JSON.stringify` → `JSON.parse` unchanged. */
export type JsonValue =
  | null
  | boolean
  | number
  | string
  | JsonValue[]
  | { [key: string]: JsonValue };

export type Risk = "low" | "medium" | "high";

/** What `prepare` found: the exact change, the resource it touches and how risky it is. */
export interface Prepared<P> {
  /** Everything `execute`, `verify`, `compensate` and `reconcile` need; JSON, no secrets. */
  plan: P;
  /** What the gateway's policy matches on (as `<adapter>:<resource>`): a path, an URL. */
  resource: string;
  /** The exact change for a human (approval prompts, the audit log), e.g. `3 files, +12 −4`. */
  summary: string;
  risk: Risk;
  /** True when `compensate` can undo a successful run. */
  reversible: boolean;
  /** Budget units the run costs, when the adapter can tell. */
  cost?: number;
}

export interface PrepareContext {
  /** The agent the run is for. */
  agent: string;
  signal: AbortSignal;
}

export interface ExecuteContext {
  /** Minted once when the run is prepared and stored: the same on every retry after a restart. */
  idempotencyKey: string;
  signal: AbortSignal;
}

/** Context of verify, compensate and reconcile (the key lets them find what execute made). */
export type PhaseContext = ExecuteContext;

export interface Verification {
  holds: boolean;
  /** What was seen (hashes, a status), kept with the run. */
  observed: JsonValue;
}

export interface Compensation {
  done: boolean;
  detail: JsonValue;
}

/**
 * What an interrupted execute left behind. `applied` carries a receipt rebuilt from the world (a
 * run without one could be neither verified nor compensated), which is why this is richer than a
 * bare "applied" | "not_applied" | "unknown".
 */
export type Reconciled<R> =
  | { status: "applied"; receipt: R }
  | { status: "not_applied" }
  | { status: "unknown"; detail: JsonValue };

/**
 * One kind of side effect. `prepare` must not change anything; `execute` must be idempotent for
 * one `idempotencyKey` (the runner calls it again with the same key when `reconcile` says a run
 * left in `executing` was not applied); `compensate` must be idempotent too (it is retried after a
 * crash while `compensating`).
 */
export interface Adapter<I, P, R> {
  /** Dotted name, e.g. `file.patch`. */
  readonly name: string;
  /** Parses the raw input once at the edge (the runner turns a failure into INVALID_ARGUMENT). */
  readonly input: z.ZodType<I>;
  /** Largest input accepted as UTF-8 JSON (default: the runner's 256 KiB; at most 1 MiB). */
  readonly maxInputBytes?: number;
  prepare(input: I, ctx: PrepareContext): Promise<Prepared<P>>;
  execute(plan: P, ctx: ExecuteContext): Promise<R>;
  verify(plan: P, receipt: R, ctx: PhaseContext): Promise<Verification>;
  /** Undo. `receipt` is undefined when execute failed part way (see AdapterError `outcome`). */
  compensate?(plan: P, receipt: R | undefined, ctx: PhaseContext): Promise<Compensation>;
  reconcile?(plan: P, ctx: PhaseContext): Promise<Reconciled<R>>;
}

/** An adapter of any types, as the runner's registry holds it. */
// deno-lint-ignore no-explicit-any
export type AnyAdapter = Adapter<any, any, any>;

/**
 * Precise reasons of adapter and runner errors; each maps to a wire code (ADAPTER_REASON_CODES),
 * several reasons to one (CONFLICT: the world is not what the change expected).
 */
export const ADAPTER_ERROR_REASONS = [
  "PATCH_DOES_NOT_APPLY",
  "PATH_OUTSIDE_ROOT",
  "ORIGIN_ESCAPE",
  "TOO_LARGE",
  "RESOURCE_CHANGED",
  "WRITE_FAILED",
  "UPSTREAM_STATUS",
  "UPSTREAM_UNREACHABLE",
  "PHASE_CONFLICT",
  "UNKNOWN_ADAPTER",
  "NOT_REVERSIBLE",
] as const;
export type AdapterErrorReason = typeof ADAPTER_ERROR_REASONS[number];

export const ADAPTER_REASON_CODES: Readonly<Record<AdapterErrorReason, ErrorCode>> = {
  PATCH_DOES_NOT_APPLY: "CONFLICT",
  PATH_OUTSIDE_ROOT: "DENIED_BY_POLICY",
  ORIGIN_ESCAPE: "DENIED_BY_POLICY",
  TOO_LARGE: "INVALID_ARGUMENT",
  RESOURCE_CHANGED: "CONFLICT",
  WRITE_FAILED: "INTERNAL",
  UPSTREAM_STATUS: "UPSTREAM_FAILED",
  UPSTREAM_UNREACHABLE: "SERVER_UNREACHABLE",
  PHASE_CONFLICT: "CONFLICT",
  UNKNOWN_ADAPTER: "NOT_FOUND",
  NOT_REVERSIBLE: "NOT_SUPPORTED",
};

/**
 * What a failed execute left: `not_applied` (nothing changed: the run is `failed`), `partial`
 * (some of it changed: the runner compensates when the run is reversible) or `unknown` (it may
 * have landed: the run is `outcome_unknown` for an operator).
 */
export type FailureOutcome = "not_applied" | "partial" | "unknown";

export interface AdapterErrorOptions extends TermadaErrorOptions {
  /** Only meaningful when thrown by execute; default `not_applied`. */
  outcome?: FailureOutcome;
  /** UPSTREAM_STATUS: the HTTP status received. */
  status?: number;
}

/** An adapter's or the runner's error: a TermadaError with a precise `reason`. */
export class AdapterError extends TermadaError {
  readonly reason: AdapterErrorReason;
  readonly outcome: FailureOutcome;
  readonly status: number | undefined;

  constructor(reason: AdapterErrorReason, message: string, options: AdapterErrorOptions = {}) {
    super(ADAPTER_REASON_CODES[reason], message, options);
    this.name = "AdapterError";
    this.reason = reason;
    this.outcome = options.outcome ?? "not_applied";
    this.status = options.status;
  }
}

/** How execute's failure is judged: anything but an AdapterError may have landed. */
export function failureOutcome(err: unknown): FailureOutcome {
  return err instanceof AdapterError ? err.outcome : "unknown";
}

/** Lowercase hex SHA-256 of bytes. */
export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = new Uint8Array(
    await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>),
  );
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

const encoder = new TextEncoder();

/** UTF-8 length of `s`. */
export function utf8Bytes(s: string): number {
  return encoder.encode(s).byteLength;
}
