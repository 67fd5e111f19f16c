/** Sessions on the wire (TOOLS.md "Sessions"): session_* inputs and results. */
import { z } from "zod";
import { EnvMap, Id, LIMITS, NUL_MESSAGE, Path } from "./common.ts";
import { SESSION_STATES, SHELLS } from "./statuses.ts";

export const ShellName = z.enum(SHELLS);
export const Cols = z.number().int().min(10).max(1000);
export const Rows = z.number().int().min(2).max(500);

export const SessionCreateInput = z.strictObject({
  /** `local` (default) or the name of a registered server. */
  target: z.string().min(1).max(LIMITS.targetChars).optional(),
  workspace: z.string().min(1).max(LIMITS.workspaceChars).refine(
    (s) => !s.includes("\0"),
    NUL_MESSAGE,
  ).optional(),
  shell: ShellName.optional(),
  cwd: Path.optional(),
  env: EnvMap.optional(),
  cols: Cols.optional(),
  rows: Rows.optional(),
});
export type SessionCreateInput = z.output<typeof SessionCreateInput>;

export const SessionIdInput = z.strictObject({ session_id: Id });
export type SessionIdInput = z.output<typeof SessionIdInput>;

export const SessionResizeInput = z.strictObject({ cols: Cols, rows: Rows });
export type SessionResizeInput = z.output<typeof SessionResizeInput>;

export const SessionInfo = z.object({
  session_id: z.string(),
  target: z.string(),
  shell: ShellName,
  cwd: z.string(),
  workspace: z.string().optional(),
  state: z.enum(SESSION_STATES),
  current_job_id: z.string().optional(),
  cols: z.number().int(),
  rows: z.number().int(),
  created_at: z.string(),
  /** An operator holds back what agents read from this session's job. */
  output_paused: z.boolean().optional(),
  /**
   * A session on a server: its link. After a drop it reconnects with a fresh shell (cwd and
   * environment reset); the job that ran ends `orphaned`.
   */
  link: z.object({
    state: z.enum(["up", "reconnecting"]),
    reconnects: z.number().int(),
    last_error: z.string().optional(),
  }).optional(),
});
export type SessionInfo = z.infer<typeof SessionInfo>;

export const SessionList = z.object({ sessions: z.array(SessionInfo) });
export type SessionList = z.infer<typeof SessionList>;

export const SessionClosed = z.object({ ok: z.boolean(), session_id: z.string() });
export type SessionClosed = z.infer<typeof SessionClosed>;

/** session_screen: `since` (a `next_cursor` of an earlier read) asks for the changed rows only. */
export const SessionScreenInput = z.strictObject({
  session_id: Id,
  since: z.string().min(1).max(64).optional(),
});
export type SessionScreenInput = z.output<typeof SessionScreenInput>;

export const Screen = z.object({
  session_id: z.string(),
  /** Every row, top to bottom, when `full`; empty when only `changes` are given. */
  lines: z.array(z.string()),
  cursor: z.object({ x: z.number().int(), y: z.number().int() }),
  cols: z.number().int(),
  rows: z.number().int(),
  title: z.string(),
  /** The program switched to the alternate screen (vi, less, top). */
  alternate: z.boolean(),
  /** `lines` holds the whole screen (no `since`, or one from before a resize or restart). */
  full: z.boolean(),
  /** With `since` and not `full`: the rows whose text changed since then. */
  changes: z.array(z.object({ row: z.number().int(), text: z.string() })).optional(),
  /** Pass as `since` to the next read. */
  next_cursor: z.string(),
  /** What the program asked of the terminal: keys and pastes follow these. */
  modes: z.object({ application_cursor: z.boolean(), bracketed_paste: z.boolean() }),
});
export type Screen = z.infer<typeof Screen>;
