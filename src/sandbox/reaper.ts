/**
 * Ending process trees without a cgroup (or together with one): become a child subreaper so
 * orphans of our sessions reparent to us instead of init, find a session's processes through a
 * /proc ppid walk, and escalate INT → TERM → KILL over a set that is re-read as it changes.
 * Linux only. /proc is read through libc (src/pty procfs): Deno's file APIs demand -A for it.
 *
 * Zombies count as gone: a zombie has released everything but its pid and cannot be signalled
 * further. Zombies reparented to a subreaper are reaped by that subreaper's owner (the daemon's
 * child watcher), not here.
 *
 * Bounds: one /proc scan reads at most MAX_SCAN pids (about 15 µs each); a set tracks at most
 * MAX_PROCESSES processes (the rest are reported as survivors, never silently dropped); a
 * freeze before SIGKILL makes at most MAX_FREEZE_PASSES passes within 200 ms.
 */
import { LINUX, openLibc, SIGNALS } from "../../ffi/mod.ts";
import { allPids, type ProcStat, procStat } from "../pty/mod.ts";
import type { Cgroup } from "./cgroup.ts";

/** At most this many processes are tracked by one `processesOf` or `escalate`. */
export const MAX_PROCESSES = 4096;
/** At most this many pids are read by one scan of /proc. */
export const MAX_SCAN = 65536;
/** At most this many SIGSTOP passes freeze a tree before SIGKILL. */
export const MAX_FREEZE_PASSES = 50;
/** A freeze before SIGKILL takes at most this long, in ms. */
const FREEZE_MS = 200;

/** A process identity: the pid plus its start time (clock ticks since boot) against pid reuse. */
export interface ProcessRef {
  pid: number;
  startTime: number;
  /** Its process group, when the one who listed it read it. */
  pgrp?: number;
}

export type EscalationSignal = "INT" | "TERM" | "KILL";

/** A process still alive when `escalate` gave up, and why it is thought to be. */
export interface Survivor {
  pid: number;
  comm: string;
  /** /proc state letter at the end (R, S, D, T, …). */
  state: string;
  /** E.g. "uninterruptible sleep (D)", "not permitted (EPERM)", "still running after SIGKILL". */
  reason: string;
}

export interface EscalateOptions {
  /** Signals in order (default INT, TERM, KILL). TERM is always followed by CONT. */
  signals?: readonly EscalationSignal[];
  /** Longest wait after each step but the last, in ms (default 300, at most 60000). */
  graceMs?: number;
  /** Longest wait after the last step, in ms (default 2000, at most 60000). */
  finalWaitMs?: number;
  /**
   * The session's cgroup: its processes join the set at every re-read, and the KILL step also
   * writes its cgroup.kill (atomic against forks).
   */
  cgroup?: Cgroup;
  /** How often the set is re-read while waiting, in ms (default 20; slower on large hosts). */
  pollMs?: number;
  /** Monotonic time source in ms (default performance.now). */
  clock?: { mono(): number };
  /** Sleeps (default setTimeout). */
  sleep?: (ms: number) => Promise<void>;
  /** Sends a signal; returns 0 or the errno (default libc kill). Tests inject failures. */
  kill?: (pid: number, sig: number) => number;
}

export interface EscalateResult {
  /** Processes still alive at the end; empty on success. */
  survivors: Survivor[];
  /** Distinct processes that received at least one of the escalation signals. */
  signalled: number;
  /** What happened, in order, e.g. ["INT 3", "TERM 1", "empty after TERM"]. */
  steps: string[];
}

const DEFAULT_SIGNALS: readonly EscalationSignal[] = ["INT", "TERM", "KILL"];
const MAX_WAIT_MS = 60_000;

/**
 * Makes this process a child subreaper (prctl PR_SET_CHILD_SUBREAPER): orphaned descendants,
 * e.g. a `setsid` child whose parent exited, reparent to us instead of init, so they stay
 * visible as our descendants. The caller then owns reaping them. Returns whether it is now set.
 */
export function becomeSubreaper(): boolean {
  if (Deno.build.os !== "linux") return false;
  openLibc().prctl(LINUX.PR_SET_CHILD_SUBREAPER, 1n, 0n, 0n, 0n);
  return isSubreaper();
}

/** Whether this process is a child subreaper (prctl PR_GET_CHILD_SUBREAPER). */
export function isSubreaper(): boolean {
  if (Deno.build.os !== "linux") return false;
  const out = new Int32Array(1);
  const addr = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(out)));
  if (openLibc().prctl(LINUX.PR_GET_CHILD_SUBREAPER, addr, 0n, 0n, 0n) !== 0) return false;
  return out[0] !== 0;
}

/**
 * The live descendants of `rootPid` (not `rootPid` itself) plus the live `extra` pids and their
 * descendants: pids the daemon learned otherwise (e.g. exec notifications) that escaped with
 * setsid or a double fork and were reparented. Zombies, this process and its ancestors are left
 * out; `rootPid` must be above 1 (RangeError). Found by one ppid walk over /proc (the per-task
 * `children` files miss children of other threads). At most MAX_PROCESSES entries.
 */
export function processesOf(rootPid: number, extra: Iterable<number> = []): ProcessRef[] {
  // Pid 1's (or 0's, the kernel's) descendants are the whole machine: always a caller bug.
  if (!Number.isInteger(rootPid) || rootPid <= 1) throw new RangeError(`Bad root pid ${rootPid}`);
  const table = scan();
  const excluded = protectedPids();
  const out = new Map<number, ProcessRef>();
  const queue: number[] = [rootPid];
  const add = (st: ProcStat): void => {
    if (out.size >= MAX_PROCESSES || out.has(st.pid) || excluded.has(st.pid)) return;
    if (st.state === "Z") return;
    out.set(st.pid, { pid: st.pid, startTime: st.startTime });
    queue.push(st.pid);
  };
  for (const pid of extra) {
    const st = table.stats.get(pid);
    if (st) add(st);
  }
  while (queue.length > 0 && out.size < MAX_PROCESSES) {
    for (const c of table.children.get(queue.shift()!) ?? []) add(c);
  }
  return [...out.values()];
}

/**
 * Signals every process of `set` with each of `opts.signals` in turn until none is left. The set
 * is re-read before each step and at every poll while waiting (processes fork meanwhile); once
 * a process was in it, it and its descendants stay tracked even after they leave it (a child of
 * a killed parent is reparented and falls out of `processesOf`). Newly seen processes get the
 * current step's signal. TERM is followed by CONT so stopped processes can act on it. The KILL
 * step first writes `cgroup.kill` (when a cgroup is given), then freezes the tracked tree with
 * SIGSTOP until no new process appears (a stopped process cannot fork, so its children stay its
 * descendants), then sends SIGKILL. Returns early as soon as the set is empty. Never signals
 * pid 1, this process or its ancestors. Pid reuse: a process is identified by (pid, start time)
 * and re-checked right before each signal.
 */
export async function escalate(
  set: () => readonly ProcessRef[] | readonly number[],
  opts: EscalateOptions = {},
): Promise<EscalateResult> {
  const signals = opts.signals ?? DEFAULT_SIGNALS;
  if (signals.length === 0 || signals.length > 8) {
    throw new RangeError(`Expected 1 to 8 signals, got ${signals.length}`);
  }
  for (const s of signals) {
    if (s !== "INT" && s !== "TERM" && s !== "KILL") throw new RangeError(`Bad signal "${s}"`);
  }
  const graceMs = boundedMs(opts.graceMs ?? 300, "graceMs");
  const finalWaitMs = boundedMs(opts.finalWaitMs ?? 2000, "finalWaitMs");
  const pollMs = boundedMs(opts.pollMs ?? 20, "pollMs");
  const clock = opts.clock ?? { mono: () => performance.now() };
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const tracker = new Tracker(set, opts.cgroup, opts.kill ?? libcKill);
  const steps: string[] = [];

  let last: EscalationSignal | undefined;
  let empty = false;
  /**
   * Nothing is left, twice, a poll apart: a process that is dying may start another on its
   * way out (a trap's `setsid …`), which the first look can miss.
   */
  const gone = async (): Promise<boolean> => {
    if (tracker.refresh().length > 0) return false;
    if (last === undefined) return true; // nothing was signalled: nothing can react
    await sleep(pollMs);
    return tracker.refresh().length === 0;
  };
  for (let i = 0; i < signals.length && !empty; i++) {
    const sig = signals[i]!;
    if (await gone()) {
      empty = true;
      break;
    }
    last = sig;
    const sent = new Set<string>();
    const step = (): number => sig === "KILL" ? tracker.killStep(sent) : tracker.send(sig, sent);
    let n = step();
    if (sig === "KILL" && opts.cgroup) steps.push("cgroup.kill");
    const waitMs = i === signals.length - 1 ? finalWaitMs : graceMs;
    const deadline = clock.mono() + waitMs;
    for (;;) {
      const left = deadline - clock.mono();
      if (left <= 0) break;
      // A scan costs ~15 µs per process on the host: never poll faster than twice its cost.
      await sleep(Math.min(left, Math.max(pollMs, 2 * tracker.scanMs)));
      if (await gone()) {
        empty = true;
        break;
      }
      n += step(); // only processes not yet signalled in this step
    }
    steps.push(`${sig} ${n}`);
  }
  const survivors = empty ? [] : tracker.survivors(last);
  steps.push(
    survivors.length === 0
      ? (last === undefined ? "empty" : `empty after ${last}`)
      : `${survivors.length} survivors`,
  );
  return { survivors, signalled: tracker.signalled.size, steps };
}

/** Processes of one escalation: what was seen, signalled, and refused. */
class Tracker {
  readonly signalled = new Set<string>();
  /** Time the last /proc scan took, in ms. */
  scanMs = 0;
  readonly #set: () => readonly ProcessRef[] | readonly number[];
  readonly #cgroup: Cgroup | undefined;
  readonly #kill: (pid: number, sig: number) => number;
  readonly #excluded = protectedPids();
  /** Tracked processes by pid, with the start time they had when first seen. */
  readonly #tracked = new Map<number, ProcStat>();
  readonly #eperm = new Set<string>();
  /** Processes that did not fit under MAX_PROCESSES at the last refresh. */
  #overflow = 0;
  #alive: ProcStat[] = [];

  constructor(
    set: () => readonly ProcessRef[] | readonly number[],
    cgroup: Cgroup | undefined,
    kill: (pid: number, sig: number) => number,
  ) {
    this.#set = set;
    this.#cgroup = cgroup;
    this.#kill = kill;
  }

  /** Re-reads the set and the tracked tree; returns the live tracked processes. */
  refresh(): ProcStat[] {
    const t0 = performance.now();
    this.#overflow = 0;
    // The set first, then the scan: a process the set names exists by the time of the scan
    // (the other way round, one started in between would be named but missing from the table).
    const candidates: { pid: number; startTime?: number }[] = [];
    for (const e of this.#set()) candidates.push(typeof e === "number" ? { pid: e } : e);
    for (const pid of this.#cgroup?.procs() ?? []) candidates.push({ pid });
    const table = scan();
    for (const c of candidates) {
      const st = table.stats.get(c.pid);
      if (!st || (c.startTime !== undefined && st.startTime !== c.startTime)) continue;
      this.#track(st);
    }
    // Drop the dead (gone, zombie, or pid reused), then follow the survivors' children.
    const queue: number[] = [];
    for (const [pid, t] of this.#tracked) {
      const st = table.stats.get(pid);
      if (!st || st.startTime !== t.startTime || st.state === "Z") this.#tracked.delete(pid);
      else queue.push(pid);
    }
    while (queue.length > 0) {
      for (const c of table.children.get(queue.shift()!) ?? []) {
        if (c.state !== "Z" && !this.#tracked.has(c.pid) && this.#track(c)) queue.push(c.pid);
      }
    }
    this.#alive = [...this.#tracked.values()].map((t) => table.stats.get(t.pid)!);
    this.scanMs = performance.now() - t0;
    return this.#alive;
  }

  /** Sends `sig` (TERM: then CONT) to live processes not in `sent`; returns how many. */
  send(sig: "INT" | "TERM", sent: Set<string>): number {
    let n = 0;
    for (const st of this.#alive) {
      const key = keyOf(st);
      if (sent.has(key)) continue;
      sent.add(key);
      if (this.#signal(st, SIGNALS[sig])) {
        n++;
        this.signalled.add(key);
        if (sig === "TERM") this.#signal(st, SIGNALS.CONT);
      }
    }
    return n;
  }

  /**
   * cgroup.kill, then SIGSTOP passes until every tracked process is stopped and no new one
   * appears, then SIGKILL to each one not in `sent`. Returns how many got SIGKILL.
   */
  killStep(sent: Set<string>): number {
    if (this.#alive.every((st) => sent.has(keyOf(st)))) return 0;
    if (this.#cgroup) {
      try {
        this.#cgroup.kill();
      } catch {
        // The cgroup is gone or refused: the per-process pass below still runs.
      }
    }
    // Freeze: stop everything, re-scan, stop what appeared, until all stopped ones really are
    // (state no longer R or S) and nothing new shows up. Bounded in passes and time.
    const tried = new Set<string>();
    const stopped = new Set<string>();
    const until = performance.now() + FREEZE_MS;
    for (let pass = 0; pass < MAX_FREEZE_PASSES && performance.now() < until; pass++) {
      let pending = 0;
      for (const st of this.#alive) {
        const key = keyOf(st);
        if (sent.has(key)) continue;
        if (!tried.has(key)) {
          tried.add(key);
          if (this.#signal(st, SIGNALS.STOP)) stopped.add(key);
          pending++;
        } else if (stopped.has(key) && (st.state === "R" || st.state === "S")) {
          pending++; // SIGSTOP not acted on yet: it could still fork
        }
      }
      if (pending === 0) break;
      this.refresh();
    }
    let n = 0;
    for (const st of this.#alive) {
      const key = keyOf(st);
      if (sent.has(key)) continue;
      sent.add(key);
      if (this.#signal(st, SIGNALS.KILL)) {
        n++;
        this.signalled.add(key);
      }
    }
    return n;
  }

  /** The live tracked processes, each with the likeliest reason it is still there. */
  survivors(last: EscalationSignal | undefined): Survivor[] {
    const out: Survivor[] = [];
    for (const t of this.refresh()) {
      const st = procStat(t.pid);
      if (!st || st.startTime !== t.startTime || st.state === "Z") continue;
      out.push({ pid: st.pid, comm: st.comm, state: st.state, reason: this.#reason(st, last) });
    }
    if (this.#overflow > 0) {
      out.push({
        pid: 0,
        comm: "",
        state: "?",
        reason: `${this.#overflow} more processes over the ${MAX_PROCESSES}-process bound`,
      });
    }
    return out;
  }

  #reason(st: ProcStat, last: EscalationSignal | undefined): string {
    if (this.#eperm.has(keyOf(st))) return "not permitted (EPERM)";
    if (st.state === "D") return "uninterruptible sleep (D)";
    if (!this.signalled.has(keyOf(st))) return "appeared after the last signal";
    return `still running after SIG${last ?? "KILL"}`;
  }

  #track(st: ProcStat): boolean {
    if (this.#excluded.has(st.pid)) return false;
    const old = this.#tracked.get(st.pid);
    if (old && old.startTime === st.startTime) return true;
    if (!old && this.#tracked.size >= MAX_PROCESSES) {
      this.#overflow++;
      return false;
    }
    this.#tracked.set(st.pid, st);
    return true;
  }

  /** Signals one process if it is still the same one; false if gone or refused. */
  #signal(st: ProcStat, sig: number): boolean {
    const now = procStat(st.pid);
    if (!now || now.startTime !== st.startTime || now.state === "Z") return false;
    const err = this.#kill(st.pid, sig);
    if (err === 0) return true;
    if (err === LINUX.EPERM) this.#eperm.add(keyOf(st));
    return false;
  }
}

/** One snapshot of /proc: every process and the children of each (by ppid). */
interface ProcTable {
  stats: Map<number, ProcStat>;
  children: Map<number, ProcStat[]>;
}

function scan(): ProcTable {
  const stats = new Map<number, ProcStat>();
  const children = new Map<number, ProcStat[]>();
  const pids = allPids();
  const n = Math.min(pids.length, MAX_SCAN);
  for (let i = 0; i < n; i++) {
    const st = procStat(pids[i]!);
    if (!st) continue;
    stats.set(st.pid, st);
    const list = children.get(st.ppid);
    if (list) list.push(st);
    else children.set(st.ppid, [st]);
  }
  return { stats, children };
}

/** Pids never to signal: init, this process and its ancestors. */
function protectedPids(): Set<number> {
  const out = new Set<number>([0, 1, Deno.pid]);
  let pid = Deno.pid;
  for (let i = 0; i < 64; i++) {
    const st = procStat(pid);
    if (!st || st.ppid <= 1) break;
    out.add(st.ppid);
    pid = st.ppid;
  }
  return out;
}

function keyOf(st: ProcStat): string {
  return `${st.pid}:${st.startTime}`;
}

function libcKill(pid: number, sig: number): number {
  const libc = openLibc();
  if (libc.kill(pid, sig) === 0) return 0;
  const p = libc.__errno_location();
  return p === null ? LINUX.ESRCH : new Deno.UnsafePointerView(p).getInt32();
}

function boundedMs(ms: number, what: string): number {
  if (!Number.isFinite(ms) || ms < 0 || ms > MAX_WAIT_MS) {
    throw new RangeError(`${what} must be between 0 and ${MAX_WAIT_MS} ms, got ${ms}`);
  }
  return ms;
}
