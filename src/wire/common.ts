/**
 * Building blocks of the wire schemas: bounds, ids, paths, env maps, argv, and `parseInput`, the
 * one place untrusted input becomes a typed value (or an INVALID_ARGUMENT naming the field).
 * Every object schema of agent input is strict: an unknown key is an error naming the key, never
 * silently ignored.
 */
import { z } from "zod";
import { invalidArgument } from "../shared/mod.ts";

/** Bounds of agent input, documented in docs/ENGINE.md. */
export const LIMITS = {
  argvWords: 4096,
  argvBytes: 1 << 20,
  wordBytes: 256 * 1024,
  inputBytes: 64 * 1024,
  envEntries: 256,
  envValueBytes: 32 * 1024,
  /** Names and values of one env map in all (UTF-8): it must fit a request (4 MiB). */
  envBytes: 256 * 1024,
  pathBytes: 4096,
  idBytes: 64,
  patternChars: 1024,
  runWaitMs: 600_000,
  pollWaitMs: 30_000,
  pageBytes: 65_536,
  listLimit: 200,
  killGraceMs: 60_000,
  workspaceChars: 128,
  targetChars: 128,
} as const;

const noNul = (s: string) => !s.includes("\0");
export const NUL_MESSAGE = "must not contain NUL bytes";
const encoder = new TextEncoder();
export const utf8Length = (s: string): number => encoder.encode(s).length;

/** A caller-supplied id (looked up, so any unknown one is NOT_FOUND, not a format error). */
export const Id = z.string().min(1).max(LIMITS.idBytes).regex(
  /^[A-Za-z0-9_.:-]+$/,
  "is not a valid id",
);
export const Path = z.string().min(1).max(LIMITS.pathBytes).refine(noNul, NUL_MESSAGE);
export const Cursor = z.string().min(1).max(64);
/** Free text of at most `max` characters, no NUL. */
export const Text = (max: number): z.ZodString =>
  z.string().min(1).max(max).refine(noNul, NUL_MESSAGE) as unknown as z.ZodString;

/** The name of a vault entry (src/vault). */
export const VaultName = z.string().regex(
  /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/,
  "is not a vault entry name (1-64 letters, digits, '.', '_', '-')",
);
/** `{vault: "<entry>"}`: a value the daemon injects from the vault; the caller never sees it. */
export const VaultRef = z.strictObject({ vault: VaultName });
export type VaultRef = z.output<typeof VaultRef>;

export const EnvMap = z.record(
  z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "is not a valid variable name").max(256),
  z.union([z.string().max(LIMITS.envValueBytes).refine(noNul, NUL_MESSAGE), VaultRef]),
).refine((m) => Object.keys(m).length <= LIMITS.envEntries, {
  message: `at most ${LIMITS.envEntries} variables`,
}).refine(
  (m) =>
    Object.entries(m).reduce(
      (n, [k, v]) => n + k.length + (typeof v === "string" ? utf8Length(v) : v.vault.length),
      0,
    ) <= LIMITS.envBytes,
  { message: `at most ${LIMITS.envBytes} bytes of names and values in all` },
);
export type EnvMap = z.output<typeof EnvMap>;

/**
 * An environment map split in two: plain values, and the variables that name a vault entry.
 * `shown` is what policy and audit see: plain values, and `[vault:<entry>]` for references.
 */
export function splitEnv(env: EnvMap | undefined): {
  plain: Record<string, string>;
  refs: { variable: string; entry: string }[];
  shown: Record<string, string>;
} {
  const plain: Record<string, string> = {};
  const shown: Record<string, string> = {};
  const refs: { variable: string; entry: string }[] = [];
  for (const [k, v] of Object.entries(env ?? {})) {
    if (typeof v === "string") plain[k] = shown[k] = v;
    else {
      refs.push({ variable: k, entry: v.vault });
      shown[k] = `[vault:${v.vault}]`;
    }
  }
  return { plain, refs, shown };
}

export const Command = z.array(z.string().max(LIMITS.wordBytes).refine(noNul, NUL_MESSAGE))
  .min(1, "must have at least one word")
  .max(LIMITS.argvWords)
  .refine((a) => (a[0] ?? "").trim() !== "", { message: "first word must not be empty" })
  .refine((a) => a.reduce((n, w) => n + utf8Length(w) + 1, 0) <= LIMITS.argvBytes, {
    message: `must be at most ${LIMITS.argvBytes} bytes in all`,
  });

/** Milliseconds from 0 to `max`. */
export const Ms = (max: number): z.ZodNumber => z.number().int().min(0).max(max);

/**
 * Parses untrusted input; a failure is INVALID_ARGUMENT naming the first bad field (an unknown
 * key by its name). The one parse of a request: callers below take the typed value.
 */
export function parseInput<T extends z.ZodType>(schema: T, input: unknown): z.output<T> {
  const r = schema.safeParse(input ?? {});
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const where = issue.path.map(String).join(".");
  if (issue.code === "unrecognized_keys") {
    const keys = issue.keys.map((k) => `"${where ? `${where}.` : ""}${k}"`).join(", ");
    throw invalidArgument(
      `Unknown argument${issue.keys.length > 1 ? "s" : ""} ${keys}`,
      "Remove it; the tool's inputSchema lists every argument it takes",
    );
  }
  if (issue.path.length === 0 && issue.code === "invalid_type") {
    throw invalidArgument(`Invalid input: expected an object of arguments`);
  }
  throw invalidArgument(`Invalid "${where || "input"}": ${issue.message}`);
}

/** `session` and `session_id` are one argument under two names; both given must agree. */
export function oneSession<T extends { session?: string; session_id?: string }>(
  v: T,
): Omit<T, "session_id"> & { session?: string } {
  const { session_id, ...rest } = v;
  const session = rest.session ?? session_id;
  return { ...rest, ...(session === undefined ? {} : { session }) };
}
export const sameSession = (v: { session?: string; session_id?: string }): boolean =>
  v.session === undefined || v.session_id === undefined || v.session === v.session_id;
export const SESSION_CONFLICT = {
  message: 'names another session than "session" (they are one argument)',
  path: ["session_id"],
};
