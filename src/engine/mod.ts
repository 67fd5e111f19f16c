/**
 * The command engine: persistent shell sessions on real PTYs, jobs with exact boundaries and
 * exit codes, cursored output, input detection, waits, signals, kills and quotas per owner.
 * Mechanics only: it does not decide whether something may run (src/control reserves, asks the
 * gateway, then starts), does not store or audit (control observes it), and speaks no MCP/HTTP.
 * Only src/control (and the daemon that wires it) imports this folder; the edges never do.
 */
export {
  Engine,
  type EngineObservers,
  type EngineOptions,
  type ExecContext,
  type ExecPolicy,
  type RemoteLauncher,
  type SandboxSettings,
  type SessionSpec,
} from "./engine.ts";
export type {
  ExecAnswer,
  ExecEvent,
  ExecFastPath,
  ExecGateMode,
  Feature,
  GateStats,
  SandboxReport,
} from "../sandbox/mod.ts";
export {
  DEFAULT_LIMITS,
  type EngineLimits,
  type JobArchive,
  Registry,
  sessionInfo,
  summarize,
} from "./registry.ts";
export {
  type InputTarget,
  JobLifecycle,
  type LaunchSpec,
  operatorHolds,
  type Reservation,
  secretsToServerJob,
} from "./lifecycle.ts";
export {
  type CallOptions,
  DEFAULT_OUTPUT,
  DEFAULT_RUN_WAIT_MS,
  type EngineOutputOptions,
  JobReader,
} from "./reads.ts";
export { type LeaseAction, Leases, MAX_OPERATOR_INPUT } from "./lease.ts";
export {
  type BlockedExec,
  FINAL_STATUSES,
  Job,
  type JobRecord,
  type JobStatus,
  type OutputReader,
} from "./job.ts";
export { type RemoteHooks, Session, type Spawned, type Terminal } from "./session.ts";
export { type InputState } from "./input.ts";
export { COMMAND_READER_NAMES, readsCommands } from "./readers.ts";
export {
  encodeKeys,
  type KeyInput,
  type KeyModes,
  MAX_KEYS,
  MAX_KEYS_BYTES,
  pasteText,
} from "./keys.ts";
export { compilePattern } from "./wait.ts";
