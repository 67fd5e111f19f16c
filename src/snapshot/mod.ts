/**
 * Snapshots: bounded, content-addressed copies of a directory, restored atomically per file,
 * each restore undoable through the automatic `pre_restore` snapshot it takes first. This folder
 * owns the store under a root directory the caller names (`objects/`, `manifests/`, `lock`),
 * the walk (symlinks recorded, never followed; excludes; limits), the manifest format, restore
 * and garbage collection. It does not own where the root is, who may snapshot or restore what
 * (policy), audit records, the HTTP/MCP/CLI surfaces, or scheduling: the daemon does.
 * docs/SNAPSHOTS.md is the user documentation.
 */
export {
  createSnapshot,
  type CreateSnapshotResult,
  gc,
  type GcResult,
  getSnapshot,
  listSnapshots,
  removeSnapshot,
  type RemoveSnapshotResult,
  type SnapshotRuntime,
} from "./store.ts";
export { type RestoreFailure, type RestoreResult, restoreSnapshot } from "./restore.ts";
export { SnapshotError, type SnapshotErrorCode, type SnapshotErrorOptions } from "./errors.ts";
export {
  CreateSnapshotOptions,
  DEFAULT_EXCLUDES,
  ListSnapshotsOptions,
  RestoreSnapshotOptions,
  SkippedEntry,
  SNAPSHOT_ID_PATTERN,
  SNAPSHOT_LIMITS,
  SnapshotEntry,
  SnapshotId,
  SnapshotInfo,
  SnapshotLimits,
  type SnapshotManifest,
} from "./schema.ts";
