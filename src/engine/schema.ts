/**
 * Input schemas of the engine's operations, shared by the MCP tools and HTTP routes so the two
 * cannot drift. Field names are the wire names of TOOLS.md. Every string, array and number is
 * bounded; parse errors become INVALID_ARGUMENT through `parseInput`.
 */
import { z } from "zod";
import { invalidArgument } from "../shared/mod.ts";

/** Bounds, documented in docs/ENGINE.md. */
export const LIMITS = {
  argvWords: 4096,
  argvBytes: 1 << 20,
  wordBytes: 256 * 1024,
  inputBytes: 64 * 1024,
  envEntries: 256,
  envValueBytes: 32 * 1024,
  pathBytes: 4096,
  idBytes: 64,
  patternChars: 1024,
  runWaitMs: 600_000,
  pollWaitMs: 30_000,
  pageBytes: 65_536,
  listLimit: 200,
  killGraceMs: 60_000,
} as const;

const noNul = (s: string) => !s.includes("\0");
const NUL_MESSAGE = "must not contain NUL bytes";
const utf8Length = (s: string) => new TextEncoder().encode(s).length;

const Id = z.string().min(1).max(LIMITS.idBytes).regex(/^[A-Za-z0-9_.:-]+$/, "is not a valid id");
const Path = z.string().min(1).max(LIMITS.pathBytes).refine(noNul, NUL_MESSAGE);
const EnvMap = z.record(
  z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "is not a valid variable name").max(256),
  z.string().max(LIMITS.envValueBytes).refine(noNul, NUL_MESSAGE),
).refine((m) => Object.keys(m).length <= LIMITS.envEntries, {
  message: `at most ${LIMITS.envEntries} variables`,
});

export const Command = z.array(z.string().max(LIMITS.wordBytes).refine(noNul, NUL_MESSAGE))
  .min(1, "must have at least one word")
  .max(LIMITS.argvWords)
  .refine((a) => (a[0] ?? "").trim() !== "", { message: "first word must not be empty" })
  .refine((a) => a.reduce((n, w) => n + utf8Length(w) + 1, 0) <= LIMITS.argvBytes, {
    message: `must be at most ${LIMITS.argvBytes} bytes in all`,
  });

export const ExecMode = z.enum(["auto", "foreground", "background"]);
export type ExecMode = z.infer<typeof ExecMode>;

export const ExecStartInput = z.object({
  command: Command,
  session: Id.optional(),
  env: EnvMap.optional(),
  cwd: Path.optional(),
  mode: ExecMode.optional(),
});
export type ExecStartInput = z.infer<typeof ExecStartInput>;

export const ExecRunInput = ExecStartInput.extend({
  timeout_ms: z.number().int().min(0).max(LIMITS.runWaitMs).optional(),
});
export type ExecRunInput = z.infer<typeof ExecRunInput>;

const Cursor = z.string().min(1).max(64);

export const ExecPollInput = z.object({
  job_id: Id,
  cursor: Cursor.optional(),
  wait_ms: z.number().int().min(0).max(LIMITS.pollWaitMs).optional(),
  max_bytes: z.number().int().min(1).max(LIMITS.pageBytes).optional(),
});
export type ExecPollInput = z.infer<typeof ExecPollInput>;

export const WaitUntil = z.object({
  exit: z.boolean().optional(),
  pattern: z.string().min(1).max(LIMITS.patternChars).optional(),
  prompt: z.boolean().optional(),
  idle_ms: z.number().int().min(1).max(LIMITS.runWaitMs).optional(),
});
export type WaitUntil = z.infer<typeof WaitUntil>;

export const ExecWaitInput = z.object({
  job_id: Id,
  until: WaitUntil.optional(),
  timeout_ms: z.number().int().min(0).max(LIMITS.runWaitMs).optional(),
  cursor: Cursor.optional(),
  max_bytes: z.number().int().min(1).max(LIMITS.pageBytes).optional(),
});
export type ExecWaitInput = z.infer<typeof ExecWaitInput>;

export const ExecWriteInput = z.object({
  job_id: Id,
  input: z.string().max(LIMITS.inputBytes).refine(noNul, NUL_MESSAGE)
    .refine((s) => utf8Length(s) <= LIMITS.inputBytes, {
      message: `must be at most ${LIMITS.inputBytes} bytes`,
    }),
  append_newline: z.boolean().optional(),
  secret: z.boolean().optional(),
});
export type ExecWriteInput = z.infer<typeof ExecWriteInput>;

export const SIGNAL_NAMES = ["INT", "TERM", "KILL", "HUP", "QUIT", "TSTP", "CONT"] as const;
export const ExecSignalInput = z.object({ job_id: Id, signal: z.enum(SIGNAL_NAMES) });
export type ExecSignalInput = z.infer<typeof ExecSignalInput>;

export const ExecKillInput = z.object({
  job_id: Id,
  grace_ms: z.number().int().min(0).max(LIMITS.killGraceMs).optional(),
});
export type ExecKillInput = z.infer<typeof ExecKillInput>;

export const ExecListInput = z.object({
  filter: z.enum(["active", "recent", "all"]).optional(),
  limit: z.number().int().min(1).max(LIMITS.listLimit).optional(),
});
export type ExecListInput = z.infer<typeof ExecListInput>;

export const ShellName = z.enum(["bash", "zsh", "sh"]);

export const SessionCreateInput = z.object({
  target: z.string().min(1).max(128).optional(),
  workspace: z.string().min(1).max(128).refine(noNul, NUL_MESSAGE).optional(),
  shell: ShellName.optional(),
  cwd: Path.optional(),
  env: EnvMap.optional(),
  cols: z.number().int().min(10).max(1000).optional(),
  rows: z.number().int().min(2).max(500).optional(),
});
export type SessionCreateInput = z.infer<typeof SessionCreateInput>;

export const SessionIdInput = z.object({ session_id: Id });
export type SessionIdInput = z.infer<typeof SessionIdInput>;

export const SessionResizeInput = z.object({
  session_id: Id,
  cols: z.number().int().min(10).max(1000),
  rows: z.number().int().min(2).max(500),
});
export type SessionResizeInput = z.infer<typeof SessionResizeInput>;

/** Parses untrusted input; a failure is INVALID_ARGUMENT naming the first bad field. */
export function parseInput<T extends z.ZodType>(schema: T, input: unknown): z.infer<T> {
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const where = issue.path.length > 0 ? issue.path.join(".") : "input";
  throw invalidArgument(`Invalid "${where}": ${issue.message}`);
}
