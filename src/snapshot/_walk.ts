/**
 * The walk of a directory to snapshot: lstat only (symlinks are recorded, never followed),
 * children in sorted order so parents come first, excludes and limits applied before any byte
 * is copied, so a tree over a limit fails without writing anything.
 */
import { tooLarge } from "./errors.ts";
import { badRelPath, type Excludes, utf8Length } from "./_paths.ts";
import { type SkippedEntry, SNAPSHOT_LIMITS, type SnapshotLimits } from "./schema.ts";

export type WalkedEntry =
  | { rel: string; type: "file"; info: Deno.FileInfo }
  | { rel: string; type: "dir"; info: Deno.FileInfo }
  | { rel: string; type: "symlink"; info: Deno.FileInfo; target: string };

export interface WalkResult {
  entries: WalkedEntry[];
  skipped: SkippedEntry[];
  /** Sum of regular files' sizes as lstat saw them. */
  bytes: number;
}

export interface WalkOptions {
  excludes: Excludes;
  limits: SnapshotLimits;
  /** The store's real path: never walked into (a snapshot of a parent of the store). */
  storeRoot: string;
  /** Treat a missing `dir` as empty (the pre-restore snapshot of a target not yet created). */
  allowMissing?: boolean;
}

function skippedKind(info: Deno.FileInfo): SkippedEntry["skipped"] {
  if (info.isSocket) return "socket";
  if (info.isFifo) return "fifo";
  if (info.isBlockDevice || info.isCharDevice) return "device";
  return "unknown_type";
}

function shortPath(rel: string): string {
  return rel.length > SNAPSHOT_LIMITS.pathBytes ? `${rel.slice(0, 4000)}…` : rel;
}

/** Walks `dir` (a real, absolute directory path). */
export async function walkTree(dir: string, options: WalkOptions): Promise<WalkResult> {
  const { excludes, limits, storeRoot } = options;
  const out: WalkResult = { entries: [], skipped: [], bytes: 0 };
  const count = () => out.entries.length + out.skipped.length;
  const skip = (rel: string, skipped: SkippedEntry["skipped"]) => {
    out.skipped.push({ path: shortPath(rel), skipped });
    if (count() > limits.max_files) throw tooLarge(dir, "max_files", limits.max_files, count());
  };

  const visit = async (relDir: string): Promise<void> => {
    const absDir = relDir === "" ? dir : `${dir}/${relDir}`;
    let names: string[];
    try {
      names = [];
      for await (const e of Deno.readDir(absDir)) names.push(e.name);
    } catch (err) {
      if (relDir === "" && options.allowMissing && err instanceof Deno.errors.NotFound) return;
      if (relDir === "") throw err;
      return skip(relDir, err instanceof Deno.errors.NotFound ? "vanished" : "unreadable");
    }
    names.sort();
    for (const name of names) {
      const rel = relDir === "" ? name : `${relDir}/${name}`;
      if (excludes.matches(rel)) continue;
      const abs = `${dir}/${rel}`;
      if (badRelPath(rel) !== undefined) {
        skip(rel, "path_too_long");
        continue;
      }
      let info: Deno.FileInfo;
      try {
        info = await Deno.lstat(abs);
      } catch (err) {
        skip(rel, err instanceof Deno.errors.NotFound ? "vanished" : "unreadable");
        continue;
      }
      if (info.isSymlink) {
        let target: string;
        try {
          target = await Deno.readLink(abs);
        } catch (err) {
          skip(rel, err instanceof Deno.errors.NotFound ? "vanished" : "unreadable");
          continue;
        }
        if (target === "" || utf8Length(target) > SNAPSHOT_LIMITS.pathBytes) {
          skip(rel, "path_too_long");
          continue;
        }
        out.entries.push({ rel, type: "symlink", info, target });
      } else if (info.isDirectory) {
        if (abs === storeRoot) {
          skip(rel, "snapshot_store");
          continue;
        }
        out.entries.push({ rel, type: "dir", info });
      } else if (info.isFile) {
        if (info.size > limits.max_file_bytes) {
          throw tooLarge(dir, "max_file_bytes", limits.max_file_bytes, info.size);
        }
        out.bytes += info.size;
        if (out.bytes > limits.max_bytes) {
          throw tooLarge(dir, "max_bytes", limits.max_bytes, out.bytes);
        }
        out.entries.push({ rel, type: "file", info });
      } else {
        skip(rel, skippedKind(info));
        continue;
      }
      if (count() > limits.max_files) throw tooLarge(dir, "max_files", limits.max_files, count());
      if (info.isDirectory) await visit(rel);
    }
  };
  await visit("");
  return out;
}
