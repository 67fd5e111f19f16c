/**
 * Why an install or update was refused. One class: `termada update` prints its message as one
 * line and `reason` in --json; the shared wire code underneath is only a carrier.
 */
import { type ErrorCode, TermadaError } from "../shared/mod.ts";

export type UpdateReason =
  | "DOWNLOAD_FAILED"
  | "NOT_FOUND"
  | "TRUNCATED"
  | "TOO_LARGE"
  | "CHECKSUM_MISMATCH"
  | "BAD_SIGNATURE"
  | "SIGNATURE_REQUIRED"
  | "BAD_ARCHIVE"
  | "BAD_BINARY"
  | "BUSY"
  | "FROM_SOURCE"
  | "NOT_WRITABLE";

const CODE: Partial<Record<UpdateReason, ErrorCode>> = {
  DOWNLOAD_FAILED: "SERVER_UNREACHABLE",
  NOT_FOUND: "NOT_FOUND",
  BUSY: "SESSION_BUSY",
  FROM_SOURCE: "NOT_SUPPORTED",
};

export class UpdateError extends TermadaError {
  readonly reason: UpdateReason;
  constructor(
    reason: UpdateReason,
    message: string,
    options: { cause?: unknown; hint?: string } = {},
  ) {
    super(CODE[reason] ?? "INTERNAL", message, options);
    this.reason = reason;
  }
}
