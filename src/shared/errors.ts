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
  "NOT_SUPPORTED",
  "INTERNAL",
] as const;

export type ErrorCode = typeof ERROR_CODES[number];

/** Codes a caller may simply retry later. */
const RETRIABLE: ReadonlySet<ErrorCode> = new Set([
  "SESSION_BUSY",
  "QUOTA_EXCEEDED",
  "SERVER_UNREACHABLE",
  "AUDIT_UNAVAILABLE",
]);

export interface TermadaErrorOptions {
  cause?: unknown;
  /** What the caller can do about it; shown to agents. */
  hint?: string;
  /** Structured facts for the caller (e.g. the running job id). */
  details?: Record<string, unknown>;
  retriable?: boolean;
}

/** The one error type of the domain. Subclass only for conditions callers catch. */
export class TermadaError extends Error {
  readonly code: ErrorCode;
  readonly hint: string | undefined;
  readonly details: Record<string, unknown> | undefined;
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
  toJSON():
    & { code: ErrorCode; message: string; retriable: boolean; hint?: string }
    & Record<
      string,
      unknown
    > {
    return {
      code: this.code,
      message: this.message,
      retriable: this.retriable,
      ...(this.hint === undefined ? {} : { hint: this.hint }),
      ...(this.details ?? {}),
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
