/**
 * The launcher's own code, pinned when the daemon starts. Every session and one-shot job starts
 * through the launcher, which runs as the daemon's user before the boundary exists; its code is
 * the daemon's binary (or, from source, the `deno` binary and launcher_main.ts with the modules
 * it imports). A session whose user owns those files (a daemon of an ordinary user running from
 * its own `~/.local/bin` or checkout, or a root session) could rewrite them, and the next launch
 * would run that code outside the boundary. So each launch first checks that every such file is
 * still the one seen at start: device, inode, size and ctime (a write, a rename over it, a chmod
 * all change one of them, and ctime cannot be set back without the clock, which sessions may not
 * set). A changed file refuses every launch until the daemon is restarted (docs/SECURITY.md).
 */
import { fileURLToPath } from "node:url";
import { dirname, resolve } from "node:path";
import { statPath } from "../../ffi/mod.ts";

/** Most files pinned (the launcher's module graph is ~20 files). */
export const MAX_PINNED_FILES = 256;

interface Pinned {
  path: string;
  id: string;
}

/** Device, inode, size and ctime (to the nanosecond: stat(2), not Deno's seconds) of `path`. */
function identity(path: string): string {
  const st = statPath(path);
  return st ? `${st.dev}:${st.ino}:${st.size}:${st.ctime}` : "missing";
}

const IMPORT = /(?:^|[\s;])(?:import|export)\b[^"'`;]*?["'](\.{1,2}\/[^"']+)["']/g;

/** launcher_main.ts and every module it imports by a relative path (bounded). */
function launcherModules(): string[] {
  const start = fileURLToPath(new URL("./launcher_main.ts", import.meta.url));
  const seen = new Set<string>([start]);
  const todo = [start];
  while (todo.length > 0 && seen.size < MAX_PINNED_FILES) {
    const file = todo.pop()!;
    let text: string;
    try {
      text = Deno.readTextFileSync(file);
    } catch {
      continue; // pinned as "missing": a launch then fails on it anyway
    }
    for (const m of text.matchAll(IMPORT)) {
      const dep = resolve(dirname(file), m[1]!);
      if (!seen.has(dep) && seen.size < MAX_PINNED_FILES) {
        seen.add(dep);
        todo.push(dep);
      }
    }
  }
  return [...seen];
}

export class LauncherCode {
  readonly #files: Pinned[];

  private constructor(files: Pinned[]) {
    this.#files = files;
  }

  /** The files the launcher runs from, as they are now. */
  static pin(): LauncherCode {
    // deno-lint-ignore no-explicit-any
    const standalone = (Deno.build as any).standalone === true;
    return LauncherCode.of([Deno.execPath(), ...(standalone ? [] : launcherModules())]);
  }

  /** `paths` as they are now (at most MAX_PINNED_FILES). */
  static of(paths: readonly string[]): LauncherCode {
    return new LauncherCode(
      paths.slice(0, MAX_PINNED_FILES).map((path) => ({ path, id: identity(path) })),
    );
  }

  /** The pinned paths. */
  get paths(): string[] {
    return this.#files.map((f) => f.path);
  }

  /** How many files are pinned. */
  get size(): number {
    return this.#files.length;
  }

  /** The first pinned file that is not the one seen at start, or undefined. */
  changed(): string | undefined {
    for (const f of this.#files) if (identity(f.path) !== f.id) return f.path;
    return undefined;
  }
}
