/** Test helpers for the engine: a fresh engine in a temp dir, torn down with `await using`. */
import { preloadNative } from "../pty/mod.ts";
import { Engine, type EngineOptions } from "./mod.ts";

preloadNative();

export interface TestEngine extends AsyncDisposable {
  engine: Engine;
  dir: string;
}

export async function testEngine(options: Partial<EngineOptions> = {}): Promise<TestEngine> {
  const dir = await Deno.makeTempDir({ prefix: "termada-test-" });
  const engine = new Engine({
    runtimeDir: dir,
    defaultCwd: dir,
    env: {
      PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
      HOME: dir,
      LANG: "C.UTF-8",
    },
    killGraceMs: 300,
    ...options,
  });
  return {
    engine,
    dir,
    async [Symbol.asyncDispose]() {
      await engine.shutdown();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

/** Asserts that `fn` rejects with a TermadaError of `code`. */
export async function rejectsWith(fn: () => unknown, code: string): Promise<Error> {
  try {
    await fn();
  } catch (err) {
    const c = (err as { code?: string }).code;
    if (c !== code) {
      throw new Error(`expected error ${code}, got ${c ?? "no code"}: ${(err as Error).message}`);
    }
    return err as Error;
  }
  throw new Error(`expected error ${code}, but it succeeded`);
}

/** Lists pids whose command line contains `needle` (via pgrep, outside the engine). */
export function pgrep(needle: string): number[] {
  const out = new Deno.Command("pgrep", { args: ["-f", needle], stdout: "piped" }).outputSync();
  return new TextDecoder().decode(out.stdout).trim().split("\n").filter(Boolean).map(Number);
}
