/**
 * One daemon per state directory: an exclusive `flock` on `<state>/termada.lock` (holding the
 * pid), and `<state>/daemon.json`, what the running daemon bound (socket, TCP port, pid), for
 * clients such as `termada dashboard` and the shim. Both are written 0600 in the 0700 state dir.
 */
import { TermadaError } from "../shared/mod.ts";

export interface DaemonInfo {
  pid: number;
  version: string;
  socket: string;
  /** The loopback TCP port, or null when the daemon runs without TCP. */
  port: number | null;
  url: string | null;
  started_at: string;
}

const encoder = new TextEncoder();

/** Takes the lock or refuses (another daemon runs here), naming that daemon's pid. */
export function acquireLock(path: string): Deno.FsFile {
  const f = Deno.openSync(path, { read: true, write: true, create: true, mode: 0o600 });
  let locked = false;
  try {
    locked = f.tryLockSync(true);
  } catch (err) {
    f.close();
    throw err;
  }
  if (!locked) {
    let pid = "";
    try {
      pid = Deno.readTextFileSync(path).trim();
    } catch {
      // unreadable: say nothing about the pid
    }
    f.close();
    throw new TermadaError(
      "INVALID_ARGUMENT",
      `Another Termada daemon is already running${pid ? ` (pid ${pid})` : ""}`,
      {
        hint: "Stop it first (termada daemon stop, or kill that pid), or use another TERMADA_HOME",
      },
    );
  }
  f.truncateSync(0);
  f.writeSync(encoder.encode(`${Deno.pid}\n`));
  return f;
}

export function releaseLock(f: Deno.FsFile): void {
  try {
    f.truncateSync(0);
    f.unlockSync();
    f.close();
  } catch {
    // already released
  }
}

/** Writes `daemon.json` atomically (temp file + rename). */
export function writeDaemonInfo(path: string, info: DaemonInfo): void {
  const tmp = `${path}.tmp`;
  Deno.writeTextFileSync(tmp, JSON.stringify(info, null, 2) + "\n", { mode: 0o600 });
  Deno.renameSync(tmp, path);
}

export function removeDaemonInfo(path: string): void {
  try {
    Deno.removeSync(path);
  } catch {
    // already gone
  }
}

/** What the daemon recorded when it started, or undefined (none ran, or unreadable). */
export function readDaemonInfo(path: string): DaemonInfo | undefined {
  try {
    const v = JSON.parse(Deno.readTextFileSync(path));
    if (v && typeof v.pid === "number" && typeof v.socket === "string") return v as DaemonInfo;
  } catch {
    // absent or torn: treat as unknown
  }
  return undefined;
}
