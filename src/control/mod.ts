/**
 * Control: the layer every edge (MCP, HTTP API, CLI) calls. It owns the engine and admits every
 * side effect through one gateway (kill-switch barrier, policy, approvals, intent record on disk
 * before anything runs), writes each job's and session's trail (store rows and audit records)
 * from one place, owns approvals (row, parked job, timer), and carries the operator's use cases
 * (takeover, input, kill, stop-all, approve, audit resume) and agents' presence (reaping).
 * Agents have no path into the operator half: edges hand `operators` only to operator routes.
 */
export { Control, type ControlOptions } from "./control.ts";
export { AgentOps } from "./agent.ts";
export { OperatorOps, type StopAllResult } from "./operator.ts";
export { ApprovalBook } from "./approvals.ts";
export {
  type ExecFacts,
  Gateway,
  type PolicyPort,
  type PolicyVerdict,
  type ProgramConfirm,
} from "./gateway.ts";
export { Presence } from "./presence.ts";
export { RemoteOps, type RemoteSetup } from "./remote.ts";
export { FileOps } from "./files.ts";
export { AdapterOps } from "./adapters.ts";
export { MAX_PLUGIN_ARGS_BYTES, PLUGIN_ARGS_SUMMARY_CHARS, PluginOps } from "./plugins.ts";
export { SnapshotOps, type SnapshotPolicy } from "./snapshots.ts";
export { type AgentVaultEntry, vaultKind, VaultOps, type VaultStatus } from "./vault.ts";
export {
  type Actor,
  type ActorKind,
  type AuditSink,
  type OperatorAuth,
  Recorder,
  SYSTEM,
  type Written,
} from "./recorder.ts";
export { INLINE_OUTPUT_BYTES, SPOOL_AFTER_MS, Trail } from "./trail.ts";
export type { CallOptions, Job, Session } from "../engine/mod.ts";
