/** Helpers the store's tests share: a temporary database, a hand-moved clock, row builders. */
import { DatabaseSync } from "node:sqlite";
import { type Clock, TermadaError } from "../shared/mod.ts";
import type { NewJob } from "./jobs.ts";
import type { NewSession } from "./sessions.ts";
import type { JobStatus } from "../wire/mod.ts";

/** A clock the test moves by hand. */
export function fakeClock(start = 1_700_000_000_000): Clock & { set(t: number): void } {
  let t = start;
  return { now: () => t, mono: () => t, set: (v) => (t = v) };
}

/** Runs `fn` with a database path in a fresh directory (`<dir>/state/termada.db`), then cleans up. */
export function withDb(fn: (path: string, dir: string) => void): void {
  const dir = Deno.makeTempDirSync({ prefix: "termada-store-" });
  try {
    fn(`${dir}/state/termada.db`, dir);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

export async function withDbAsync(fn: (path: string) => Promise<void>): Promise<void> {
  const dir = Deno.makeTempDirSync({ prefix: "termada-store-" });
  try {
    await fn(`${dir}/state/termada.db`);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

export const isCode = (code: string): (e: unknown) => boolean => (e: unknown): boolean =>
  e instanceof TermadaError && e.code === code;

/** Reads one pragma through a connection of its own. */
export function pragma(path: string, name: string): unknown {
  const db = new DatabaseSync(path);
  try {
    return (db.prepare(`PRAGMA ${name}`).get() as Record<string, unknown>)[name];
  } finally {
    db.close();
  }
}

export function session(id: string, owner: string, createdAt: number): NewSession {
  return {
    id,
    owner,
    shell: "bash",
    target: "local",
    cwd: "/tmp",
    workspace: null,
    cols: 120,
    rows: 40,
    created_at: createdAt,
  };
}

export function job(
  id: string,
  owner: string,
  startedAt: number,
  status: JobStatus = "running",
): NewJob {
  return {
    id,
    owner,
    session_id: "ses_a",
    command: ["echo", id],
    mode: "foreground",
    status,
    cwd: "/tmp",
    started_at: startedAt,
  };
}
