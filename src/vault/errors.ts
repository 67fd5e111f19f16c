import { type ErrorCode, TermadaError } from "../shared/mod.ts";

/** Why a vault operation failed; `VaultError.vaultCode`. */
export type VaultErrorCode =
  | "VAULT_EXISTS"
  | "VAULT_NOT_FOUND"
  | "VAULT_BAD_KEY"
  | "VAULT_CORRUPT"
  | "VAULT_BUSY"
  | "INVALID_ARGUMENT";

/**
 * The shared wire code each vault code travels as. The shared `ERROR_CODES` list is closed and
 * does not (yet) hold the VAULT_* codes, so they map onto the nearest existing one here, in one
 * place, and the precise code also goes out as `details.state`.
 */
const WIRE_CODE: Record<VaultErrorCode, ErrorCode> = {
  VAULT_EXISTS: "INVALID_ARGUMENT",
  VAULT_NOT_FOUND: "NOT_FOUND",
  VAULT_BAD_KEY: "VAULT_LOCKED",
  VAULT_CORRUPT: "INTERNAL",
  VAULT_BUSY: "SESSION_BUSY",
  INVALID_ARGUMENT: "INVALID_ARGUMENT",
};

/** A vault operation that failed for a reason the caller can act on (see `vaultCode`, `hint`). */
export class VaultError extends TermadaError {
  /** The precise vault condition; `code` is its shared wire code. */
  readonly vaultCode: VaultErrorCode;

  constructor(vaultCode: VaultErrorCode, message: string, options: VaultErrorOptions = {}) {
    super(WIRE_CODE[vaultCode], message, {
      cause: options.cause,
      hint: options.hint,
      details: { state: vaultCode },
      retriable: vaultCode === "VAULT_BUSY",
    });
    this.name = "VaultError";
    this.vaultCode = vaultCode;
  }
}

export interface VaultErrorOptions {
  cause?: unknown;
  /** What the operator can do about it. */
  hint?: string;
}

/** A value the caller passed that the vault refuses (name, kind, size, count, key format). */
export function badArgument(message: string, hint: string): VaultError {
  return new VaultError("INVALID_ARGUMENT", message, { hint });
}
