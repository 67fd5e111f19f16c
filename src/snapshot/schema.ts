/**
 * The contract of the snapshot library: option schemas (one per call, shared by the future MCP
 * tools and HTTP routes), the manifest's line shapes, the id format and every bound.
 */
import { z } from "zod";

/** Every bound of the library, in one place (docs/SNAPSHOTS.md lists them). */
export const SNAPSHOT_LIMITS = {
  /** Entries (files, directories, links, skipped records) per snapshot. */
  maxFilesDefault: 10_000,
  maxFilesHard: 100_000,
  /** Sum of regular files' sizes per snapshot. */
  maxBytesDefault: 256 * 1024 * 1024,
  maxBytesHard: 4 * 1024 * 1024 * 1024,
  /** One regular file. */
  maxFileBytesDefault: 64 * 1024 * 1024,
  maxFileBytesHard: 4 * 1024 * 1024 * 1024,
  /** Snapshots kept per root; the oldest beyond are pruned. */
  keepDefault: 1000,
  keepHard: 10_000,
  /** A relative path or a symlink target, in UTF-8 bytes. */
  pathBytes: 4096,
  excludes: 64,
  excludeChars: 256,
  labelChars: 200,
  createdByChars: 128,
  reasonChars: 1000,
  /** A manifest file; its first line (the header) alone. */
  manifestBytes: 64 * 1024 * 1024,
  headerBytes: 64 * 1024,
  /** Per-path failures listed in a restore result (the count is exact). */
  failuresListed: 100,
} as const;

/** Excluded unless `excludes` says otherwise. `.git` is governed by `include_git` alone. */
export const DEFAULT_EXCLUDES: readonly string[] = ["node_modules"];

/** `snap_` and 16 characters of the id alphabet (80 random bits). */
export const SNAPSHOT_ID_PATTERN = /^snap_[0-9a-hjkmnp-tv-z]{16}$/;

const L = SNAPSHOT_LIMITS;
const SHA256 = /^[0-9a-f]{64}$/;

/** A simple glob: `*` and `?` inside a segment; with a `/` it is anchored at the top. */
const ExcludePattern = z.string().min(1).max(L.excludeChars).refine(
  (p) =>
    !p.includes("\0") &&
    p.split("/").every((s) => s !== "" && s !== "." && s !== ".."),
  { message: "must be segments without empty, '.' or '..' parts (no leading or trailing '/')" },
);

export const SnapshotLimits = z.strictObject({
  max_files: z.number().int().min(1).max(L.maxFilesHard).default(L.maxFilesDefault),
  max_bytes: z.number().int().min(0).max(L.maxBytesHard).default(L.maxBytesDefault),
  max_file_bytes: z.number().int().min(0).max(L.maxFileBytesHard).default(
    L.maxFileBytesDefault,
  ),
});
export type SnapshotLimits = z.output<typeof SnapshotLimits>;

export const CreateSnapshotOptions = z.strictObject({
  /** Replaces DEFAULT_EXCLUDES (pass `[]` to include node_modules). */
  excludes: z.array(ExcludePattern).max(L.excludes).optional(),
  /** Include `.git` directories (excluded by default). */
  include_git: z.boolean().default(false),
  limits: SnapshotLimits.partial().optional(),
  /** Snapshots kept in this root after this one is written; the oldest beyond are pruned. */
  keep: z.number().int().min(1).max(L.keepHard).default(L.keepDefault),
  label: z.string().max(L.labelChars).optional(),
  created_by: z.string().max(L.createdByChars).optional(),
  reason: z.string().max(L.reasonChars).optional(),
});
export type CreateSnapshotOptions = z.input<typeof CreateSnapshotOptions>;

export const RestoreSnapshotOptions = z.strictObject({
  /** Restore into this directory instead of the snapshot's own. */
  target: z.string().min(1).max(L.pathBytes).optional(),
  /**
   * Remove entries present now but absent from the snapshot (never excluded ones). Defaults to
   * true for `pre_restore` (undo) snapshots, false otherwise.
   */
  delete_extra: z.boolean().optional(),
  /** Bounds of the automatic pre-restore snapshot; default: those the snapshot was made with. */
  limits: SnapshotLimits.partial().optional(),
  keep: z.number().int().min(1).max(L.keepHard).default(L.keepDefault),
  created_by: z.string().max(L.createdByChars).optional(),
  reason: z.string().max(L.reasonChars).optional(),
});
export type RestoreSnapshotOptions = z.input<typeof RestoreSnapshotOptions>;

export const ListSnapshotsOptions = z.strictObject({
  /** Only snapshots of this directory (compared after resolving it). */
  dir: z.string().min(1).max(L.pathBytes).optional(),
});
export type ListSnapshotsOptions = z.input<typeof ListSnapshotsOptions>;

export const SnapshotId = z.string().regex(SNAPSHOT_ID_PATTERN);

const RelPath = z.string().min(1).max(L.pathBytes);
const Mode = z.number().int().min(0).max(0o7777);
const Mtime = z.number().int().nullable();

/** One entry of a manifest: what a path was when the snapshot was taken. */
export const SnapshotEntry = z.discriminatedUnion("type", [
  z.strictObject({
    path: RelPath,
    type: z.literal("file"),
    mode: Mode,
    mtime_ms: Mtime,
    size: z.number().int().min(0),
    sha256: z.string().regex(SHA256),
    /** Its size or mtime moved while it was read, twice: the bytes kept may be a torn read. */
    changed_during_copy: z.literal(true).optional(),
  }),
  z.strictObject({ path: RelPath, type: z.literal("dir"), mode: Mode, mtime_ms: Mtime }),
  z.strictObject({
    path: RelPath,
    type: z.literal("symlink"),
    target: z.string().min(1).max(L.pathBytes),
    mtime_ms: Mtime,
  }),
]);
export type SnapshotEntry = z.output<typeof SnapshotEntry>;

/** Something the walk found and did not copy, and why. */
export const SkippedEntry = z.strictObject({
  path: z.string().min(1).max(L.pathBytes * 2),
  skipped: z.enum([
    "socket",
    "fifo",
    "device",
    "unknown_type",
    "path_too_long",
    "unreadable",
    "vanished",
    "replaced_during_copy",
    "snapshot_store",
  ]),
});
export type SkippedEntry = z.output<typeof SkippedEntry>;

/** The manifest's first line, and what `listSnapshots` returns. */
export const SnapshotInfo = z.strictObject({
  termada_snapshot: z.literal(1),
  id: SnapshotId,
  dir: z.string().min(1).max(L.pathBytes),
  created_at: z.iso.datetime(),
  /** `pre_restore`: taken automatically by a restore (`restore_of`), restoring it undoes that. */
  kind: z.enum(["manual", "pre_restore"]),
  restore_of: SnapshotId.optional(),
  label: z.string().max(L.labelChars).optional(),
  created_by: z.string().max(L.createdByChars).optional(),
  reason: z.string().max(L.reasonChars).optional(),
  /** The effective excludes (`.git` among them unless include_git). */
  excludes: z.array(ExcludePattern).max(L.excludes + 1),
  include_git: z.boolean(),
  limits: SnapshotLimits,
  files: z.number().int().min(0),
  dirs: z.number().int().min(0),
  symlinks: z.number().int().min(0),
  bytes: z.number().int().min(0),
  skipped: z.number().int().min(0),
  changed_during_copy: z.number().int().min(0),
});
export type SnapshotInfo = z.output<typeof SnapshotInfo>;

/** The last line: makes a truncated manifest detectable. */
export const ManifestEnd = z.strictObject({
  end: z.literal(true),
  entries: z.number().int().min(0),
  skipped: z.number().int().min(0),
});

/** A whole manifest as `getSnapshot` returns it; entries parents first, sorted. */
export interface SnapshotManifest {
  info: SnapshotInfo;
  entries: SnapshotEntry[];
  skipped: SkippedEntry[];
}
