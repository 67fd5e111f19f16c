/**
 * Crash-safe state in one SQLite database. `Store` owns the connection (WAL; migrations by
 * user_version; every write one statement or one transaction; `recover` turns what was running
 * before a restart into "orphaned") and reaches each table through one repository on it:
 * `store.agents`, `store.sessions`, `store.jobs` (with a small job's whole output inline),
 * `store.approvals`, `store.missions`, and the governance tables `store.actions`,
 * `store.budgets`, `store.grants`. This folder owns the database file only: it runs no
 * processes, knows no shells, decides nothing about retention (callers say what to keep), and
 * keeps no output files (the spool is in src/output).
 */
export { type Recovery, SCHEMA_VERSION, Store, type StoreOptions } from "./db.ts";
export {
  MAX_COMMAND_JSON_BYTES,
  MAX_ID_LENGTH,
  MAX_INLINE_OUTPUT_BYTES,
  MAX_LIST_LIMIT,
  MAX_TEXT_LENGTH,
} from "./_checks.ts";
export { type AgentRepo, type AgentRow } from "./agents.ts";
export {
  type NewSession,
  type SessionPatch,
  type SessionRepo,
  type SessionRow,
} from "./sessions.ts";
export {
  type JobFilter,
  type JobFinal,
  type JobPatch,
  type JobRepo,
  type JobRow,
  type NewJob,
} from "./jobs.ts";
export {
  type ApprovalDecision,
  type ApprovalRepo,
  type ApprovalRow,
  MAX_VOTES,
  type NewApproval,
  type Requirements,
  type Vote,
} from "./approvals.ts";
export {
  ACTION_KINDS,
  ACTION_STATES,
  type ActionFilter,
  type ActionFinal,
  type ActionKind,
  type ActionReconcile,
  type ActionRepo,
  type ActionRow,
  type ActionState,
  BUDGET_METRICS,
  type BudgetMetric,
  type BudgetRepo,
  type GrantConsumption,
  type GrantRepo,
  type GrantRow,
  MAX_ACTION_HASH_LENGTH,
  MAX_NAME_LENGTH,
  MAX_OUTCOME_JSON_BYTES,
  MAX_SCOPE_KEY_LENGTH,
  MAX_SUMMARY_JSON_BYTES,
  MAX_SUMMARY_LINES,
  type NewAction,
  type NewGrant,
  type ReservationRow,
  type WindowUsage,
} from "./governance.ts";
export {
  type MissionRecordRow,
  type MissionRow,
  type MissionSessionRow,
  MissionStore,
  type StepRow,
} from "./missions.ts";
// Sourced from the wire contract's one list; re-exported here for callers not yet moved to it.
export {
  ACTIVE_JOB_STATUSES,
  MISSION_STATUSES,
  type MissionStatus,
  STEP_STATUSES,
  type StepStatus,
  TERMINAL_MISSION_STATUSES,
} from "../wire/mod.ts";
export { MISSION_TEXT_LIMITS } from "../wire/mod.ts";
