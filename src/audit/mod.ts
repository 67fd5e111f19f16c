/**
 * The tamper-evident audit log: append-only JSON-lines segments whose records are chained by
 * SHA-256 (each record holds the hash of the one before), fsynced before `append` returns, rotated
 * by size and pruned behind a hash-protected checkpoint. `verifyAudit` checks a whole directory
 * and names the first broken record. This folder owns the audit directory only: it decides no
 * policy, runs nothing, and does not redact by itself (the caller passes `redact`).
 */
export {
  AuditLog,
  type AuditOptions,
  DEFAULT_KEEP_SEGMENTS,
  DEFAULT_MAX_SEGMENT_BYTES,
  MAX_DATA_BYTES,
  MAX_TAIL,
} from "./log.ts";
export { verifyAudit, type VerifyResult } from "./verify.ts";
export { type AuditActor, type AuditRecord, GENESIS } from "./record.ts";
export { canonicalJson } from "./canonical.ts";
export type { AuditEventName, AuditEvents, DecisionRecord } from "./events.ts";
export { type AuditHashes, auditHashesAt } from "./hashes.ts";
export { type LastLines, readLastLines } from "./_files.ts";
