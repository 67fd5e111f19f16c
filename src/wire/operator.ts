/**
 * The operator's control plane on the wire (`/api/*`, used by the dashboard and the CLI): the
 * approval queue, the kill switch, every agent's sessions and jobs, takeover. Agents never reach
 * these routes.
 */
import { z } from "zod";
import { Cursor, LIMITS, Ms, Text } from "./common.ts";
import { Gap, JobStatusSchema, JobSummary } from "./exec.ts";
import { Cols, Rows, SessionInfo } from "./sessions.ts";
import { JOB_MODES } from "./statuses.ts";
import { Boundary } from "./server.ts";

export const PendingApproval = z.object({
  approval_id: z.string(),
  job_id: z.string(),
  owner: z.string(),
  session_id: z.string(),
  command: z.array(z.string()),
  mode: z.enum(JOB_MODES),
  requested_at: z.string(),
  /** When it is denied if nobody decides. */
  expires_at: z.string(),
  /** The policy rule that asked for confirmation. */
  rule: z.string().optional(),
  /**
   * Set when a program of a running job waits in `execve` for this decision (the exec gate):
   * `command` is then that program's argv, `path` the file it runs.
   */
  exec: z.object({ pid: z.number().int(), path: z.string() }).optional(),
  /**
   * Set when what waits is not a job but another action (a remote session, a fleet run, a
   * forward, a file access): `job_id` is then the action's id (`act_…`), `command` a summary.
   */
  action: z.object({ kind: z.string() }).optional(),
  /** Who must approve (docs/GOVERNANCE.md): distinct approvers, roles, MFA, requester excluded. */
  requirements: z.object({
    quorum: z.number().int(),
    roles: z.array(z.string()),
    mfa: z.boolean(),
    exclude_requester: z.boolean(),
    /** Several rules' role lists: an approver holds a role of each. */
    role_sets: z.array(z.array(z.string())).optional(),
  }).optional(),
  /** The principal behind the requesting agent. */
  requester: z.string().optional(),
  /** Principals who approved so far (each counts once). */
  approvers: z.array(z.string()).optional(),
});
export type PendingApproval = z.infer<typeof PendingApproval>;

export const ApprovalList = z.object({ approvals: z.array(PendingApproval) });
export type ApprovalList = z.infer<typeof ApprovalList>;

export const DecisionInput = z.strictObject({ reason: Text(1000).optional() });
export type DecisionInput = z.output<typeof DecisionInput>;

export const Decision = z.object({
  ok: z.boolean(),
  approval_id: z.string(),
  /** True once it is approved (a quorum: when the last needed vote came in). */
  approved: z.boolean(),
  /** `pending`: the vote counted, more approvers are needed. */
  status: z.enum(["approved", "denied", "pending"]).optional(),
  votes: z.number().int().optional(),
  quorum: z.number().int().optional(),
});
export type Decision = z.infer<typeof Decision>;

export const StopInput = z.strictObject({
  barrier_ms: Ms(86_400_000).optional(),
  grace_ms: Ms(LIMITS.killGraceMs).optional(),
});
export type StopInput = z.output<typeof StopInput>;

export const StopResult = z.object({
  ok: z.boolean(),
  barrier_until: z.string(),
  stopped_jobs: z.array(z.string()),
  cancelled_approvals: z.array(z.string()),
});
export type StopResult = z.infer<typeof StopResult>;

export const OperatorSession = SessionInfo.extend({ owner: z.string() });
export type OperatorSession = z.infer<typeof OperatorSession>;
export const OperatorSessionList = z.object({ sessions: z.array(OperatorSession) });
export type OperatorSessionList = z.infer<typeof OperatorSessionList>;

export const SessionLeaseResult = z.object({ ok: z.boolean(), session: SessionInfo });
export type SessionLeaseResult = z.infer<typeof SessionLeaseResult>;

export const OperatorTypeInput = z.strictObject({ data: z.string().max(LIMITS.inputBytes) });
export type OperatorTypeInput = z.output<typeof OperatorTypeInput>;

export const ResizeInput = z.strictObject({ cols: Cols, rows: Rows });
export type ResizeInput = z.output<typeof ResizeInput>;

export const OperatorJob = JobSummary.extend({ owner: z.string() });
export type OperatorJob = z.infer<typeof OperatorJob>;
export const OperatorJobList = z.object({ jobs: z.array(OperatorJob) });
export type OperatorJobList = z.infer<typeof OperatorJobList>;

export const KillInput = z.strictObject({ grace_ms: Ms(LIMITS.killGraceMs).optional() });
export type KillInput = z.output<typeof KillInput>;

export const OperatorKillResult = z.object({ ok: z.boolean(), job: OperatorJob });
export type OperatorKillResult = z.infer<typeof OperatorKillResult>;

/** `termada audit resume` / `POST /api/audit/resume`. */
export const AuditResumeResult = z.object({
  ok: z.boolean(),
  resumed: z.boolean(),
  failure: z.string(),
  verified_records: z.number().int(),
});
export type AuditResumeResult = z.infer<typeof AuditResumeResult>;

export const JobOutputQuery = z.strictObject({
  cursor: Cursor.optional(),
  max_bytes: z.coerce.number().int().min(1).max(LIMITS.pageBytes).optional(),
});

export const JobOutputPage = z.object({
  job_id: z.string(),
  owner: z.string(),
  status: JobStatusSchema,
  output: z.string(),
  next_cursor: z.string(),
  has_more: z.boolean(),
  gap: Gap.optional(),
});
export type JobOutputPage = z.infer<typeof JobOutputPage>;

/** The daemon's health at a glance (`GET /api/status`, `termada status`). */
export const DaemonStatus = z.object({
  version: z.string(),
  pid: z.number().int(),
  port: z.number().int().optional(),
  sessions: z.number().int(),
  pending_approvals: z.number().int(),
  stopped: z.boolean(),
  barrier_until: z.string().optional(),
  audit_healthy: z.boolean(),
  /** The kernel boundary around sessions on this machine (docs/SECURITY.md). */
  boundary: Boundary,
});
export type DaemonStatus = z.infer<typeof DaemonStatus>;
