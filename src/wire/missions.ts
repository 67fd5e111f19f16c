/**
 * Missions on the wire (docs/MISSION.md): the mission_* inputs, the mission as agents and
 * operators see it, and the evidence report. Bounds are those of docs/MISSION.md.
 */
import { z } from "zod";
import { Id, LIMITS, Path, Text } from "./common.ts";
import { ShellName } from "./sessions.ts";
import { APPROVAL_STATUSES, JOB_STATUSES, MISSION_STATUSES, STEP_STATUSES } from "./statuses.ts";
import { idPattern } from "../shared/mod.ts";

/** Longest goal, step text, title, note and summary (the store checks the same bounds). */
export const MISSION_TEXT_LIMITS = {
  goal: 4000,
  step: 300,
  title: 120,
  note: 2000,
  summary: 8000,
} as const;

export const MISSION_LIMITS = {
  ...MISSION_TEXT_LIMITS,
  steps: 24,
  /** Missions of one agent that are not terminal. */
  activePerAgent: 16,
  timeline: 512,
  anchors: 4096,
  attempts: 32,
  listLimit: 200,
  /** Timeline entries in a `mission_get` result (the operator route returns all). */
  timelineInView: 50,
} as const;

export const MissionId = z.string().regex(idPattern("msn"), "is not a mission id");
export const StepId = z.string().regex(/^s([1-9]|1[0-9]|2[0-4])$/, "is not a step id (s1 … s24)");

export const MissionCreateInput = z.strictObject({
  goal: Text(MISSION_LIMITS.goal),
  plan: z.array(Text(MISSION_LIMITS.step)).min(1, "needs at least one step").max(
    MISSION_LIMITS.steps,
    `has at most ${MISSION_LIMITS.steps} steps`,
  ),
  title: Text(MISSION_LIMITS.title).optional(),
  target: z.string().min(1).max(LIMITS.targetChars).optional(),
  workspace: Text(64).optional(),
  cwd: Path.optional(),
  shell: ShellName.optional(),
});
export type MissionCreateInput = z.output<typeof MissionCreateInput>;

export const MissionIdInput = z.strictObject({ mission_id: MissionId });
export type MissionIdInput = z.output<typeof MissionIdInput>;

export const MissionListInput = z.strictObject({
  status: z.enum(MISSION_STATUSES).optional(),
  limit: z.number().int().min(1).max(MISSION_LIMITS.listLimit).optional(),
});
export type MissionListInput = z.output<typeof MissionListInput>;

export const MissionUpdateInput = z.strictObject({
  mission_id: MissionId,
  step_id: StepId.optional(),
  step_status: z.enum(STEP_STATUSES).optional(),
  job_id: Id.optional(),
  /** A verified adapter run proves a step too (adapter_run): its effect was observed. */
  adapter_run_id: Id.optional(),
  note: Text(MISSION_LIMITS.note).optional(),
  status: z.enum(["succeeded", "failed", "cancelled"]).optional(),
  summary: Text(MISSION_LIMITS.summary).optional(),
});
export type MissionUpdateInput = z.output<typeof MissionUpdateInput>;

export const MissionReportInput = z.strictObject({
  mission_id: MissionId,
  format: z.enum(["markdown", "json"]).optional(),
});
export type MissionReportInput = z.output<typeof MissionReportInput>;

/** An operator's cancel (`POST /api/missions/:id/cancel`). */
export const MissionCancelInput = z.strictObject({ reason: Text(1000).optional() });
export type MissionCancelInput = z.output<typeof MissionCancelInput>;

// ── results ────────────────────────────────────────────────────────────────

const Iso = z.string();

export const ApprovalEvidence = z.object({
  approval_id: z.string(),
  status: z.enum(APPROVAL_STATUSES),
  decided_by: z.string().nullable(),
  decided_at: z.string().nullable(),
  rule: z.string().nullable(),
});
export type ApprovalEvidence = z.infer<typeof ApprovalEvidence>;

/** What the runtime observed of the job that proves a step (snapshotted when checked). */
export const JobEvidence = z.object({
  job_id: z.string(),
  session_id: z.string(),
  command: z.array(z.string()),
  status: z.enum(JOB_STATUSES),
  exit_code: z.number().int().optional(),
  signal: z.string().optional(),
  cwd: z.string().optional(),
  started_at: Iso,
  ended_at: Iso.optional(),
  duration_ms: z.number().int(),
  output_bytes: z.number().int(),
  /** SHA-256 of the job's whole recorded (cleaned, redacted) output; null if not recorded. */
  output_sha256: z.string().nullable(),
  approval: ApprovalEvidence.optional(),
  /**
   * Where the exit status came from: `kernel` — the daemon's own waitpid of the program it
   * spawned (an argv job run with `mode: "background"` in the mission's session); `shell` — the
   * marker an interactive shell printed, which the job's own output could imitate. Only `kernel`
   * makes a step verified.
   */
  exit_source: z.enum(["kernel", "shell"]).optional(),
  /** When the runtime checked the job (the step was marked). */
  checked_at: Iso,
});
export type JobEvidence = z.infer<typeof JobEvidence>;

/** What the runtime observed of the adapter run that proves a step (snapshotted when checked). */
export const AdapterEvidence = z.object({
  kind: z.literal("adapter"),
  run_id: z.string(),
  adapter: z.string(),
  /** The run's phase when the step was marked; only `verified` passes a step. */
  phase: z.string(),
  resource: z.string(),
  summary: z.string(),
  /** SHA-256 of the run's receipt as JSON (the receipt itself stays with the run). */
  receipt_sha256: z.string().nullable(),
  created_at: Iso,
  updated_at: Iso,
  checked_at: Iso,
});
export type AdapterEvidence = z.infer<typeof AdapterEvidence>;

export const StepView = z.object({
  step_id: z.string(),
  index: z.number().int(),
  text: z.string(),
  status: z.enum(STEP_STATUSES),
  job_id: z.string().optional(),
  adapter_run_id: z.string().optional(),
  /**
   * True only for a passed step whose job the runtime checked (exited 0 in a mission session)
   * with an exit status the kernel reported to the daemon (`evidence.exit_source: "kernel"`), or
   * whose adapter run the runtime verified (phase `verified`: its effect was observed).
   */
  verified: z.boolean(),
  note: z.string().optional(),
  evidence: z.union([JobEvidence, AdapterEvidence]).optional(),
  updated_at: Iso,
});
export type StepView = z.infer<typeof StepView>;

export const Progress = z.object({
  total: z.number().int(),
  passed: z.number().int(),
  failed: z.number().int(),
  skipped: z.number().int(),
  running: z.number().int(),
  pending: z.number().int(),
});
export type Progress = z.infer<typeof Progress>;

export const PendingView = z.object({
  approval_id: z.string(),
  job_id: z.string(),
  command: z.array(z.string()),
  requested_at: Iso,
});
export type PendingView = z.infer<typeof PendingView>;

export const Actor = z.object({ kind: z.string(), id: z.string() });

/** `data` is the audit record's data as written (redacted): free-form by nature. */
export const TimelineEntry = z.object({
  seq: z.number().int(),
  time: Iso,
  event: z.string(),
  actor: Actor,
  summary: z.string(),
  data: z.record(z.string(), z.unknown()),
});
export type TimelineEntry = z.infer<typeof TimelineEntry>;

export const SessionAttempt = z.object({
  session_id: z.string(),
  attempt: z.number().int(),
  started_at: Iso,
  ended_at: Iso.optional(),
  end_reason: z.string().optional(),
});
export type SessionAttempt = z.infer<typeof SessionAttempt>;

export const MissionStatusSchema = z.enum(MISSION_STATUSES);

export const MissionView = z.object({
  mission_id: z.string(),
  title: z.string(),
  goal: z.string(),
  target: z.string(),
  workspace: z.string(),
  status: MissionStatusSchema,
  owner: z.string(),
  session_id: z.string().nullable(),
  sessions: z.array(SessionAttempt),
  steps: z.array(StepView),
  progress: Progress,
  pending_approvals: z.array(PendingView),
  summary: z.string().optional(),
  created_at: Iso,
  updated_at: Iso,
  ended_at: Iso.optional(),
  timeline: z.array(TimelineEntry),
  timeline_total: z.number().int(),
  timeline_dropped: z.number().int(),
  anchors_dropped: z.number().int(),
  report_sha256: z.string().optional(),
});
export type MissionView = z.infer<typeof MissionView>;

export const MissionSummary = z.object({
  mission_id: z.string(),
  title: z.string(),
  status: MissionStatusSchema,
  owner: z.string(),
  session_id: z.string().nullable(),
  progress: Progress,
  pending_approvals: z.number().int(),
  created_at: Iso,
  updated_at: Iso,
});
export type MissionSummary = z.infer<typeof MissionSummary>;

export const MissionList = z.object({ missions: z.array(MissionSummary) });
export type MissionList = z.infer<typeof MissionList>;

export const Anchor = z.object({
  seq: z.number().int(),
  hash: z.string(),
  event: z.string(),
  time: Iso,
});

export const Note = z.object({
  seq: z.number().int(),
  time: Iso,
  by: z.string(),
  step_id: z.string().optional(),
  note: z.string(),
});

/** The evidence of a report, as JSON (its SHA-256 is `evidence_sha256`). */
export const Evidence = z.object({
  schema: z.string(),
  generated_at: Iso,
  mission: z.object({
    mission_id: z.string(),
    title: z.string(),
    owner: z.string(),
    target: z.string(),
    workspace: z.string(),
    status: z.string(),
    created_at: Iso,
    ended_at: Iso.optional(),
    sessions: z.array(SessionAttempt),
  }),
  goal: z.string(),
  outcome: z.object({
    status: z.string(),
    /** The runtime's own reading: verified steps and the mission's state. */
    runtime: z.object({
      verified_steps: z.number().int(),
      claimed_only_steps: z.number().int(),
      progress: Progress,
    }),
    /** The agent's summary, verbatim: a claim. */
    agent_summary: z.string().optional(),
  }),
  plan: z.array(StepView),
  timeline: z.array(TimelineEntry),
  timeline_dropped: z.number().int(),
  anchors: z.array(Anchor),
  anchors_dropped: z.number().int(),
  /** Notes attached with mission_update: the agent's (or, for a cancel, an operator's) words. */
  notes: z.array(Note),
});
export type Evidence = z.infer<typeof Evidence>;

export const MissionReportResult = z.object({
  mission_id: z.string(),
  /** SHA-256 of `markdown`. */
  sha256: z.string(),
  /** SHA-256 of the JSON form (`JSON.stringify(evidence)`). */
  evidence_sha256: z.string(),
  /** seq of the audit record that holds the hashes (null when the log does not report it). */
  audit_seq: z.number().int().nullable(),
  format: z.enum(["markdown", "json"]),
  markdown: z.string(),
  evidence: Evidence,
});
export type MissionReportResult = z.infer<typeof MissionReportResult>;
