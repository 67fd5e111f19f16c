/**
 * Mission Control: durable goals whose plan steps are verified by the runtime (a job that ran in
 * the mission's session and exited 0), a timeline and audit anchors kept from the audit mirror,
 * and an evidence report whose hash is itself audited. See docs/MISSION.md.
 */
export {
  type MissionReport,
  type MissionRuntime,
  MissionService,
  type MissionServiceOptions,
} from "./service.ts";
export { EVIDENCE_SCHEMA } from "./report.ts";
