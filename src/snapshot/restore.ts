/**
 * Restoring a snapshot into its directory (or another target): first an automatic
 * `pre_restore` snapshot of the target (so the restore can be undone), then per entry an atomic
 * replacement (temp file or link beside it, rename over), never through a symlinked parent.
 */
import { resolve } from "node:path";
import { systemClock } from "../shared/mod.ts";
import { badArgument } from "./errors.ts";
import {
  forEachLimited,
  lstatOrUndefined,
  removeIfExists,
  tempName,
  withStoreLock,
} from "./_fs.ts";
import { comparePaths, readManifest } from "./_manifest.ts";
import { copyBlob } from "./_objects.ts";
import { Layout, relParent } from "./_paths.ts";
import {
  RestoreSnapshotOptions,
  SNAPSHOT_LIMITS,
  type SnapshotEntry,
  SnapshotLimits,
} from "./schema.ts";
import { createLocked, parseOptions, type SnapshotRuntime } from "./store.ts";

export interface RestoreFailure {
  path: string;
  error: string;
}

export interface RestoreResult {
  snapshot_id: string;
  target: string;
  /** The automatic pre-restore snapshot: restoring it undoes this restore. */
  undo_snapshot_id: string;
  delete_extra: boolean;
  /** Existing paths replaced (content, type, mode or link target differed). */
  restored: number;
  /** Paths that did not exist. */
  created: number;
  /** Paths already as in the snapshot (same hash and mode, same link target, a directory). */
  unchanged: number;
  /** Extra paths removed (delete_extra). */
  deleted: number;
  failed: number;
  /** The first SNAPSHOT_LIMITS.failuresListed failures. */
  failures: RestoreFailure[];
}

/** Test seam: runs before each path is acted on (to race a swap against the checks). */
export interface RestoreHooks {
  beforeEntry?(path: string): Promise<void>;
}

/** Files written at once (each holds a thread of Deno's blocking pool while it syncs). */
const WRITE_WIDTH = 8;

type Outcome = "restored" | "created" | "unchanged";

/**
 * Restores snapshot `id`. Nothing changes unless the pre-restore snapshot succeeded; after
 * that, each path succeeds or fails alone (see `failures`).
 */
export async function restoreSnapshot(
  root: string,
  id: string,
  options: RestoreSnapshotOptions & SnapshotRuntime = {},
): Promise<RestoreResult> {
  return await restoreWithHooks(root, id, options, {});
}

export async function restoreWithHooks(
  root: string,
  id: string,
  options: RestoreSnapshotOptions & SnapshotRuntime,
  hooks: RestoreHooks,
): Promise<RestoreResult> {
  const { clock, ...wire } = options;
  const o = parseOptions(RestoreSnapshotOptions, wire, "restore");
  const layout = new Layout(resolve(root));
  return await withStoreLock(layout, async () => {
    const manifest = await readManifest(layout, id);
    const storeRoot = await Deno.realPath(layout.root);
    const wanted = resolve(o.target ?? manifest.info.dir);
    if (wanted === storeRoot || wanted.startsWith(`${storeRoot}/`)) {
      throw badArgument(
        `Cannot restore into "${wanted}": it is inside the snapshot store`,
        "target",
      );
    }
    const before = await lstatOrUndefined(wanted);
    if (before !== undefined && !(await Deno.stat(wanted)).isDirectory) {
      throw badArgument(`Cannot restore into "${wanted}": it is not a directory`, "target");
    }
    const limits = SnapshotLimits.parse({ ...manifest.info.limits, ...o.limits });
    const deleteExtra = o.delete_extra ?? manifest.info.kind === "pre_restore";
    // The undo point first; over a limit it throws and nothing has changed.
    const targetPath = before === undefined ? wanted : await Deno.realPath(wanted);
    const undo = await createLocked(layout, targetPath, {
      excludes: manifest.info.excludes,
      include_git: manifest.info.include_git,
      limits,
      keep: o.keep,
      kind: "pre_restore",
      restore_of: id,
      created_by: o.created_by,
      reason: o.reason,
      protect: id,
      allowMissing: true,
      clock: clock ?? systemClock,
    });
    await Deno.mkdir(targetPath, { recursive: true });
    const target = await Deno.realPath(targetPath);
    const current = await readManifest(layout, undo.snapshot.id);
    const job = new RestoreJob(layout, target, hooks);
    const result: RestoreResult = {
      snapshot_id: id,
      target,
      undo_snapshot_id: undo.snapshot.id,
      delete_extra: deleteExtra,
      restored: 0,
      created: 0,
      unchanged: 0,
      deleted: 0,
      failed: 0,
      failures: job.failures,
    };
    const now = new Map(current.entries.map((e) => [e.path, e]));
    if (deleteExtra) {
      const want = new Set(manifest.entries.map((e) => e.path));
      const extras = current.entries.filter((e) => !want.has(e.path))
        .sort((a, b) => comparePaths(b.path, a.path)); // children before their parents
      for (const e of extras) if (await job.remove(e.path)) result.deleted++;
    }
    // Directories first, in order (parents before children), then files and links in
    // parallel: every parent they need exists by then, or has failed and fails them.
    const dirs: (SnapshotEntry & { type: "dir" })[] = [];
    for (const e of manifest.entries) {
      if (e.type !== "dir") continue;
      const outcome = await job.apply(e, now.get(e.path));
      if (outcome !== undefined) result[outcome]++;
      if (outcome !== undefined) dirs.push(e);
    }
    const leaves = manifest.entries.filter((e) => e.type !== "dir");
    await forEachLimited(leaves, WRITE_WIDTH, async (e) => {
      const outcome = await job.apply(e, now.get(e.path));
      if (outcome !== undefined) result[outcome]++;
    });
    // Directory modes and mtimes last, deepest first: writing inside a directory moves its
    // mtime, and a read-only mode would have refused the writes.
    for (const d of dirs.reverse()) await job.fixDir(d);
    result.failed = job.failedCount;
    return result;
  });
}

class RestoreJob {
  readonly failures: RestoreFailure[] = [];
  failedCount = 0;
  readonly #failedDirs = new Set<string>();

  constructor(
    readonly layout: Layout,
    readonly target: string,
    readonly hooks: RestoreHooks,
  ) {}

  #fail(path: string, err: unknown): void {
    this.failedCount++;
    if (this.failures.length < SNAPSHOT_LIMITS.failuresListed) {
      this.failures.push({ path, error: err instanceof Error ? err.message : String(err) });
    }
  }

  /**
   * The absolute path of `rel` once every parent component was checked with lstat to be a
   * real directory (not a link): nothing is ever written through a symlinked parent.
   */
  async #checked(rel: string): Promise<string> {
    const segs = relParent(rel) === "" ? [] : relParent(rel).split("/");
    let at = this.target;
    for (let i = -1; i < segs.length; i++) {
      if (i >= 0) at = `${at}/${segs[i]}`;
      const st = await lstatOrUndefined(at);
      if (st === undefined) throw new Error(`Parent "${at}" does not exist`);
      if (!st.isDirectory || st.isSymlink) {
        throw new Error(`Parent "${at}" is not a real directory (a symlink or a file)`);
      }
    }
    return `${this.target}/${rel}`;
  }

  #underFailedDir(rel: string): boolean {
    for (let p = relParent(rel); p !== ""; p = relParent(p)) {
      if (this.#failedDirs.has(p)) return true;
    }
    return false;
  }

  async remove(rel: string): Promise<boolean> {
    try {
      await this.hooks.beforeEntry?.(rel);
      const abs = await this.#checked(rel);
      return await removeIfExists(abs); // a directory only when empty: excluded files stay
    } catch (err) {
      this.#fail(rel, err);
      return false;
    }
  }

  async apply(e: SnapshotEntry, cur: SnapshotEntry | undefined): Promise<Outcome | undefined> {
    try {
      await this.hooks.beforeEntry?.(e.path);
      if (this.#underFailedDir(e.path)) throw new Error("Its parent directory was not restored");
      // The pre-restore snapshot has just seen it as wanted: nothing to write, nothing to check.
      if (same(e, cur)) return "unchanged";
      const abs = await this.#checked(e.path);
      const now = await lstatOrUndefined(abs);
      if (e.type === "dir") {
        if (now?.isDirectory) {
          return (now.mode! & 0o1777) === (e.mode & 0o1777) ? "unchanged" : "restored";
        }
        if (now !== undefined) await Deno.remove(abs); // a file or link in the way (undoable)
        await Deno.mkdir(abs, { mode: 0o700 });
        return now === undefined ? "created" : "restored";
      }
      if (now?.isDirectory) {
        try {
          await Deno.remove(abs);
        } catch (err) {
          throw new Error(`A non-empty directory is in the way`, { cause: err });
        }
      }
      if (e.type === "file") await this.#writeFile(e, abs);
      else await this.#writeLink(e, abs);
      return now === undefined ? "created" : "restored";
    } catch (err) {
      this.#fail(e.path, err);
      if (e.type === "dir") this.#failedDirs.add(e.path);
      return undefined;
    }
  }

  async #writeFile(e: SnapshotEntry & { type: "file" }, abs: string): Promise<void> {
    const tmp = `${abs.slice(0, abs.lastIndexOf("/"))}/${tempName()}`;
    try {
      const f = await Deno.open(tmp, { createNew: true, write: true, mode: 0o600 });
      try {
        await copyBlob(this.layout, e.sha256, f);
        if (e.mtime_ms !== null) await f.utime(new Date(e.mtime_ms), new Date(e.mtime_ms));
        await f.sync();
      } finally {
        f.close();
      }
      // Setuid, setgid and sticky bits are not restored on files.
      await Deno.chmod(tmp, e.mode & 0o777);
      await this.#checked(e.path); // once more, right before the rename (narrows the race)
      await Deno.rename(tmp, abs);
    } catch (err) {
      await removeIfExists(tmp);
      throw err;
    }
  }

  async #writeLink(e: SnapshotEntry & { type: "symlink" }, abs: string): Promise<void> {
    const tmp = `${abs.slice(0, abs.lastIndexOf("/"))}/${tempName()}`;
    try {
      await Deno.symlink(e.target, tmp);
      await this.#checked(e.path);
      await Deno.rename(tmp, abs);
    } catch (err) {
      await removeIfExists(tmp);
      throw err;
    }
  }

  async fixDir(d: SnapshotEntry & { type: "dir" }): Promise<void> {
    try {
      const abs = await this.#checked(d.path);
      const st = await Deno.lstat(abs);
      if (!st.isDirectory || st.isSymlink) throw new Error(`"${abs}" is no longer a directory`);
      await Deno.chmod(abs, d.mode & 0o1777);
      if (d.mtime_ms !== null) await Deno.utime(abs, new Date(d.mtime_ms), new Date(d.mtime_ms));
    } catch (err) {
      this.#fail(d.path, err);
    }
  }
}

/** The pre-restore entry `cur` already holds what `e` wants (content and mode, or link). */
function same(e: SnapshotEntry, cur: SnapshotEntry | undefined): boolean {
  if (cur === undefined || cur.type !== e.type) return false;
  if (e.type === "file" && cur.type === "file") {
    return e.sha256 === cur.sha256 && (e.mode & 0o777) === (cur.mode & 0o777);
  }
  if (e.type === "symlink" && cur.type === "symlink") return e.target === cur.target;
  return e.type === "dir" && cur.type === "dir" && (e.mode & 0o1777) === (cur.mode & 0o1777);
}
