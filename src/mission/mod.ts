/**
 * Mission Control: durable goals whose plan steps are verified by the runtime (a job that ran in
 * the mission's session and exited 0), a timeline and audit anchors kept from the audit mirror,
 * and an evidence report whose hash is itself audited. See docs/MISSION.md.
 */
export {
  type Actor as MissionActor,
  type MissionAudit,
  type MissionReport,
  MissionService,
  type MissionServiceOptions,
} from "./service.ts";
export {
  MISSION_LIMITS,
  MissionCancelInput,
  MissionCreateInput,
  MissionIdInput,
  MissionListInput,
  MissionReportInput,
  MissionUpdateInput,
} from "./schema.ts";
export type {
  JobEvidence,
  MissionSummary,
  MissionView,
  Progress,
  StepView,
  TimelineEntry,
} from "./view.ts";
export { type Evidence, EVIDENCE_SCHEMA } from "./report.ts";
