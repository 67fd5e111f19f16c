/**
 * Crash-safe state on disk. `Store` keeps agents, sessions and jobs in one SQLite database (WAL;
 * every write one statement or one transaction; schema migrations by user_version) and turns
 * what was running before a restart into "orphaned". The spool keeps each job's cleaned output in
 * bounded segment files that read back, after a restart, exactly as the live cursor buffer did.
 * This folder owns files under the state directory only: it runs no processes, knows no shells,
 * and decides nothing about retention policy (callers say what to keep).
 */
export {
  ACTIVE_JOB_STATUSES,
  type AgentRow,
  type ApprovalRow,
  type JobRow,
  MAX_COMMAND_JSON_BYTES,
  MAX_ID_LENGTH,
  MAX_LIST_LIMIT,
  MAX_TEXT_LENGTH,
  SCHEMA_VERSION,
  type SessionRow,
  Store,
  type StoreOptions,
} from "./db.ts";
export { pruneSpools, removeSpool, type SpoolOptions, SpoolReader, SpoolWriter } from "./spool.ts";
export {
  MISSION_STATUSES,
  MISSION_TEXT_LIMITS,
  type MissionRecordRow,
  type MissionRow,
  type MissionSessionRow,
  type MissionStatus,
  MissionStore,
  STEP_STATUSES,
  type StepRow,
  type StepStatus,
  TERMINAL_MISSION_STATUSES,
} from "./missions.ts";
