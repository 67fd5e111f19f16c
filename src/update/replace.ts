/**
 * Swapping the installed binary for a new one without a moment where it is missing or partial:
 * the new bytes go to a temp file in the target's own directory (same file system), are synced,
 * made executable and run once (`<new> version`), and only then renamed over the target. A
 * failure at any step removes the temp file and leaves the target byte-identical.
 */
import { basename, dirname, join } from "node:path";
import { randomHex } from "../shared/mod.ts";
import { UpdateError } from "./error.ts";

/** What `<binary> version` prints first: `termada <version>`; BAD_BINARY otherwise. */
export async function binaryVersion(path: string, timeoutMs = 15_000): Promise<string> {
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command(path, {
      args: ["version"],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(timeoutMs),
    }).output();
  } catch (err) {
    throw new UpdateError("BAD_BINARY", `The new binary does not run: ${(err as Error).message}`, {
      cause: err,
    });
  }
  const text = new TextDecoder().decode(out.stdout).slice(0, 400);
  const m = /^termada v?(\S+)/.exec(text);
  if (!out.success || !m) {
    throw new UpdateError(
      "BAD_BINARY",
      `The new binary's "version" ${
        out.success ? "printed no version" : `exited with ${out.code}`
      }: ${JSON.stringify(text.trim().slice(0, 80))}`,
    );
  }
  return m[1]!;
}

export interface ReplaceOptions {
  /** Runs on the written temp file before the swap; throwing cancels the swap. */
  check?: (path: string) => Promise<void>;
}

/**
 * Replaces the file at `target` (through symlinks: the file itself is replaced, the link kept)
 * with `bytes`, mode 0755. Returns the path that was replaced.
 */
export async function replaceBinary(
  target: string,
  bytes: Uint8Array,
  options: ReplaceOptions = {},
): Promise<string> {
  let real: string;
  try {
    real = await Deno.realPath(target);
    if (!(await Deno.stat(real)).isFile) throw new Error("not a regular file");
  } catch (err) {
    throw new UpdateError(
      "NOT_WRITABLE",
      `Cannot replace "${target}": ${(err as Error).message}`,
      { cause: err },
    );
  }
  const dir = dirname(real);
  const tmp = join(dir, `.${basename(real)}.update-${randomHex(6)}`);
  let placed = false;
  try {
    try {
      const f = await Deno.open(tmp, { write: true, createNew: true, mode: 0o755 });
      try {
        let off = 0;
        while (off < bytes.length) off += await f.write(bytes.subarray(off));
        await f.sync();
      } finally {
        f.close();
      }
      if (Deno.build.os !== "windows") await Deno.chmod(tmp, 0o755);
    } catch (err) {
      throw new UpdateError(
        "NOT_WRITABLE",
        `Cannot write the new binary next to "${real}": ${(err as Error).message}`,
        {
          cause: err,
          hint: "Run as the user who owns it, or reinstall with install.sh",
        },
      );
    }
    await options.check?.(tmp);
    if (Deno.build.os === "windows") {
      // A running .exe cannot be overwritten but can be renamed: move it aside first.
      const old = `${real}.old`;
      await Deno.remove(old).catch(() => {/* no stale .old from an earlier update */});
      await Deno.rename(real, old);
    }
    await Deno.rename(tmp, real);
    placed = true;
    await syncDir(dir);
    return real;
  } finally {
    if (!placed) await Deno.remove(tmp).catch(() => {/* never written, or already gone */});
  }
}

/** Makes the rename durable. Best effort: not every platform can fsync a directory. */
async function syncDir(dir: string): Promise<void> {
  if (Deno.build.os === "windows") return;
  try {
    using d = await Deno.open(dir, { read: true });
    await d.sync();
  } catch {
    // The rename happened; only its durability across a power cut is not guaranteed.
  }
}
