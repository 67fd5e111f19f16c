/**
 * The status vocabularies of the wire contract, as plain constant arrays (no zod here, so the
 * dashboard can import them at run time without the schema library). Every other folder takes
 * its status sets from this file.
 */

/** A job's life: see docs/ENGINE.md (job states). */
export const JOB_STATUSES = [
  "pending_approval",
  "running",
  "awaiting_input",
  "exited",
  "killed",
  "timed_out",
  "denied",
  "failed",
  "orphaned",
] as const;
export type JobStatus = typeof JOB_STATUSES[number];

/** A job that has not ended: it may still run, wait for input, or wait for an operator. */
export const ACTIVE_JOB_STATUSES = ["pending_approval", "running", "awaiting_input"] as const;
export const FINAL_JOB_STATUSES = [
  "exited",
  "killed",
  "timed_out",
  "denied",
  "failed",
  "orphaned",
] as const;

const FINAL: ReadonlySet<string> = new Set(FINAL_JOB_STATUSES);
const ACTIVE: ReadonlySet<string> = new Set(ACTIVE_JOB_STATUSES);
/** True for a status after which nothing changes. */
export const isFinalStatus = (s: string): boolean => FINAL.has(s);
/** True for a job that has not ended. */
export const isActiveStatus = (s: string): boolean => ACTIVE.has(s);

/** What agents see of a session. */
export const SESSION_STATES = ["ready", "busy", "operator"] as const;
export type SessionState = typeof SESSION_STATES[number];

export const JOB_MODES = ["foreground", "background"] as const;
export type JobMode = typeof JOB_MODES[number];

export const SHELLS = ["bash", "zsh", "sh"] as const;
export type ShellName = typeof SHELLS[number];

export const SIGNAL_NAMES = ["INT", "TERM", "KILL", "HUP", "QUIT", "TSTP", "CONT"] as const;

export const WAIT_MATCHES = ["exit", "pattern", "prompt", "idle", "timeout"] as const;
export type Matched = typeof WAIT_MATCHES[number];

export const APPROVAL_STATUSES = ["pending", "approved", "denied", "expired"] as const;
export type ApprovalStatus = typeof APPROVAL_STATUSES[number];

export const MISSION_STATUSES = [
  "planned",
  "running",
  "needs_attention",
  "interrupted",
  "succeeded",
  "failed",
  "cancelled",
] as const;
export type MissionStatus = typeof MISSION_STATUSES[number];
export const TERMINAL_MISSION_STATUSES = ["succeeded", "failed", "cancelled"] as const;
const TERMINAL_MISSION: ReadonlySet<string> = new Set(TERMINAL_MISSION_STATUSES);
export const isTerminalMission = (s: string): boolean => TERMINAL_MISSION.has(s);

export const STEP_STATUSES = ["pending", "running", "passed", "failed", "skipped"] as const;
export type StepStatus = typeof STEP_STATUSES[number];
