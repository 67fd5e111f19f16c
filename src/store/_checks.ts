/**
 * Input bounds, row conversions and statement helpers shared by the store's tables. The store is
 * the last line before disk: it refuses what no caller should ever send, with the same
 * INVALID_ARGUMENT the edges use.
 */
import type { SQLInputValue } from "node:sqlite";
import { checkJson, invalidArgument, TermadaError } from "../shared/mod.ts";
import { JOB_STATUSES, type JobStatus } from "../wire/mod.ts";

/** Longest id (agent, session, job, owner) the store accepts. */
export const MAX_ID_LENGTH = 64;
/** Longest `command` of a job, as UTF-8 JSON. */
export const MAX_COMMAND_JSON_BYTES = 1024 * 1024;
/** Longest free text (paths, names, reasons); PATH_MAX on Linux is 4096 bytes. */
export const MAX_TEXT_LENGTH = 4096;
/** Most rows one list call returns. */
export const MAX_LIST_LIMIT = 10_000;
/**
 * Hard cap of a job's output kept inline with its row (`jobs.output`). The caller picks its own,
 * smaller limit; this one only keeps a row from ever carrying a large blob.
 */
export const MAX_INLINE_OUTPUT_BYTES = 64 * 1024;

export type Row = Record<string, unknown>;
export type Params = Record<string, SQLInputValue>;

const encoder = new TextEncoder();

// ── input bounds ───────────────────────────────────────────────────────────
// The store is the last line before disk: it refuses what no caller should ever send, with the
// same INVALID_ARGUMENT the edges use.

export function checkId(what: string, value: unknown): string {
  if (typeof value !== "string" || value.length === 0 || value.length > MAX_ID_LENGTH) {
    const shown = typeof value !== "string"
      ? String(value)
      : `"${value.length > 40 ? value.slice(0, 40) + "…" : value}"`;
    throw invalidArgument(
      `Cannot store ${what} ${shown}: it must be 1 to ${MAX_ID_LENGTH} characters`,
    );
  }
  return value;
}

export function checkText(what: string, value: unknown, max = MAX_TEXT_LENGTH): string {
  if (typeof value !== "string" || value.length > max) {
    throw invalidArgument(
      typeof value === "string"
        ? `Cannot store ${what}: it is longer than ${max} characters`
        : `Cannot store ${what}: it must be a string`,
    );
  }
  return value;
}

export function checkNullableText(what: string, value: unknown): string | null {
  return value === null ? null : checkText(what, value);
}

export function checkInt(
  what: string,
  value: unknown,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min || value > max) {
    throw invalidArgument(
      `Cannot store ${what} ${String(value)}: it must be an integer from ${min} to ${max}`,
    );
  }
  return value;
}

export function checkNullableInt(what: string, value: unknown, min: number): number | null {
  return value === null ? null : checkInt(what, value, min);
}

export function checkTime(what: string, value: unknown): number {
  return checkInt(what, value, 0);
}

export function checkStatus(value: unknown): JobStatus {
  return checkOneOf("job status", value, JOB_STATUSES);
}

export function checkOneOf<T extends string>(
  what: string,
  value: unknown,
  allowed: readonly T[],
): T {
  if (!allowed.includes(value as T)) {
    throw invalidArgument(
      `Cannot store ${what} "${String(value).slice(0, 40)}": it must be one of ${
        allowed.join(", ")
      }`,
    );
  }
  return value as T;
}

export function checkCommand(value: unknown): string {
  if (!Array.isArray(value) || !value.every((w) => typeof w === "string")) {
    throw invalidArgument("Cannot store the command of a job: it must be an array of strings");
  }
  const json = JSON.stringify(value);
  // UTF-16 length ≤ UTF-8 length ≤ 3 × UTF-16 length: encode only when the bound cannot decide.
  const bytes = json.length * 3 <= MAX_COMMAND_JSON_BYTES || json.length > MAX_COMMAND_JSON_BYTES
    ? json.length
    : encoder.encode(json).byteLength;
  if (bytes > MAX_COMMAND_JSON_BYTES) {
    throw invalidArgument(
      `Cannot store the command of a job: it is larger than ${MAX_COMMAND_JSON_BYTES} bytes as JSON`,
      "Stage a long script in a file and run that file",
    );
  }
  return json;
}

export function checkNullableSha256(what: string, value: unknown): string | null {
  if (value === null) return null;
  if (typeof value !== "string" || !/^[0-9a-f]{64}$/.test(value)) {
    throw invalidArgument(`Cannot store ${what}: it must be 64 lowercase hex characters`);
  }
  return value;
}

/** A job's inline output: bytes of at most MAX_INLINE_OUTPUT_BYTES, or null. */
export function checkNullableOutput(value: unknown): Uint8Array | null {
  if (value === null) return null;
  if (!(value instanceof Uint8Array)) {
    throw invalidArgument("Cannot store the output of a job: it must be bytes (a Uint8Array)");
  }
  if (value.byteLength > MAX_INLINE_OUTPUT_BYTES) {
    throw invalidArgument(
      `Cannot store the output of a job inline: it is ${value.byteLength} bytes, over ${MAX_INLINE_OUTPUT_BYTES}`,
      "Keep larger output in the spool only and store null",
    );
  }
  return value;
}

export function checkLimit(value: unknown): number {
  return checkInt("list limit", value, 1, MAX_LIST_LIMIT);
}

// ── rows ───────────────────────────────────────────────────────────────────

export const str = (v: unknown): string => v as string;
export const strOrNull = (v: unknown): string | null => (v === null ? null : (v as string));
export const num = (v: unknown): number => v as number;
export const numOrNull = (v: unknown): number | null => (v === null ? null : (v as number));

export function patchSql(table: string, columns: readonly string[]): string {
  const sets = columns.map((c) => `${c} = CASE WHEN :set_${c} THEN :${c} ELSE ${c} END`);
  return `UPDATE ${table} SET ${sets.join(", ")} WHERE id = :id`;
}

/** Binds a patch for patchSql: absent (or undefined) keys keep the stored value. */
export function patchParams(
  id: string,
  columns: readonly string[],
  values: Record<string, SQLInputValue | undefined>,
): Params {
  const params: Params = { id };
  for (const c of columns) {
    const v = values[c];
    params[`set_${c}`] = v === undefined ? 0 : 1;
    params[c] = v === undefined ? null : v;
  }
  return params;
}

/** Runs one statement (or a transaction) with the store's error mapping, naming `action`. */
export type StoreRunner = <T>(action: string, fn: () => T) => T;

/** What `Store` hands each repository: `run` for a statement, `tx` for a transaction. */
export interface StoreRunners {
  run: StoreRunner;
  tx: StoreRunner;
}

export function storeError(action: string, err: unknown): TermadaError {
  if (err instanceof TermadaError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new TermadaError("INTERNAL", `Cannot ${action}: ${message}`, { cause: err });
}

/** A value stored as JSON text (summaries, outcomes, votes): the shared check. */
export { checkJson };

/** An array of at most `maxItems` strings of at most `maxLength` characters each. */
export function checkStrings(
  what: string,
  value: unknown,
  maxItems: number,
  maxLength: number,
): string[] {
  if (
    !Array.isArray(value) || value.length > maxItems ||
    !value.every((s) => typeof s === "string" && s.length <= maxLength)
  ) {
    throw invalidArgument(
      `Cannot store ${what}: it must be at most ${maxItems} strings of at most ${maxLength} characters`,
    );
  }
  return value as string[];
}
