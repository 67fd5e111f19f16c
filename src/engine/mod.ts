/**
 * The command engine: persistent shell sessions on real PTYs, jobs with exact boundaries and
 * exit codes, cursored output, input detection, waits, signals, kills and quotas per owner.
 * It does not decide whether something may run (that is src/control) nor speak MCP/HTTP.
 */
export {
  type AdmissionHook,
  type AdmissionRequest,
  type AdmissionVerdict,
  type CallOptions,
  DEFAULT_LIMITS,
  DEFAULT_OUTPUT,
  Engine,
  type EngineHooks,
  type EngineLimits,
  type EngineOptions,
  type EngineOutputOptions,
  type InputAdmissionRequest,
  type JobStart,
  type JobSummary,
  type JobView,
  type PendingApproval,
  type SessionInfo,
} from "./engine.ts";
export { FINAL_STATUSES, Job, type JobRecord, type JobStatus, type OutputReader } from "./job.ts";
export { type InputState } from "./input.ts";
export type { Matched } from "./wait.ts";
export * as schema from "./schema.ts";
