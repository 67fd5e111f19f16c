/**
 * Content-addressed blobs: `objects/<sha[0:2]>/<sha256>`. A file is read once while hashed
 * (kept in memory up to 1 MiB, else spooled to `objects/tmp/`), checked for change, and renamed
 * into place only when no object of that hash exists (dedup). Reading a blob back verifies it.
 */
import { createHash } from "node:crypto";
import { tooLarge } from "./errors.ts";
import { DIR_MODE, FILE_MODE, lstatOrUndefined, removeIfExists, tempName } from "./_fs.ts";
import { writeAll } from "../shared/mod.ts";
import type { Layout } from "./_paths.ts";
import type { SnapshotLimits } from "./schema.ts";

const SMALL = 1 << 20;
const CHUNK = 256 << 10;

/** One snapshot's writes: what it created (removed again if it aborts) and its byte count. */
export interface PutSession {
  layout: Layout;
  dir: string;
  limits: SnapshotLimits;
  /** Object paths this snapshot wrote (not those it found already stored). */
  created: string[];
  /** Object directories renamed into: fsynced before the manifest is written. */
  dirs: Set<string>;
  bytes: number;
}

export type PutOutcome =
  | { kind: "stored"; sha256: string; size: number; info: Deno.FileInfo; changed: boolean }
  | { kind: "skipped"; why: "vanished" | "unreadable" | "replaced_during_copy" };

interface ReadResult {
  sha256: string;
  size: number;
  info: Deno.FileInfo;
  stable: boolean;
  chunks: Uint8Array[] | undefined;
  tmp: string | undefined;
}

function sameTime(a: Date | null, b: Date | null): boolean {
  return (a?.getTime() ?? null) === (b?.getTime() ?? null);
}

async function readOnce(
  s: PutSession,
  abs: string,
  before: Deno.FileInfo,
): Promise<ReadResult | "replaced"> {
  const file = await Deno.open(abs, { read: true });
  let out: Deno.FsFile | undefined;
  let tmp: string | undefined;
  try {
    const st0 = await file.stat();
    // Another inode than the walk saw (a swap, maybe for a link to a file outside): not copied.
    if (!st0.isFile || st0.ino !== before.ino || st0.dev !== before.dev) return "replaced";
    const hash = createHash("sha256");
    let chunks: Uint8Array[] | undefined = [];
    let size = 0;
    const spool = async (first: Uint8Array[]) => {
      tmp = `${s.layout.tmp}/${tempName()}`;
      out = await Deno.open(tmp, { createNew: true, write: true, mode: FILE_MODE });
      for (const c of first) await writeAll(out, c);
      chunks = undefined;
    };
    if (st0.size > SMALL) await spool([]);
    const buf = new Uint8Array(CHUNK);
    for (;;) {
      const n = await file.read(buf);
      if (n === null) break;
      size += n;
      if (size > s.limits.max_file_bytes) {
        throw tooLarge(s.dir, "max_file_bytes", s.limits.max_file_bytes, size);
      }
      const chunk = buf.subarray(0, n);
      hash.update(chunk);
      if (chunks !== undefined) {
        chunks.push(chunk.slice());
        if (size > SMALL) await spool(chunks);
      } else {
        await writeAll(out!, chunk);
      }
    }
    const st1 = await file.stat();
    const stable = size === st0.size && st1.size === st0.size && sameTime(st0.mtime, st1.mtime);
    if (out !== undefined && stable) await (out as Deno.FsFile).sync();
    return { sha256: hash.digest("hex"), size, info: st0, stable, chunks, tmp };
  } catch (err) {
    if (tmp !== undefined) {
      (out as Deno.FsFile | undefined)?.close();
      out = undefined;
      await removeIfExists(tmp);
    }
    throw err;
  } finally {
    file.close();
    (out as Deno.FsFile | undefined)?.close();
  }
}

async function commit(s: PutSession, r: ReadResult): Promise<void> {
  const dest = s.layout.object(r.sha256);
  const existing = await lstatOrUndefined(dest);
  if (existing?.isFile && existing.size === r.size) {
    if (r.tmp !== undefined) await removeIfExists(r.tmp);
    return;
  }
  const dir = dest.slice(0, dest.lastIndexOf("/"));
  await Deno.mkdir(dir, { recursive: true, mode: DIR_MODE });
  let tmp = r.tmp;
  if (tmp === undefined) {
    tmp = `${s.layout.tmp}/${tempName()}`;
    const out = await Deno.open(tmp, { createNew: true, write: true, mode: FILE_MODE });
    try {
      for (const c of r.chunks ?? []) await writeAll(out, c);
      await out.sync();
    } finally {
      out.close();
    }
  }
  await Deno.rename(tmp, dest);
  s.created.push(dest);
  s.dirs.add(dir);
}

/**
 * Stores the regular file at `abs` (walked as `before`). A file whose size or mtime moves while
 * read is read once more; if it moves again its last read is kept and flagged `changed`.
 */
export async function putFile(
  s: PutSession,
  abs: string,
  before: Deno.FileInfo,
): Promise<PutOutcome> {
  let seen = before;
  for (let attempt = 0;; attempt++) {
    let r: ReadResult | "replaced";
    try {
      if (attempt > 0) {
        seen = await Deno.lstat(abs);
        if (!seen.isFile) return { kind: "skipped", why: "replaced_during_copy" };
      }
      r = await readOnce(s, abs, seen);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return { kind: "skipped", why: "vanished" };
      if (err instanceof Deno.errors.PermissionDenied) {
        return { kind: "skipped", why: "unreadable" };
      }
      throw err;
    }
    if (r === "replaced" || (!r.stable && attempt === 0)) {
      if (r !== "replaced" && r.tmp !== undefined) await removeIfExists(r.tmp);
      if (attempt === 0) continue;
      return { kind: "skipped", why: "replaced_during_copy" };
    }
    s.bytes += r.size;
    if (s.bytes > s.limits.max_bytes) {
      if (r.tmp !== undefined) await removeIfExists(r.tmp);
      throw tooLarge(s.dir, "max_bytes", s.limits.max_bytes, s.bytes);
    }
    await commit(s, r);
    return { kind: "stored", sha256: r.sha256, size: r.size, info: r.info, changed: !r.stable };
  }
}

/** Thrown by `copyBlob` when an object is missing or its bytes do not hash to its name. */
export class BadObjectError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BadObjectError";
  }
}

/** Writes blob `sha256` into `out`, verifying its hash; the caller discards `out` on error. */
export async function copyBlob(layout: Layout, sha256: string, out: Deno.FsFile): Promise<void> {
  let blob: Deno.FsFile;
  try {
    blob = await Deno.open(layout.object(sha256), { read: true });
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      throw new BadObjectError(`Object "${sha256}" is missing from the store`);
    }
    throw err;
  }
  try {
    const hash = createHash("sha256");
    const buf = new Uint8Array(CHUNK);
    for (;;) {
      const n = await blob.read(buf);
      if (n === null) break;
      hash.update(buf.subarray(0, n));
      await writeAll(out, buf.subarray(0, n));
    }
    const got = hash.digest("hex");
    if (got !== sha256) {
      throw new BadObjectError(`Object "${sha256}" is corrupt: its bytes hash to "${got}"`);
    }
  } finally {
    blob.close();
  }
}
