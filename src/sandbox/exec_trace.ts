/**
 * The exec gate's cheap hold for an allowed exec that could race (see ExecGate#allowVerified):
 * the daemon seizes the process with ptrace before letting the exec go and asks it to stop at
 * once. The kernel finishes the execve first, then stops it before its first instruction (at
 * the exec event, or at the interrupt when the exec failed), so the new image can be checked
 * and the process let go — or killed — without having run anything.
 *
 * It replaces the freezer hold (two cgroup migrations and a frozen-state poll, ~0.5 ms per exec
 * here) where it may be used: the daemon has CAP_SYS_PTRACE (so a set-user-ID program exec'd
 * while traced keeps its privileges, as it would untraced), the process is not traced already
 * (an agent's strace or gdb), and it is not the daemon's own child (whose wait the daemon's Pty
 * owns). Otherwise the gate falls back to the freezer hold.
 *
 * The tracing is invisible to the process and its parent: a seized process is not stopped until
 * the interrupt, ptrace-stops are reported to the tracer only, a signal that arrives meanwhile
 * is handed back on detach, and PTRACE_O_EXITKILL kills it if the daemon dies while it is held.
 * A process killed while traced is reaped here (its ptrace link), so its parent sees its end.
 */
import { errno, LINUX, sys, syscalls } from "../../ffi/mod.ts";
import { procStat, readProcFile } from "../pty/mod.ts";
import { logger } from "../shared/mod.ts";

const log = logger("gate");

const PTRACE_DETACH = 17;
const PTRACE_SEIZE = 0x4206;
const PTRACE_INTERRUPT = 0x4207;
const PTRACE_O_TRACEEXEC = 0x10;
const PTRACE_O_EXITKILL = 0x100000;
const PTRACE_EVENT_EXEC = 4;
const SIGTRAP = 5;
const SIGKILL = 9;
const WALL = 0x40000000;
const CAP_SYS_PTRACE = 19;
const PR_SET_TIMERSLACK = 29;
/** How long a killed process's ptrace link is waited for (polled off the daemon's turn). */
const REAP_WAIT_MS = 5_000;

export type TraceStop =
  /** Still inside the execve (or not yet at the stop). */
  | { kind: "running" }
  /** Stopped before its first instruction: `execd` when the exec succeeded. */
  | { kind: "stopped"; execd: boolean; signal: number }
  /** It exited or was killed meanwhile. */
  | { kind: "gone" };

let traceable: boolean | undefined;

/**
 * Whether the daemon may hold execs with ptrace: Linux on x86_64/aarch64 with CAP_SYS_PTRACE in
 * the daemon's effective set. `TERMADA_EXEC_HOLD=freezer` (read once) forces the freezer hold (tests, and
 * an escape hatch should a kernel's ptrace misbehave).
 */
export function mayTrace(): boolean {
  if (traceable !== undefined) return traceable;
  traceable = false;
  try {
    if (Deno.build.os !== "linux" || !syscalls()) return traceable;
    if (!traceHoldWanted(Deno.env.get("TERMADA_EXEC_HOLD"))) return traceable;
    const status = readProcFile("/proc/self/status") ?? "";
    const hex = /^CapEff:\s*([0-9a-f]+)/m.exec(status)?.[1];
    if (hex === undefined) return traceable;
    traceable = ((BigInt(`0x${hex}`) >> BigInt(CAP_SYS_PTRACE)) & 1n) === 1n;
    // The hold's short sleeps (usleep(10) while an exec finishes) would each last the default
    // 50 µs timer slack: 2 µs on this (the daemon's) thread makes the wait end closer to the stop.
    if (traceable) sys().prctl(PR_SET_TIMERSLACK, 2000n, 0n, 0n, 0n);
  } catch {
    traceable = false; // no env or /proc access: the freezer hold
  }
  return traceable;
}

/** Whether `TERMADA_EXEC_HOLD` (read once, at the gate's first hold) leaves the ptrace hold on. */
export function traceHoldWanted(value: string | undefined): boolean {
  return value !== "freezer";
}

function ptrace(request: number, pid: number, addr: bigint, data: bigint): number {
  const nr = syscalls()!.ptrace;
  return Number(sys().syscall6(BigInt(nr), BigInt(request), BigInt(pid), addr, data, 0n, 0n));
}

const statusBuf = new Int32Array(1);

export class ExecTrace {
  readonly pid: number;
  /** Its start time (clock ticks): the same pid later is another process. */
  readonly #start: number | undefined;
  #attached = true;

  private constructor(pid: number, startTime: number | undefined) {
    this.pid = pid;
    this.#start = startTime;
  }

  /**
   * Seizes `pid` (it keeps running); undefined when it cannot be traced (the caller falls back).
   * `startTime`: its /proc start time, when the caller has read it already.
   */
  static seize(pid: number, startTime?: number): ExecTrace | undefined {
    const opts = BigInt(PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL);
    if (ptrace(PTRACE_SEIZE, pid, 0n, opts) !== 0) return undefined;
    return new ExecTrace(pid, startTime ?? procStat(pid)?.startTime);
  }

  /** Asks it to stop at its next return to user space (after the execve it is in). */
  interrupt(): void {
    if (ptrace(PTRACE_INTERRUPT, this.pid, 0n, 0n) !== 0 && errno() !== LINUX.ESRCH) {
      log.warn("ptrace interrupt failed", { pid: this.pid, errno: errno() });
    }
  }

  /** Where it is now (never blocks). */
  poll(): TraceStop {
    if (!this.#attached) return { kind: "gone" };
    const rc = sys().waitpid(this.pid, new Uint8Array(statusBuf.buffer), LINUX.WNOHANG | WALL);
    if (rc === 0) return { kind: "running" };
    if (rc !== this.pid) {
      // Not ours to wait for any more: gone, or (never seen) untraced behind our back, when it
      // must not run on unchecked.
      const why = errno();
      this.#attached = false;
      const st = procStat(this.pid);
      if (st && st.state !== "Z" && st.startTime === this.#start) {
        log.error("a held exec could not be waited for: killing it", { pid: this.pid, errno: why });
        sys().kill(this.pid, SIGKILL);
      }
      return { kind: "gone" };
    }
    const s = statusBuf[0]!;
    if ((s & 0xff) !== 0x7f) {
      this.#attached = false; // exited or killed: its link is reaped with this wait
      return { kind: "gone" };
    }
    const sig = (s >> 8) & 0xff;
    const event = (s >> 16) & 0xffff;
    if (sig === SIGTRAP && event === PTRACE_EVENT_EXEC) {
      return { kind: "stopped", execd: true, signal: 0 };
    }
    // The interrupt (PTRACE_EVENT_STOP) or a signal arriving first: the exec failed (a good
    // exec stops at its event before any return to user space). A signal is handed back.
    return { kind: "stopped", execd: false, signal: event === 0 ? sig : 0 };
  }

  /** Lets it go, delivering `signal` (one that arrived while it was held) if not 0. */
  detach(signal = 0): void {
    if (!this.#attached) return;
    this.#attached = false;
    if (ptrace(PTRACE_DETACH, this.pid, 0n, BigInt(signal)) !== 0 && errno() !== LINUX.ESRCH) {
      // Not stopped after all (cannot happen after a stop was seen): it must not run unchecked.
      log.error("ptrace detach failed: killing the process", { pid: this.pid, errno: errno() });
      this.#attached = true;
      this.kill();
    }
  }

  /** Seized, but its exec was not let go (it died meanwhile): untrace it. */
  release(): void {
    if (!this.#attached) return;
    // A seized process that is not stopped cannot be detached: stop it first, then let go.
    this.interrupt();
    const deadline = performance.now() + 50;
    while (performance.now() < deadline) {
      const st = this.poll();
      if (st.kind === "gone") return;
      if (st.kind === "stopped") return this.detach(st.signal);
      sys().usleep(10);
    }
    this.kill();
  }

  /** Kills it before it runs anything, then reaps its ptrace link so its parent sees the end. */
  kill(): void {
    sys().kill(this.pid, SIGKILL);
    const deadline = performance.now() + REAP_WAIT_MS;
    const reap = () => {
      if (this.poll().kind === "gone") return;
      if (performance.now() > deadline) {
        log.error("a killed traced process was not reaped", { pid: this.pid });
        return;
      }
      setTimeout(reap, 1);
    };
    reap();
  }
}
