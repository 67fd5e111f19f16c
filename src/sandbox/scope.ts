/**
 * Which processes belong to a session or a job, and ending them for good ("kill means gone").
 *
 * A scope is the set of processes one launched program led to: with cgroups, everything in its
 * cgroup (nothing can leave it: the cgroup tree is hidden from sessions); without, the
 * descendants of its root process plus every process the exec gate saw exec in it (those that
 * escaped with `setsid`, `nohup` or a double fork were reparented to the daemon, a subreaper,
 * and are still known by pid and start time). A job's processes are those of its session that
 * started while the job ran (start times in clock ticks), so children a finished job left
 * running are still that job's.
 *
 * Bounds: KNOWN_PIDS exec'd pids remembered per scope (oldest out first).
 */
import { procStat, readProcFile } from "../pty/mod.ts";
import type { Cgroup } from "./cgroup.ts";
import {
  escalate,
  type EscalateResult,
  type EscalationSignal,
  processesOf,
  type ProcessRef,
} from "./reaper.ts";

export const KNOWN_PIDS = 4096;
/** USER_HZ: the unit of /proc/<pid>/stat start times on Linux (100 on every architecture). */
const TICKS_PER_SECOND = 100;

/** Recalibrate against /proc/uptime at most this often (ms of the monotonic clock). */
const CALIBRATE_MS = 1000;
/** A wall clock that moved this much more than the monotonic one means a suspend: recalibrate. */
const SUSPEND_MS = 50;

/**
 * ticks = performance.now() / 10 + offset. /proc/uptime and /proc start times both count
 * CLOCK_BOOTTIME; performance.now() counts CLOCK_MONOTONIC, which runs at the same rate and
 * only falls behind during a suspend. Each calibration gives a lower bound of the offset (uptime
 * is truncated to a tick, and the monotonic time is read after it), so keeping the largest one
 * seen never overestimates and soon lands within a fraction of a tick of the truth; a suspend
 * only makes the true offset larger, which the next calibration picks up.
 */
const ticks = { offset: -Infinity, calibratedMono: -Infinity, wallMinusMono: 0 };

function calibrate(mono: number): void {
  const up = readProcFile("/proc/uptime");
  const after = performance.now();
  const s = up === undefined ? NaN : Number(up.split(" ")[0]);
  ticks.calibratedMono = mono;
  ticks.wallMinusMono = Date.now() - mono;
  if (!Number.isFinite(s)) return;
  const offset = Math.round(s * TICKS_PER_SECOND) - after / 10;
  if (offset > ticks.offset) ticks.offset = offset;
}

/**
 * Now, in the clock ticks since boot that /proc start times use: never above the truth and, as
 * the first reads of /proc/uptime were, at most one tick below it (callers keep one tick of slack
 * each side). Reads /proc/uptime at most once a second (and after a suspend); 0 when it cannot
 * be read.
 */
export function nowTicks(): number {
  const mono = performance.now();
  if (
    mono - ticks.calibratedMono >= CALIBRATE_MS ||
    Math.abs(Date.now() - mono - ticks.wallMinusMono) > SUSPEND_MS
  ) calibrate(mono);
  return Number.isFinite(ticks.offset) ? Math.max(0, Math.floor(mono / 10 + ticks.offset)) : 0;
}

export class ProcessScope {
  readonly cgroup: Cgroup | undefined;
  #root: number;
  #known = new Map<number, number>();
  #hold: Cgroup | null | undefined;

  constructor(root: number, cgroup?: Cgroup) {
    this.#root = root;
    this.cgroup = cgroup;
  }

  get root(): number {
    return this.#root;
  }

  /**
   * The exec gate saw `pid` exec in this scope (kept by pid and start time: `startTime` when the
   * gate read it while the process was blocked in execve, else read now).
   */
  note(pid: number, startTime?: number): void {
    if (this.cgroup || this.#known.has(pid)) return;
    const start = startTime ?? procStat(pid)?.startTime;
    if (start === undefined) return;
    this.#known.set(pid, start);
    if (this.#known.size > KNOWN_PIDS) this.#known.delete(this.#known.keys().next().value!);
  }

  /** Every live process of the scope, its root included. */
  all(): ProcessRef[] {
    const out = this.#members();
    const root = procStat(this.#root);
    if (root && root.state !== "Z") out.push({ pid: this.#root, startTime: root.startTime });
    return out;
  }

  /** Processes (never the root) that started within [from, to] ticks. */
  startedBetween(from: number, to: number | undefined): ProcessRef[] {
    return this.#members().filter((p) =>
      p.startTime >= from && (to === undefined || p.startTime <= to)
    );
  }

  /** Every live process of the scope but its root (whose stat is read only when asked for). */
  #members(): ProcessRef[] {
    const out: ProcessRef[] = [];
    if (this.cgroup) {
      for (const pid of this.#cgroupPids()) {
        if (pid === this.#root) continue;
        const st = procStat(pid);
        if (st && st.state !== "Z") out.push({ pid, startTime: st.startTime, pgrp: st.pgrp });
      }
      return out;
    }
    const extra: number[] = [];
    for (const [pid, start] of this.#known) {
      const st = procStat(pid);
      if (st && st.startTime === start) extra.push(pid);
      else this.#known.delete(pid);
    }
    return this.#root > 1 ? processesOf(this.#root, extra) : [];
  }

  /**
   * The pids of the cgroup and its descendants. Its only child cgroup is ours (`hold`: sessions
   * cannot reach the cgroup tree), so when cgroup.stat counts no other, the two cgroup.procs
   * files are read directly instead of walking the directories.
   */
  #cgroupPids(): number[] {
    const cg = this.cgroup!;
    const hold = this.#hold ?? undefined;
    const n = cg.descendants();
    if (n === 0) return cg.ownProcs();
    if (n === 1 && hold) return [...cg.ownProcs(), ...hold.ownProcs()];
    return cg.procs();
  }

  /**
   * Ends `set` (default: the whole scope) INT → TERM → KILL, until nothing is left; with
   * `cgroup` (a job's, see `adopt`) every process in it is in the set and `cgroup.kill` ends it.
   */
  end(
    opts: {
      set?: () => ProcessRef[];
      signals?: EscalationSignal[];
      graceMs?: number;
      wholeCgroup?: boolean;
      cgroup?: Cgroup;
    } = {},
  ): Promise<EscalateResult> {
    const cgroup = opts.cgroup ?? (opts.wholeCgroup ? this.cgroup : undefined);
    return escalate(opts.set ?? (() => this.all()), {
      signals: opts.signals,
      graceMs: opts.graceMs,
      ...(cgroup ? { cgroup } : {}),
    });
  }

  /**
   * Moves the processes of the scope's own cgroup (not its root, not a child cgroup's) into a new
   * child cgroup `name`: what a job left running when it ended, so that everything they start
   * later — with `setsid`, a double fork, re-parented to the daemon — stays findable as that
   * job's (a cgroup is inherited by every child and never left without the cgroup tree, which
   * sessions cannot reach). `"none"` when nothing is left: no process in the scope's own cgroup
   * but its root and none held mid-exec, so the job's set is empty for good (every process it
   * could start descends from one of those). Undefined without cgroups, or when the move failed
   * (the start-time set still applies).
   */
  adopt(name: string): Cgroup | "none" | undefined {
    const cg = this.cgroup;
    if (!cg) return undefined;
    const own = cg.ownProcs().filter((pid) => pid !== this.#root);
    if (own.length === 0) {
      return this.#hold && this.#hold.ownProcs().length > 0 ? undefined : "none";
    }
    let child: Cgroup;
    try {
      child = cg.child(name);
    } catch {
      return undefined; // no room (bounds) or made already: the start-time set still applies
    }
    for (const pid of own) {
      try {
        child.addPid(pid);
      } catch {
        // exited meanwhile
      }
    }
    return child;
  }

  /**
   * A frozen child cgroup where a process that was allowed to exec waits, before its new image
   * runs one instruction, until the gate checked that what the kernel exec'd is what it allowed
   * (src/sandbox/gate.ts). Undefined without cgroups.
   */
  hold(): Cgroup | undefined {
    if (!this.cgroup) return undefined;
    if (this.#hold === undefined) {
      try {
        const h = this.cgroup.child("hold");
        this.#hold = h.freeze(true) ? h : null;
      } catch {
        this.#hold = null;
      }
    }
    return this.#hold ?? undefined;
  }

  /** Removes the cgroup once empty (after `end`); true when it is gone or there was none. */
  async dispose(): Promise<boolean> {
    return this.cgroup ? await this.cgroup.remove() : true;
  }
}
