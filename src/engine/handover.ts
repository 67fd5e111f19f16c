/**
 * A signal for the program a session shell is starting. Just after a command was typed the
 * shell may not have handed the terminal over yet, and after it has, the forked child runs the
 * shell's own code (and its SIGINT handling) until its execve — which the exec gate may hold for
 * a while on a loaded machine. A signal in either window reaches code that swallows it, and the
 * program then runs on as if never signalled. So the signal waits (bounded) until the foreground
 * process has become a new image, and one sent early to a child that then execs is sent again.
 */
import { childrenOf, procStat, readProcFile, type SignalName } from "../pty/mod.ts";
import { nowTicks } from "../sandbox/mod.ts";

/** How often the terminal is looked at while waiting. */
const LOOK_MS = 5;
/** A foreground child that has not exec'd after this long is taken for a subshell (no exec). */
const SUBSHELL_MS = 300;
/** A command still in the shell (a builtin loop) after this long is signalled there. */
const BUILTIN_MS = 300;
/** The longest a signal waits for the hand-over, and is watched for a resend after it. */
const WATCH_MS = 5_000;

/** The terminal of a local session shell. */
export interface HandoverTerminal {
  /** The shell's pid (and process group). */
  readonly pid: number;
  foregroundPgid(): number | undefined;
  signal(sig: SignalName, target: "foreground"): boolean;
}

export interface HandoverJob {
  /** When the job started (ms since the epoch). */
  startedAt: number;
  /** False once the job has ended or the session's terminal changed: the watch stops. */
  live(): boolean;
  /** Whether the shell has said the command started (its marker). */
  started(): boolean;
}

/** A process's image: its name and argv. A forked child keeps its parent's until it execs. */
function image(pid: number): string | undefined {
  const comm = procStat(pid)?.comm;
  if (comm === undefined) return undefined;
  return `${comm}\0${readProcFile(`/proc/${pid}/cmdline`) ?? ""}`;
}

/**
 * Sends `sig` to the foreground of `pty` once the job's program holds it: at once when it does
 * already, else from a bounded watch on the daemon's turn. Returns whether a signal was or will
 * be sent.
 */
export function signalProgram(pty: HandoverTerminal, job: HandoverJob, sig: SignalName): boolean {
  const shell = image(pty.pid);
  const ready = () => {
    const fg = pty.foregroundPgid();
    return fg !== undefined && fg !== pty.pid && image(fg) !== shell;
  };
  if (shell === undefined || ready()) return pty.signal(sig, "foreground");
  const t0 = Date.now();
  // The shell's children started since the job did: a fork for the command that has not taken
  // the terminal yet, as opposed to a builtin running in the shell itself.
  const jobTicks = nowTicks() - Math.ceil((Date.now() - job.startedAt) / 10) - 1;
  const forking = () => childrenOf(pty.pid).some((c) => (procStat(c)?.startTime ?? 0) >= jobTicks);
  let startedSince: number | undefined;
  let handedSince: number | undefined;
  /** Sent early to a child still running the shell's code: resent if it execs after all. */
  let early: { pgid: number } | undefined;
  const look = () => {
    if (!job.live()) return;
    const now = Date.now();
    const fg = pty.foregroundPgid();
    if (fg === undefined) return;
    if (early) {
      if (fg !== early.pgid || now - t0 > WATCH_MS) return;
      if (image(fg) !== shell) return void pty.signal(sig, "foreground");
      return void setTimeout(look, LOOK_MS);
    }
    if (now - t0 > WATCH_MS) return void pty.signal(sig, "foreground");
    if (fg !== pty.pid) {
      handedSince ??= now;
      if (image(fg) !== shell) return void pty.signal(sig, "foreground");
      if (now - handedSince > SUBSHELL_MS) {
        // A subshell that never execs; should it exec after all, it gets the signal again.
        pty.signal(sig, "foreground");
        early = { pgid: fg };
      }
    } else {
      if (job.started()) startedSince ??= now;
      if (startedSince !== undefined && now - startedSince > BUILTIN_MS && !forking()) {
        return void pty.signal(sig, "foreground");
      }
    }
    setTimeout(look, LOOK_MS);
  };
  setTimeout(look, LOOK_MS);
  return true;
}
