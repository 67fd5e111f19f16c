import { type ErrorCode, type ErrorDetails, TermadaError } from "../shared/mod.ts";

/** Why a snapshot operation failed; `SnapshotError.snapshotCode`. */
export type SnapshotErrorCode =
  | "SNAPSHOT_TOO_LARGE"
  | "SNAPSHOT_NOT_FOUND"
  | "SNAPSHOT_CORRUPT"
  | "SNAPSHOT_BUSY"
  | "INVALID_ARGUMENT";

/**
 * The shared wire code each snapshot code travels as. The shared `ERROR_CODES` list is closed
 * and does not (yet) hold SNAPSHOT_* codes, so they map onto the nearest existing one here, in
 * one place; the precise code also goes out as `details.state`.
 */
const WIRE_CODE: Record<SnapshotErrorCode, ErrorCode> = {
  SNAPSHOT_TOO_LARGE: "QUOTA_EXCEEDED",
  SNAPSHOT_NOT_FOUND: "NOT_FOUND",
  SNAPSHOT_CORRUPT: "INTERNAL",
  SNAPSHOT_BUSY: "SESSION_BUSY",
  INVALID_ARGUMENT: "INVALID_ARGUMENT",
};

export interface SnapshotErrorOptions {
  cause?: unknown;
  /** What the caller can do about it. */
  hint?: string;
  /** Which limit or input (`key`), its bound (`limit`) and what was found (`used`). */
  details?: Pick<ErrorDetails, "key" | "limit" | "used">;
}

/** A snapshot operation that failed for a reason the caller can act on (see `snapshotCode`). */
export class SnapshotError extends TermadaError {
  /** The precise snapshot condition; `code` is its shared wire code. */
  readonly snapshotCode: SnapshotErrorCode;

  constructor(
    snapshotCode: SnapshotErrorCode,
    message: string,
    options: SnapshotErrorOptions = {},
  ) {
    super(WIRE_CODE[snapshotCode], message, {
      cause: options.cause,
      hint: options.hint,
      details: { state: snapshotCode, ...options.details },
      // Only a held lock passes by itself; a too-large tree stays too large.
      retriable: snapshotCode === "SNAPSHOT_BUSY",
    });
    this.name = "SnapshotError";
    this.snapshotCode = snapshotCode;
  }
}

/** A limit of a snapshot was reached (`key` names it, as in the options). */
export function tooLarge(dir: string, key: string, limit: number, used: number): SnapshotError {
  return new SnapshotError(
    "SNAPSHOT_TOO_LARGE",
    `Cannot snapshot "${dir}": ${key} ${limit} exceeded (${used} found)`,
    {
      hint: key === "max_file_bytes" || key === "max_bytes"
        ? "Exclude large or generated paths, or raise the limit"
        : "Snapshot a smaller directory, add excludes, or raise the limit",
      details: { key, limit, used },
    },
  );
}

export function badArgument(message: string, key?: string): SnapshotError {
  return new SnapshotError(
    "INVALID_ARGUMENT",
    message,
    key === undefined ? {} : {
      details: { key },
    },
  );
}

export function snapshotNotFound(id: string): SnapshotError {
  return new SnapshotError("SNAPSHOT_NOT_FOUND", `No snapshot "${id}"`, {
    hint: "List snapshots to see which exist",
  });
}

export function corruptManifest(id: string, what: string): SnapshotError {
  return new SnapshotError("SNAPSHOT_CORRUPT", `Snapshot "${id}" is unusable: ${what}`, {
    hint: `Remove it with removeSnapshot("${id}")`,
  });
}
