/**
 * File helpers of the store: the per-root lock (a promise queue in this process, `flock` on
 * `<root>/lock` across processes), atomic writes, directory fsync, temp names.
 */
import { resolve } from "node:path";
import { delay, randomHex, within, writeFileAtomic } from "../shared/mod.ts";
import { SnapshotError } from "./errors.ts";
import type { Layout } from "./_paths.ts";

export const LOCK_TIMEOUT_MS = 30_000;
const LOCK_POLL_MS = 20;
export const DIR_MODE = 0o700;
export const FILE_MODE = 0o600;

const localTails = new Map<string, Promise<void>>();

/** Creates the store's directories (mode 0700) when missing. */
export async function ensureStore(layout: Layout): Promise<void> {
  for (const d of [layout.root, layout.objects, layout.tmp, layout.manifests]) {
    await Deno.mkdir(d, { recursive: true, mode: DIR_MODE });
  }
}

/** Runs `fn` holding the store's exclusive lock (SNAPSHOT_BUSY after `timeoutMs`). */
export async function withStoreLock<T>(
  layout: Layout,
  fn: () => Promise<T>,
  timeoutMs = LOCK_TIMEOUT_MS,
): Promise<T> {
  const key = resolve(layout.root);
  const deadline = performance.now() + timeoutMs;
  const prev = localTails.get(key) ?? Promise.resolve();
  const mine = Promise.withResolvers<void>();
  const tail = prev.then(() => mine.promise);
  localTails.set(key, tail);
  const release = () => {
    mine.resolve();
    if (localTails.get(key) === tail) localTails.delete(key);
  };
  if (await within(prev.then(() => true), timeoutMs) === undefined) {
    prev.then(release); // keep the queue intact: our turn passes as soon as it comes
    throw busy(layout.root, "another operation of this process holds it");
  }
  try {
    await ensureStore(layout);
    const file = await Deno.open(layout.lock, { create: true, write: true, mode: FILE_MODE });
    try {
      while (!await file.tryLock(true)) {
        if (performance.now() >= deadline) {
          throw busy(layout.root, `another process holds "${layout.lock}"`);
        }
        await delay(LOCK_POLL_MS);
      }
      return await fn();
    } finally {
      file.close(); // releases the flock
    }
  } finally {
    release();
  }
}

function busy(root: string, why: string): SnapshotError {
  return new SnapshotError("SNAPSHOT_BUSY", `Cannot lock snapshot store "${root}": ${why}`, {
    hint: "Retry when the other snapshot operation has finished",
  });
}

export function tempName(): string {
  return `.termada-tmp-${randomHex(8)}`;
}

/** Writes `bytes` to `path` through a temp file beside it (fsync, rename, fsync of the dir). */
export function writeAtomic(dir: string, path: string, bytes: Uint8Array): Promise<void> {
  return writeFileAtomic(path, bytes, { tmp: `${dir}/${tempName()}`, mode: FILE_MODE });
}

/** Removes a file; true when it was there. */
export async function removeIfExists(path: string): Promise<boolean> {
  try {
    await Deno.remove(path);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

export async function lstatOrUndefined(path: string): Promise<Deno.FileInfo | undefined> {
  try {
    return await Deno.lstat(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
}

/** Runs `fn` over `items` with at most `width` calls in flight; the first error wins. */
export async function forEachLimited<T>(
  items: readonly T[],
  width: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  let failed = false;
  const worker = async () => {
    while (!failed && next < items.length) {
      const item = items[next++]!;
      try {
        await fn(item);
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  };
  const results = await Promise.allSettled(
    Array.from({ length: Math.min(width, items.length) }, worker),
  );
  const bad = results.find((r) => r.status === "rejected");
  if (bad) throw (bad as PromiseRejectedResult).reason;
}
