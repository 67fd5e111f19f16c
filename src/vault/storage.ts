/**
 * The vault file's bytes on disk: bounded reads, atomic replacement (temp file in the same
 * directory, fsync, rename, fsync of the directory), removal of a crashed writer's temp files,
 * and the lock that serialises writers — in this process (a promise queue per path) and across
 * processes (`flock` on `<path>.lock`, polled with `tryLock` so waiting can time out).
 */
import { basename, dirname, resolve } from "node:path";
import { delay, randomHex, within, writeAll, writeFileAtomic } from "../shared/mod.ts";
import { VaultError } from "./errors.ts";
import { VAULT_LIMITS } from "./format.ts";

export const LOCK_TIMEOUT_MS = 10_000;
const LOCK_POLL_MS = 20;
const TEMP_RE = /\.tmp-[0-9a-f]{16}$/;
const FILE_MODE = 0o600;

/** Tail of the queue of lock holders in this process, per absolute vault path. */
const localTails = new Map<string, Promise<void>>();

/**
 * Runs `fn` holding the vault's exclusive lock, or throws VAULT_BUSY after `timeoutMs`. The
 * lock file stays: removing it would let two processes lock two different inodes.
 */
export async function withLock<T>(
  path: string,
  fn: () => Promise<T>,
  timeoutMs = LOCK_TIMEOUT_MS,
): Promise<T> {
  const key = resolve(path);
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
    throw busy(path, timeoutMs, "another operation of this process holds it");
  }
  try {
    const file = await lockFile(
      `${path}.lock`,
      deadline,
      () => busy(path, timeoutMs, `another process holds "${path}.lock"`),
    );
    try {
      return await fn();
    } finally {
      file.close(); // releases the flock
    }
  } finally {
    release();
  }
}

async function lockFile(
  lockPath: string,
  deadline: number,
  timedOut: () => VaultError,
): Promise<Deno.FsFile> {
  const file = await Deno.open(lockPath, { create: true, write: true, mode: FILE_MODE });
  try {
    while (!await file.tryLock(true)) {
      if (performance.now() >= deadline) throw timedOut();
      await delay(LOCK_POLL_MS);
    }
    // Who holds it, for an operator looking at a stuck lock (flock itself dies with the holder).
    await file.truncate(0);
    await writeAll(file, new TextEncoder().encode(`${Deno.pid}\n`));
    return file;
  } catch (err) {
    file.close();
    throw err;
  }
}

function busy(path: string, ms: number, why: string): VaultError {
  return new VaultError(
    "VAULT_BUSY",
    `Cannot lock vault "${path}" within ${ms / 1000} s: ${why}`,
    { hint: "Retry when the other vault operation has finished" },
  );
}

/** The file's bytes, or undefined when it does not exist. Oversize → VAULT_CORRUPT. */
export async function readVaultBytes(path: string): Promise<Uint8Array | undefined> {
  let file: Deno.FsFile;
  try {
    file = await Deno.open(path, { read: true });
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
  try {
    const st = await file.stat();
    if (!st.isFile) throw corruptFile(path, "it is not a regular file");
    if (st.size > VAULT_LIMITS.fileBytes) {
      throw corruptFile(path, `it has ${st.size} bytes, more than ${VAULT_LIMITS.fileBytes}`);
    }
    // Read at most one byte past the limit: the file may grow between stat and read.
    const buf = new Uint8Array(st.size + 1);
    let n = 0;
    for (;;) {
      const got = await file.read(buf.subarray(n));
      if (got === null) break;
      n += got;
      if (n === buf.length) throw corruptFile(path, "it changed while being read");
    }
    return buf.subarray(0, n);
  } finally {
    file.close();
  }
}

function corruptFile(path: string, what: string): VaultError {
  return new VaultError("VAULT_CORRUPT", `Vault file "${path}" is unusable: ${what}`, {
    hint: "Restore it from a backup, or remove it with `termada vault reset`",
  });
}

/**
 * Replaces `path` with `bytes` so that readers see the old file or the new one, never a mix,
 * even across a crash. The caller holds the lock (so every temp file found is stale).
 */
export async function writeAtomic(path: string, bytes: Uint8Array): Promise<void> {
  await removeTemps(path);
  await writeFileAtomic(path, bytes, {
    tmp: `${dirname(path)}/${basename(path)}.tmp-${randomHex(8)}`,
    mode: FILE_MODE,
    beforeWrite: async (file) => {
      if (crashHook() !== "after-partial-write") return;
      await writeAll(file, bytes.subarray(0, bytes.length >> 1));
      await file.sync();
      Deno.kill(Deno.pid, "SIGKILL");
    },
  });
}

/** Removes temp files a crashed writer left beside `path`; returns how many. */
export async function removeTemps(path: string): Promise<number> {
  const dir = dirname(path);
  const prefix = `${basename(path)}.tmp-`;
  let removed = 0;
  try {
    for await (const e of Deno.readDir(dir)) {
      if (e.isFile && e.name.startsWith(prefix) && TEMP_RE.test(e.name)) {
        await Deno.remove(`${dir}/${e.name}`).catch(() => {/* another cleaner was first */});
        removed++;
      }
    }
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  return removed;
}

let crashMode: string | undefined | null = null;

/**
 * Test hook, read once per process: with `TERMADA_VAULT_TEST_CRASH=after-partial-write` a write
 * stops dead (SIGKILL to itself) after half of the temp file is on disk, so tests can check
 * that a crashed writer leaves the vault intact. Used only by tests/vault_age_cli_test.ts.
 */
function crashHook(): string | undefined {
  if (crashMode === null) {
    try {
      crashMode = Deno.env.get("TERMADA_VAULT_TEST_CRASH");
    } catch {
      crashMode = undefined; // no env permission: the hook is off
    }
  }
  return crashMode;
}
