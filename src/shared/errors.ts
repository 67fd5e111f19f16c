/** Error codes shared by every layer; the wire contract of TOOLS.md. */
export const ERROR_CODES = [
  "INVALID_ARGUMENT",
  "NOT_FOUND",
  "SESSION_BUSY",
  "NOT_AWAITING_INPUT",
  "DENIED_BY_POLICY",
  "APPROVAL_REQUIRED",
  "QUOTA_EXCEEDED",
  "STOPPED",
  "AUDIT_UNAVAILABLE",
  "SERVER_UNREACHABLE",
  "VAULT_LOCKED",
  "BUDGET_EXCEEDED",
  "BLOCKED_AT_EXEC",
  "NOT_SUPPORTED",
  /** A plugin is down or restarting (docs/PLUGINS.md). */
  "PLUGIN_UNAVAILABLE",
  /** A plugin did not answer in its timeout_ms. */
  "PLUGIN_TIMEOUT",
  /** A plugin's answer broke its own declared output schema or a bound. */
  "PLUGIN_BAD_RESULT",
  /** What a change expected is not what is there (a patch's context, a file changed since). */
  "CONFLICT",
  /** An adapter's remote service answered with an error status (details: none; see message). */
  "UPSTREAM_FAILED",
  "INTERNAL",
] as const;

export type ErrorCode = typeof ERROR_CODES[number];

/** Codes a caller may simply retry later. */
const RETRIABLE: ReadonlySet<ErrorCode> = new Set([
  "SESSION_BUSY",
  "QUOTA_EXCEEDED",
  "SERVER_UNREACHABLE",
  "AUDIT_UNAVAILABLE",
  "PLUGIN_UNAVAILABLE",
]);

/**
 * Structured facts an error may carry for the caller. Closed on purpose: every key here is part
 * of the wire contract (src/wire declares the same set), so no error can carry an undeclared one.
 */
export interface ErrorDetails {
  /** The job concerned (the running one for SESSION_BUSY, the refused one for a denial). */
  job_id?: string;
  session_id?: string;
  approval_id?: string;
  /** The state that caused the error (e.g. "operator" when an operator holds the session). */
  state?: string;
  /** The policy rule that decided. */
  rule?: string;
  /** The input key or config field concerned. */
  key?: string;
  /** Config errors: the file, line and every problem found. */
  file?: string;
  line?: number;
  problems?: string[];
  /** Remote work: the server concerned (inventory name). */
  server?: string;
  /** A host key that changed: the fingerprint on record and the one the server offered. */
  host_key?: { known: string; offered: string };
  /** Audit errors: where the hash chain is broken. */
  broken?: { seq: number | null; segment: string; line: number; reason: string };
  /** Approvals: distinct approvers so far and needed. */
  votes?: number;
  quorum?: number;
  /** Quotas: the bounds that were reached. */
  per_owner?: number;
  total?: number;
  /** BUDGET_EXCEEDED: which budget, for whom, how much, and when it resets (ISO, or null). */
  budget?: string;
  scope?: string;
  scope_key?: string;
  metric?: string;
  limit?: number;
  used?: number;
  reserved?: number;
  reset_at?: string | null;
}

export interface TermadaErrorOptions {
  cause?: unknown;
  /** What the caller can do about it; shown to agents. */
  hint?: string;
  /** Structured facts for the caller (e.g. the running job id). */
  details?: ErrorDetails;
  retriable?: boolean;
}

/** The wire shape of an error (MCP `structuredContent.error`, HTTP bodies). */
export interface ErrorBody {
  code: ErrorCode;
  message: string;
  retriable: boolean;
  hint?: string;
  details?: ErrorDetails;
}

/** The one error type of the domain. Subclass only for conditions callers catch. */
export class TermadaError extends Error {
  readonly code: ErrorCode;
  readonly hint: string | undefined;
  readonly details: ErrorDetails | undefined;
  readonly retriable: boolean;

  constructor(code: ErrorCode, message: string, options: TermadaErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "TermadaError";
    this.code = code;
    this.hint = options.hint;
    this.details = options.details;
    this.retriable = options.retriable ?? RETRIABLE.has(code);
  }

  /** The wire shape used by MCP results and HTTP bodies. */
  toJSON(): ErrorBody {
    return {
      code: this.code,
      message: this.message,
      retriable: this.retriable,
      ...(this.hint === undefined ? {} : { hint: this.hint }),
      ...(this.details === undefined || Object.keys(this.details).length === 0
        ? {}
        : { details: this.details }),
    };
  }
}

export function invalidArgument(message: string, hint?: string): TermadaError {
  return new TermadaError("INVALID_ARGUMENT", message, { hint });
}

export function notFound(what: string, id: string): TermadaError {
  return new TermadaError("NOT_FOUND", `No ${what} "${id}"`, {
    hint: `List yours with ${what === "job" ? "exec_list" : "session_list"}`,
  });
}

/** Wraps anything thrown into a TermadaError (unknown errors become INTERNAL). */
export function toTermadaError(err: unknown): TermadaError {
  if (err instanceof TermadaError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new TermadaError("INTERNAL", `Internal error: ${message}`, { cause: err });
}
