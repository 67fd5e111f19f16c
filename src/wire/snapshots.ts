/**
 * Snapshots on the wire: the agent tools `snapshot_create` / `snapshot_list` and the operator
 * routes (`/api/snapshots…`, `termada snapshot`). The library's own manifest format stays in
 * src/snapshot; these are the views the edges return.
 */
import { z } from "zod";
import { Id, oneSession, Path, sameSession, SESSION_CONFLICT } from "./common.ts";

/** Bounds of snapshot input at the edges (the library enforces its own too). */
export const SNAPSHOT_WIRE_LIMITS = {
  labelChars: 200,
  excludes: 64,
  excludeChars: 256,
  /** Skipped paths a create result lists (the count is exact). */
  skippedListed: 20,
  /** Entries `show` returns (the manifest's first ones; the counts are exact). */
  entriesListed: 500,
} as const;

const L = SNAPSHOT_WIRE_LIMITS;
const SnapshotId = z.string().regex(/^snap_[0-9a-z]{16}$/, "is not a snapshot id");
const Label = z.string().max(L.labelChars);
const Excludes = z.array(z.string().min(1).max(L.excludeChars)).max(L.excludes);

export const SnapshotCreateInput = z.strictObject({
  /** The directory (default: the session's cwd); relative paths resolve against it. */
  path: Path.optional(),
  /** A session of the caller (its cwd resolves `path`); local sessions only. */
  session: Id.optional(),
  session_id: Id.optional(),
  label: Label.optional(),
  /** Replace the default excludes (node_modules); globs on path segments. */
  excludes: Excludes.optional(),
  include_git: z.boolean().optional(),
}).refine(sameSession, SESSION_CONFLICT).transform(oneSession);
export type SnapshotCreateInput = z.output<typeof SnapshotCreateInput>;

export const SnapshotListInput = z.strictObject({
  /** Only snapshots of this directory. */
  path: Path.optional(),
});
export type SnapshotListInput = z.output<typeof SnapshotListInput>;

export const SnapshotView = z.object({
  snapshot_id: z.string(),
  dir: z.string(),
  created_at: z.string(),
  /** `manual` (asked for, or before a command), `pre_restore` (what a restore replaced). */
  kind: z.enum(["manual", "pre_restore"]),
  restore_of: z.string().optional(),
  label: z.string().optional(),
  created_by: z.string().optional(),
  reason: z.string().optional(),
  files: z.number().int(),
  dirs: z.number().int(),
  symlinks: z.number().int(),
  bytes: z.number().int(),
  skipped: z.number().int(),
  changed_during_copy: z.number().int(),
});
export type SnapshotView = z.infer<typeof SnapshotView>;

export const SnapshotCreateResult = SnapshotView.extend({
  /** What was found and not copied (sockets, unreadable files…), the first ones. */
  skipped_paths: z.array(z.object({ path: z.string(), skipped: z.string() })),
});
export type SnapshotCreateResult = z.infer<typeof SnapshotCreateResult>;

export const SnapshotList = z.object({ snapshots: z.array(SnapshotView) });
export type SnapshotList = z.infer<typeof SnapshotList>;

// ── operator ──

export const OperatorSnapshotCreateInput = z.strictObject({
  dir: Path,
  label: Label.optional(),
  excludes: Excludes.optional(),
  include_git: z.boolean().optional(),
});
export type OperatorSnapshotCreateInput = z.output<typeof OperatorSnapshotCreateInput>;

export const SnapshotRestoreInput = z.strictObject({
  /** Remove what is there now and not in the snapshot (never excluded paths). */
  delete_extra: z.boolean().optional(),
  /** Restore into this directory instead of the snapshot's own. */
  target: Path.optional(),
});
export type SnapshotRestoreInput = z.output<typeof SnapshotRestoreInput>;

export const SnapshotRestoreResult = z.object({
  snapshot_id: z.string(),
  target: z.string(),
  /** Restore this one to undo the restore. */
  undo_snapshot_id: z.string(),
  delete_extra: z.boolean(),
  restored: z.number().int(),
  created: z.number().int(),
  unchanged: z.number().int(),
  deleted: z.number().int(),
  failed: z.number().int(),
  failures: z.array(z.object({ path: z.string(), error: z.string() })),
});
export type SnapshotRestoreResult = z.infer<typeof SnapshotRestoreResult>;

export const SnapshotDetail = z.object({
  snapshot: SnapshotView,
  entries: z.array(z.object({
    path: z.string(),
    type: z.enum(["file", "dir", "symlink"]),
    size: z.number().int().optional(),
    sha256: z.string().optional(),
    target: z.string().optional(),
  })),
  skipped_paths: z.array(z.object({ path: z.string(), skipped: z.string() })),
});
export type SnapshotDetail = z.infer<typeof SnapshotDetail>;

export const SnapshotIdParam = SnapshotId;
