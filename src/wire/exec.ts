/**
 * Commands and jobs on the wire (TOOLS.md "Commands and jobs"): the input of each exec_* tool and
 * the result it returns. The MCP tools, the HTTP routes and the dashboard take these shapes from
 * here; domain code takes the parsed (output) types.
 */
import { z } from "zod";
import {
  PARSE_LIMITS,
  ParsedOutput,
  ParseError,
  PARSER_NAMES,
  ParseWarning,
} from "../parse/mod.ts";
import {
  Command,
  Cursor,
  EnvMap,
  Id,
  LIMITS,
  Ms,
  NUL_MESSAGE,
  oneSession,
  Path,
  sameSession,
  SESSION_CONFLICT,
  utf8Length,
  VaultName,
} from "./common.ts";
import { JOB_MODES, JOB_STATUSES, SIGNAL_NAMES, WAIT_MATCHES } from "./statuses.ts";

export const ExecMode = z.enum(["auto", "foreground", "background"]);
export type ExecMode = z.infer<typeof ExecMode>;

const START = {
  command: Command,
  /** The session to run in (alias: `session_id`, the name every result uses). */
  session: Id.optional(),
  session_id: Id.optional(),
  env: EnvMap.optional(),
  cwd: Path.optional(),
  mode: ExecMode.optional(),
};

export const ExecStartInput = z.strictObject(START).refine(sameSession, SESSION_CONFLICT)
  .transform(oneSession);
export type ExecStartInput = z.output<typeof ExecStartInput>;

/** `parse`: a parser's name, or `auto` (chosen by the argv; the result names it). */
export const ParserName = z.enum(["auto", ...PARSER_NAMES] as [string, ...string[]]);

export const ExecRunInput = z.strictObject({
  ...START,
  /** Wait budget; the job is never killed when it runs out. */
  timeout_ms: Ms(LIMITS.runWaitMs).optional(),
  /** Parse the output into typed JSON (`parsed`) once the job has ended (docs/PARSERS.md). */
  parse: ParserName.optional(),
}).refine(sameSession, SESSION_CONFLICT).transform(oneSession);
export type ExecRunInput = z.output<typeof ExecRunInput>;

export const ExecPollInput = z.strictObject({
  job_id: Id,
  /** Parse the job's whole output into typed JSON (`parsed`) once it has ended. */
  parse: ParserName.optional(),
  cursor: Cursor.optional(),
  wait_ms: Ms(LIMITS.pollWaitMs).optional(),
  max_bytes: z.number().int().min(1).max(LIMITS.pageBytes).optional(),
});
export type ExecPollInput = z.output<typeof ExecPollInput>;

export const WaitUntil = z.strictObject({
  exit: z.boolean().optional(),
  pattern: z.string().min(1).max(LIMITS.patternChars).optional(),
  prompt: z.boolean().optional(),
  idle_ms: z.number().int().min(1).max(LIMITS.runWaitMs).optional(),
});
export type WaitUntil = z.output<typeof WaitUntil>;

export const ExecWaitInput = z.strictObject({
  job_id: Id,
  until: WaitUntil.optional(),
  timeout_ms: Ms(LIMITS.runWaitMs).optional(),
  cursor: Cursor.optional(),
  max_bytes: z.number().int().min(1).max(LIMITS.pageBytes).optional(),
});
export type ExecWaitInput = z.output<typeof ExecWaitInput>;

/** One key name or text of exec_write `keys` (no NUL: `C-@` types one). */
const KeyText = z.string().min(1).max(LIMITS.inputBytes).refine(
  (s) => !s.includes("\0"),
  NUL_MESSAGE,
);

export const ExecWriteInput = z.strictObject({
  job_id: Id,
  input: z.string().max(LIMITS.inputBytes).refine((s) => !s.includes("\0"), NUL_MESSAGE)
    .refine((s) => utf8Length(s) <= LIMITS.inputBytes, {
      message: `must be at most ${LIMITS.inputBytes} bytes`,
    }).optional(),
  /** Types the value of this vault entry instead of `input` (a password prompt). */
  vault: VaultName.optional(),
  /**
   * Keys named like tmux send-keys (`Escape`, `Enter`, `C-c`, `Up`, `F2`, `M-x`…); any other
   * string is typed as text; `{text}` is always text, `{paste}` is pasted (bracketed when the
   * program asked for it). At most 256 entries, 64 KiB typed.
   */
  keys: z.array(
    z.union([
      KeyText,
      z.strictObject({ text: KeyText }),
      z.strictObject({ paste: KeyText }),
    ]),
  ).min(1).max(256).optional(),
  /** Force bracketed paste on or off for `{paste}` keys (default: what the program asked). */
  bracketed: z.boolean().optional(),
  /**
   * A person types the answer (a password) on a one-time page of the daemon: the result gives
   * its `url` (and clients that support URL elicitation open it); the value goes to the
   * program and the redactor, never to the agent. Only at a prompt.
   */
  human: z.strictObject({
    message: z.string().max(300).refine((s) => !s.includes("\0"), NUL_MESSAGE).optional(),
  }).optional(),
  append_newline: z.boolean().optional(),
  secret: z.boolean().optional(),
}).refine(
  (v) => [v.input, v.vault, v.keys, v.human].filter((x) => x !== undefined).length === 1,
  { message: 'needs exactly one of "input", "vault", "keys" and "human"', path: ["input"] },
);
export type ExecWriteInput = z.output<typeof ExecWriteInput>;

export const ExecSignalInput = z.strictObject({ job_id: Id, signal: z.enum(SIGNAL_NAMES) });
export type ExecSignalInput = z.output<typeof ExecSignalInput>;

export const ExecKillInput = z.strictObject({
  job_id: Id,
  grace_ms: Ms(LIMITS.killGraceMs).optional(),
});
export type ExecKillInput = z.output<typeof ExecKillInput>;

export const ExecListInput = z.strictObject({
  filter: z.enum(["active", "recent", "all"]).optional(),
  limit: z.number().int().min(1).max(LIMITS.listLimit).optional(),
});
export type ExecListInput = z.output<typeof ExecListInput>;

// ── results ────────────────────────────────────────────────────────────────

export const JobStatusSchema = z.enum(JOB_STATUSES);

/** Bytes dropped by retention between two offsets of a job's output. */
export const Gap = z.object({
  from_offset: z.number().int(),
  to_offset: z.number().int(),
  dropped_bytes: z.number().int(),
});
export type Gap = z.infer<typeof Gap>;

/** A job with a page of its output: exec_run, exec_poll, exec_wait, exec_kill. */
export const JobResult = z.object({
  job_id: z.string(),
  session_id: z.string(),
  command: z.array(z.string()),
  status: JobStatusSchema,
  exit_code: z.number().int().optional(),
  signal: z.string().optional(),
  /** Why it ended the way it did (denied, failed, killed, orphaned…). */
  /** Said once after a session on a server reconnected: a fresh shell, cwd and env reset. */
  notice: z.string().optional(),
  reason: z.string().optional(),
  output: z.string(),
  tail: z.string().optional(),
  omitted_bytes: z.number().int().optional(),
  next_cursor: z.string(),
  has_more: z.boolean(),
  gap: Gap.optional(),
  awaiting_input: z.boolean().optional(),
  prompt: z.string().optional(),
  input_detection: z.enum(["kernel", "heuristic"]).optional(),
  approval_id: z.string().optional(),
  cwd: z.string().optional(),
  duration_ms: z.number().int(),
  waited_ms: z.number().int().optional(),
  matched: z.enum(WAIT_MATCHES).optional(),
  match: z.string().optional(),
  /**
   * Programs this job tried to run that the exec gate stopped at `execve` (EACCES), newest last
   * (at most 8): which file, under which names, and the rule or reason.
   */
  blocked: z.array(z.object({
    program: z.string(),
    path: z.string(),
    argv: z.array(z.string()),
    rule: z.string().optional(),
    reason: z.string(),
  })).optional(),
  /**
   * For a job that ended: processes it started that still run (`nohup server &`, a daemon it
   * forked). They are still its own: `exec_kill` on it ends them. At most 16 pids.
   */
  left_running: z.array(z.number().int()).optional(),
  /**
   * After a kill: the job's processes that could not be ended (empty: none is left — checked
   * through its cgroup or /proc, not by the prompt coming back), each with why.
   */
  survivors: z.array(z.object({
    pid: z.number().int(),
    comm: z.string(),
    state: z.string(),
    reason: z.string(),
  })).optional(),
});
export type JobResult = z.infer<typeof JobResult>;

/**
 * exec_run / exec_poll with `parse`: the job result plus the typed output. `parser` names the
 * parser used (also for `auto`); `parsed` is its result (`kind` tells which); `warnings` lists
 * lines it could not read; `parse_error` says why nothing could be parsed (still running, no
 * parser for this command, nothing it recognises); `parse_env` is what the command ran with for
 * a locale-independent output (`LC_ALL=C` for ls, ps, df…), when it was set.
 */
export const ParsedJobResult = JobResult.extend({
  parser: z.string().optional(),
  parsed: ParsedOutput.optional(),
  warnings: z.array(ParseWarning).max(PARSE_LIMITS.maxWarnings).optional(),
  parse_error: ParseError.optional(),
  parse_env: z.object({ LC_ALL: z.string() }).optional(),
});
export type ParsedJobResult = z.infer<typeof ParsedJobResult>;

export const JobStarted = z.object({
  job_id: z.string(),
  session_id: z.string(),
  status: JobStatusSchema,
  mode: z.enum(JOB_MODES),
  approval_id: z.string().optional(),
  /** Said once after a session on a server reconnected (as in JobResult). */
  notice: z.string().optional(),
});
export type JobStarted = z.infer<typeof JobStarted>;

/** exec_write and exec_signal. */
export const JobAck = z.object({
  ok: z.boolean(),
  job_id: z.string(),
  status: JobStatusSchema,
  /** exec_write {human}: the one-time page where a person types the answer, and until when. */
  url: z.string().optional(),
  expires_at: z.string().optional(),
});
export type JobAck = z.infer<typeof JobAck>;

export const JobSummary = z.object({
  job_id: z.string(),
  session_id: z.string(),
  command: z.array(z.string()),
  mode: z.enum(JOB_MODES),
  status: JobStatusSchema,
  exit_code: z.number().int().optional(),
  signal: z.string().optional(),
  started_at: z.string(),
  duration_ms: z.number().int(),
  cwd: z.string().optional(),
  /** Why it ended the way it did (denied, refused during stop-all, failed, killed…). */
  reason: z.string().optional(),
});
export type JobSummary = z.infer<typeof JobSummary>;

export const JobList = z.object({ jobs: z.array(JobSummary) });
export type JobList = z.infer<typeof JobList>;
