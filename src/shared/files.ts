/**
 * Durable file writes, once: every byte of a buffer to a file, a directory's fsync (so a rename
 * in it survives a power cut), and a whole-file replace through a temp file beside it (fsync,
 * rename, fsync of the directory) that readers see as the old file or the new one, never a mix.
 */

/** Writes all of `bytes` (a write may take only part of them). */
export async function writeAll(
  to: { write(p: Uint8Array): Promise<number> },
  bytes: Uint8Array,
): Promise<void> {
  let at = 0;
  while (at < bytes.length) at += await to.write(bytes.subarray(at));
}

/** fsync of a directory: makes a rename or a new entry in it durable. */
export async function syncDir(dir: string): Promise<void> {
  using d = await Deno.open(dir, { read: true });
  await d.sync();
}

export interface AtomicWriteOptions {
  /** The temp file's path (same directory as `path`, so the rename is atomic). */
  tmp: string;
  /** Its mode, applied past the umask. */
  mode: number;
  /** Runs on the open temp file before the bytes are written (tests: crash injection). */
  beforeWrite?: (file: Deno.FsFile) => Promise<void>;
}

/**
 * Replaces `path` with `bytes` through `options.tmp`: written, fsynced, renamed, the directory
 * fsynced. On failure the temp file is removed and nothing at `path` changed.
 */
export async function writeFileAtomic(
  path: string,
  bytes: Uint8Array,
  options: AtomicWriteOptions,
): Promise<void> {
  const { tmp } = options;
  try {
    const file = await Deno.open(tmp, { createNew: true, write: true, mode: options.mode });
    try {
      await Deno.chmod(tmp, options.mode); // `mode` is subject to the umask
      await options.beforeWrite?.(file);
      await writeAll(file, bytes);
      await file.sync();
    } finally {
      file.close();
    }
    await Deno.rename(tmp, path);
  } catch (err) {
    await Deno.remove(tmp).catch(() => {/* never created, or already renamed */});
    throw err;
  }
  await syncDir(tmp.slice(0, Math.max(1, tmp.lastIndexOf("/"))));
}
