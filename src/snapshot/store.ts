/**
 * Creating, listing, reading and removing snapshots, and garbage collection of objects no
 * manifest references. Every mutation holds the store lock; reads need none (manifests are
 * replaced atomically and written after their objects).
 */
import { resolve } from "node:path";
import { type Clock, syncDir, systemClock } from "../shared/mod.ts";
import { badArgument, SnapshotError, tooLarge } from "./errors.ts";
import { forEachLimited, lstatOrUndefined, removeIfExists, withStoreLock } from "./_fs.ts";
import {
  encodeManifest,
  manifestIds,
  readInfo,
  readManifest,
  referencedObjects,
  writeManifest,
} from "./_manifest.ts";
import { putFile, type PutOutcome, type PutSession } from "./_objects.ts";
import { compileExcludes, Layout } from "./_paths.ts";
import { walkTree } from "./_walk.ts";
import {
  CreateSnapshotOptions,
  DEFAULT_EXCLUDES,
  ListSnapshotsOptions,
  type SkippedEntry,
  SNAPSHOT_LIMITS,
  type SnapshotEntry,
  type SnapshotInfo,
  SnapshotLimits,
  type SnapshotManifest,
} from "./schema.ts";

/** Files hashed and copied at once (each holds a thread of Deno's blocking pool). */
const COPY_WIDTH = 8;
const ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

/** Not part of the wire options: what the daemon injects. */
export interface SnapshotRuntime {
  /** Timestamps of new snapshots (default: the system clock). */
  clock?: Clock;
}

export interface CreateSnapshotResult {
  snapshot: SnapshotInfo;
  /** What was not copied, and why (also in the manifest). */
  skipped: SkippedEntry[];
  /** Files that kept changing while read (kept, flagged `changed_during_copy`). */
  changed_during_copy: string[];
  /** Oldest snapshots removed to stay within `keep`. */
  pruned: string[];
}

export interface RemoveSnapshotResult {
  id: string;
  removed_objects: number;
  freed_bytes: number;
}

export interface GcResult {
  removed_objects: number;
  freed_bytes: number;
  kept_objects: number;
  /** Manifests that do not parse: their objects are kept (every hash in their text). */
  corrupt_manifests: string[];
}

export function parseOptions<T>(
  schema: {
    safeParse(
      v: unknown,
    ):
      | { success: true; data: T }
      | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } };
  },
  value: unknown,
  what: string,
): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const key = issue.path.map(String).join(".");
  throw badArgument(`Invalid ${what} option "${key}": ${issue.message}`, key);
}

export function newSnapshotId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  let out = "snap_";
  for (const b of bytes) out += ID_ALPHABET[b & 31];
  return out;
}

/** The effective exclude list recorded in the manifest. */
export function effectiveExcludes(excludes: readonly string[] | undefined, git: boolean): string[] {
  const list = [...(excludes ?? DEFAULT_EXCLUDES)];
  if (!git && !list.includes(".git")) list.push(".git");
  return list;
}

/** What the internal create needs, options already parsed and defaults applied. */
export interface CreatePlan {
  excludes: string[];
  include_git: boolean;
  limits: SnapshotLimits;
  keep: number;
  kind: SnapshotInfo["kind"];
  restore_of?: string;
  label?: string;
  created_by?: string;
  reason?: string;
  /** Never pruned by this create (the snapshot a restore is about to read). */
  protect?: string;
  allowMissing?: boolean;
  clock: Clock;
  /** Test seam: runs after the objects are stored, before the manifest is written. */
  beforeManifest?: () => Promise<void>;
}

/**
 * Snapshots the directory `dir` into the store at `root` (created, mode 0700, if missing).
 * Over a limit → SNAPSHOT_TOO_LARGE, and nothing of this snapshot stays in the store.
 */
export async function createSnapshot(
  root: string,
  dir: string,
  options: CreateSnapshotOptions & SnapshotRuntime = {},
): Promise<CreateSnapshotResult> {
  const { clock, ...wire } = options;
  const o = parseOptions(CreateSnapshotOptions, wire, "snapshot");
  const real = await realDirectory(dir);
  const layout = new Layout(resolve(root));
  return await withStoreLock(layout, () =>
    createLocked(layout, real, {
      excludes: effectiveExcludes(o.excludes, o.include_git),
      include_git: o.include_git,
      limits: SnapshotLimits.parse(o.limits ?? {}),
      keep: o.keep,
      kind: "manual",
      label: o.label,
      created_by: o.created_by,
      reason: o.reason,
      clock: clock ?? systemClock,
    }));
}

async function realDirectory(dir: string): Promise<string> {
  let real: string;
  try {
    real = await Deno.realPath(dir);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      throw badArgument(`Cannot snapshot "${dir}": no such directory`, "dir");
    }
    throw err;
  }
  if (!(await Deno.stat(real)).isDirectory) {
    throw badArgument(`Cannot snapshot "${dir}": it is not a directory`, "dir");
  }
  return real;
}

/** The create itself; the caller holds the lock and passes a real, absolute `dir`. */
export async function createLocked(
  layout: Layout,
  dir: string,
  plan: CreatePlan,
): Promise<CreateSnapshotResult> {
  const storeRoot = await Deno.realPath(layout.root);
  if (dir === storeRoot || dir.startsWith(`${storeRoot}/`)) {
    throw badArgument(`Cannot snapshot "${dir}": it is inside the snapshot store`, "dir");
  }
  await clearTemps(layout);
  const walked = await walkTree(dir, {
    excludes: compileExcludes(plan.excludes),
    limits: plan.limits,
    storeRoot,
    allowMissing: plan.allowMissing,
  });
  const session: PutSession = {
    layout,
    dir,
    limits: plan.limits,
    created: [],
    dirs: new Set(),
    bytes: 0,
  };
  const id = newSnapshotId();
  let manifest: SnapshotManifest;
  try {
    const files = walked.entries.filter((e) => e.type === "file");
    const outcomes = new Map<string, PutOutcome>();
    await forEachLimited(files, COPY_WIDTH, async (f) => {
      outcomes.set(f.rel, await putFile(session, `${dir}/${f.rel}`, f.info));
    });
    const entries: SnapshotEntry[] = [];
    const skipped = [...walked.skipped];
    const changed: string[] = [];
    let bytes = 0;
    for (const w of walked.entries) {
      const mtime_ms = w.info.mtime?.getTime() ?? null;
      if (w.type === "dir") {
        entries.push({ path: w.rel, type: "dir", mode: (w.info.mode ?? 0o755) & 0o7777, mtime_ms });
      } else if (w.type === "symlink") {
        entries.push({ path: w.rel, type: "symlink", target: w.target, mtime_ms });
      } else {
        const r = outcomes.get(w.rel)!;
        if (r.kind === "skipped") {
          skipped.push({ path: w.rel, skipped: r.why });
          continue;
        }
        bytes += r.size;
        if (r.changed) changed.push(w.rel);
        entries.push({
          path: w.rel,
          type: "file",
          mode: (r.info.mode ?? 0o644) & 0o7777,
          mtime_ms: r.info.mtime?.getTime() ?? null,
          size: r.size,
          sha256: r.sha256,
          ...(r.changed ? { changed_during_copy: true as const } : {}),
        });
      }
    }
    skipped.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    manifest = {
      info: {
        termada_snapshot: 1,
        id,
        dir,
        created_at: new Date(plan.clock.now()).toISOString(),
        kind: plan.kind,
        ...(plan.restore_of === undefined ? {} : { restore_of: plan.restore_of }),
        ...(plan.label === undefined ? {} : { label: plan.label }),
        ...(plan.created_by === undefined ? {} : { created_by: plan.created_by }),
        ...(plan.reason === undefined ? {} : { reason: plan.reason }),
        excludes: plan.excludes,
        include_git: plan.include_git,
        limits: plan.limits,
        files: entries.filter((e) => e.type === "file").length,
        dirs: entries.filter((e) => e.type === "dir").length,
        symlinks: entries.filter((e) => e.type === "symlink").length,
        bytes,
        skipped: skipped.length,
        changed_during_copy: changed.length,
      },
      entries,
      skipped,
    };
    const encoded = encodeManifest(manifest);
    if (encoded.length > SNAPSHOT_LIMITS.manifestBytes) {
      throw tooLarge(dir, "manifest_bytes", SNAPSHOT_LIMITS.manifestBytes, encoded.length);
    }
    await plan.beforeManifest?.();
    // Objects reach the disk before the manifest that names them.
    for (const d of session.dirs) await syncDir(d);
    await syncDir(layout.objects);
    await writeManifest(layout, encoded, id);
    const pruned = await prune(layout, plan.keep, plan.protect);
    return {
      snapshot: manifest.info,
      skipped: manifest.skipped,
      changed_during_copy: changed,
      pruned,
    };
  } catch (err) {
    if (!(await lstatOrUndefined(layout.manifest(id)))) {
      // Aborted before its manifest: nothing references what this snapshot wrote.
      for (const p of session.created) await removeIfExists(p);
    }
    throw err;
  }
}

async function clearTemps(layout: Layout): Promise<void> {
  for (const d of [layout.tmp, layout.manifests]) {
    for await (const e of Deno.readDir(d)) {
      if (e.name.startsWith(".termada-tmp-")) await removeIfExists(`${d}/${e.name}`);
    }
  }
}

async function prune(layout: Layout, keep: number, protect?: string): Promise<string[]> {
  const ids = await manifestIds(layout);
  if (ids.length <= keep) return [];
  const infos = await listInfos(layout);
  const victims = infos.slice(keep).map((i) => i.id).filter((id) => id !== protect);
  for (const id of victims) await removeLocked(layout, id);
  return victims;
}

async function listInfos(layout: Layout): Promise<SnapshotInfo[]> {
  const infos: SnapshotInfo[] = [];
  for (const id of await manifestIds(layout)) {
    try {
      infos.push(await readInfo(layout, id));
    } catch (err) {
      // A corrupt or vanished manifest is left out of listings; getSnapshot says why.
      if (!(err instanceof SnapshotError)) throw err;
    }
  }
  return infos.sort((a, b) =>
    a.created_at === b.created_at ? (a.id < b.id ? 1 : -1) : (a.created_at < b.created_at ? 1 : -1)
  );
}

/** Snapshots in the store, newest first (optionally only those of `dir`). */
export async function listSnapshots(
  root: string,
  options: ListSnapshotsOptions = {},
): Promise<SnapshotInfo[]> {
  const o = parseOptions(ListSnapshotsOptions, options, "list");
  const layout = new Layout(resolve(root));
  const infos = await listInfos(layout);
  if (o.dir === undefined) return infos;
  let dir = resolve(o.dir);
  dir = await Deno.realPath(dir).catch(() => dir); // a removed directory still has snapshots
  return infos.filter((i) => i.dir === dir);
}

/** The whole manifest of snapshot `id` (SNAPSHOT_NOT_FOUND, SNAPSHOT_CORRUPT). */
export async function getSnapshot(root: string, id: string): Promise<SnapshotManifest> {
  return await readManifest(new Layout(resolve(root)), id);
}

/** Removes snapshot `id` and then the objects no other snapshot references. */
export async function removeSnapshot(root: string, id: string): Promise<RemoveSnapshotResult> {
  const layout = new Layout(resolve(root));
  return await withStoreLock(layout, () => removeLocked(layout, id));
}

async function removeLocked(layout: Layout, id: string): Promise<RemoveSnapshotResult> {
  await readInfo(layout, id).catch((err) => {
    // A corrupt manifest can still be removed; only a missing one cannot.
    if (err instanceof SnapshotError && err.snapshotCode === "SNAPSHOT_CORRUPT") return;
    throw err;
  });
  const candidates = await referencedObjects(layout, id);
  await Deno.remove(layout.manifest(id));
  await syncDir(layout.manifests);
  for (const other of await manifestIds(layout)) {
    if (candidates.size === 0) break;
    for (const sha of await referencedObjects(layout, other)) candidates.delete(sha);
  }
  let removed = 0;
  let freed = 0;
  for (const sha of candidates) {
    const st = await lstatOrUndefined(layout.object(sha));
    if (st?.isFile && await removeIfExists(layout.object(sha))) {
      removed++;
      freed += st.size;
    }
  }
  return { id, removed_objects: removed, freed_bytes: freed };
}

/** Removes every object no manifest references, and stale temp files. */
export async function gc(root: string): Promise<GcResult> {
  const layout = new Layout(resolve(root));
  return await withStoreLock(layout, async () => {
    await clearTemps(layout);
    const referenced = new Set<string>();
    const corrupt: string[] = [];
    for (const id of await manifestIds(layout)) {
      try {
        await readInfo(layout, id);
      } catch (err) {
        if (!(err instanceof SnapshotError)) throw err;
        corrupt.push(id);
      }
      for (const sha of await referencedObjects(layout, id)) referenced.add(sha);
    }
    const out: GcResult = {
      removed_objects: 0,
      freed_bytes: 0,
      kept_objects: 0,
      corrupt_manifests: corrupt.sort(),
    };
    for await (const sub of Deno.readDir(layout.objects)) {
      if (!sub.isDirectory || !/^[0-9a-f]{2}$/.test(sub.name)) continue;
      for await (const e of Deno.readDir(`${layout.objects}/${sub.name}`)) {
        if (!e.isFile || !/^[0-9a-f]{64}$/.test(e.name)) continue;
        if (referenced.has(e.name)) {
          out.kept_objects++;
          continue;
        }
        const path = `${layout.objects}/${sub.name}/${e.name}`;
        const st = await lstatOrUndefined(path);
        if (st && await removeIfExists(path)) {
          out.removed_objects++;
          out.freed_bytes += st.size;
        }
      }
    }
    return out;
  });
}
