/**
 * The exec gate on a thread of its own, host side (the thread is gate_worker.ts). Measured: the
 * gate's cost per exec was mostly hops between the daemon's event loop and Deno's blocking pool
 * (a notification woke a pool thread, which woke the main thread, which answered). On its own
 * thread, blocked in `poll()` itself, the gate answers an exec as soon as the kernel posts it,
 * whatever the daemon's thread is doing (docs/SECURITY.md, Costs).
 *
 * The host hands each listener fd over (`attach`) with what the thread may decide alone: a
 * snapshot of the agent's exec rules (fast_path.ts), valid for one policy epoch. Anything else
 * the thread asks here (`decide`); the answer goes back with a fresh snapshot when the thread's
 * is stale. Shared memory (no message needed to see them): the policy epoch, the stop-all
 * barrier, the count of messages sent (the thread waits for those before blocking again), one
 * slot per listener (who closes its fd: exactly one side), and the gate's counters.
 *
 * Fail closed: if the thread dies, every listener it held is closed here (its session's execs
 * fail from then on), it is logged, and new sessions are gated on the daemon's thread. After
 * IDLE_MS with no listener, the thread ends (it starts again with the next session).
 *
 * Every attachment has an id of its own (never reused), which every message about it carries;
 * its slot (reused) only says who closes the fd. A report that arrives after the thread closed
 * the listener (a check finished late) still finds its context for RECENT_MS.
 *
 * Bounds: SLOTS listeners at once (more are gated on the daemon's thread); one message per
 * forwarded exec each way; RECENT closed attachments remembered.
 */
import { check, cstr, LINUX, sys } from "../../ffi/mod.ts";
import { logger } from "../shared/mod.ts";
import type { ExecFastPath } from "./fast_path.ts";
import { type ExecAnswer, type ExecEvent, GateCounters } from "./gate.ts";

const log = logger("sandbox");

/** Int32 indexes of the control words. */
export const EPOCH = 0;
export const BARRIER = 1;
export const SENT = 2;
const CTL_WORDS = 4;

/** Listener slots: free, open (the thread owns the fd), closed by the thread, closed here. */
export const SLOT_FREE = 0;
export const SLOT_OPEN = 1;
export const SLOT_CLOSED_HERE = 2;
export const SLOT_CLOSED_HOST = 3;
export const SLOTS = 1024;
/** How long, and how many, closed attachments are remembered for late reports. */
const RECENT_MS = 10_000;
const RECENT = 4096;
/** A thread with no listener for this long ends. */
export const IDLE_MS = 5000;
/** How long `stop` waits for the thread to leave its loop. */
const STOP_MS = 1000;

/** A snapshot of an agent's exec rules and the policy epoch it was taken in (null: none). */
export interface GateFast {
  epoch: number;
  fp: ExecFastPath | null;
}

export type ToGate =
  | {
    t: "init";
    ctl: SharedArrayBuffer;
    slots: SharedArrayBuffer;
    counters: SharedArrayBuffer;
    wakeFd: number;
  }
  | {
    t: "attach";
    id: number;
    slot: number;
    fd: number;
    trustFirst: boolean;
    cgroup: string | null;
    killable: boolean;
    fast: GateFast;
  }
  | { t: "detach"; id: number }
  | { t: "decided"; id: number; answer: ExecAnswer; fast?: GateFast }
  | { t: "fail" }
  | { t: "stop" };

/** `decide` carries its own `id` (the answer's) and the attachment's (`of`). */
export type FromGate =
  | { t: "decide"; id: number; of: number; ev: ExecEvent; epoch: number }
  | { t: "note"; of: number; pid: number; start: number | undefined }
  | { t: "race"; of: number; ev: ExecEvent; found: string }
  | { t: "closed"; of: number }
  | { t: "stopped" };

/** What the thread needs of the daemon, for each attached context `C`. */
export interface GateHost<C> {
  /** Decides what the thread may not (the same decider as the daemon's own gate). */
  decide(ev: ExecEvent, ctx: C): ExecAnswer | Promise<ExecAnswer>;
  /** What the thread may decide alone for `ctx` (undefined: nothing). */
  fastPath(ctx: C): ExecFastPath | undefined;
  /**
   * An exec the thread allowed in a scope without a cgroup (the scope tracks its pids), with the
   * process's start time as read while it was still blocked in execve.
   */
  note(ctx: C, pid: number, startTime: number | undefined): void;
  onRace(ev: ExecEvent, ctx: C, found: string): void;
}

export class GateThread<C> {
  readonly #host: GateHost<C>;
  readonly #worker: Worker;
  readonly #ctl: Int32Array;
  readonly #slots: Int32Array;
  readonly #entries = new Map<number, { ctx: C; fd: number; slot: number }>();
  readonly #recent = new Map<number, { ctx: C; at: number }>();
  readonly #free: number[] = [];
  #nextId = 1;
  #wakeRead = -1;
  #wakeWrite = -1;
  #wakeByte = new Uint8Array(1);
  #state: "running" | "stopping" | "failed" | "stopped" = "running";
  #idle: ReturnType<typeof setTimeout> | undefined;
  #stopped: (() => void) | undefined;
  /** It said it left its loop: no poll() of it names the wake pipe any more. */
  #left = false;
  readonly #onEnd: () => void;

  /** Starts the thread; `counters` is where it counts (shared, so it may outlive threads). */
  constructor(host: GateHost<C>, counters: GateCounters, onEnd: () => void = () => {}) {
    this.#host = host;
    this.#onEnd = onEnd;
    const ctl = new SharedArrayBuffer(4 * CTL_WORDS);
    const slots = new SharedArrayBuffer(4 * SLOTS);
    this.#ctl = new Int32Array(ctl);
    this.#slots = new Int32Array(slots);
    for (let i = SLOTS - 1; i >= 0; i--) this.#free.push(i);
    const fds = new Int32Array(2);
    check(sys().pipe2(fds, LINUX.O_CLOEXEC | LINUX.O_NONBLOCK), "pipe2");
    this.#wakeRead = fds[0]!;
    this.#wakeWrite = fds[1]!;
    this.#worker = new Worker(new URL("./gate_worker.ts", import.meta.url).href, {
      type: "module",
    });
    this.#worker.onmessage = (ev: MessageEvent<FromGate>) => this.#onMessage(ev.data);
    this.#worker.onerror = (ev: ErrorEvent) => {
      ev.preventDefault();
      this.#fail(ev.message);
    };
    this.#worker.onmessageerror = () => this.#fail("an unreadable message from the gate thread");
    if (!(counters.buffer instanceof SharedArrayBuffer)) {
      throw new TypeError("the gate thread counts into a SharedArrayBuffer");
    }
    this.#send({ t: "init", ctl, slots, counters: counters.buffer, wakeFd: this.#wakeRead });
  }

  /** Running, with a free slot: a listener may be attached. */
  get usable(): boolean {
    return this.#state === "running" && this.#free.length > 0;
  }

  get failed(): boolean {
    return this.#state === "failed";
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Hands listener `fd` to the thread (it owns and closes it from now on). */
  attach(
    fd: number,
    ctx: C,
    opts: { trustFirst: boolean; cgroup: string | null; killable: boolean },
  ): { close(): void } {
    if (this.#state !== "running" || this.#free.length === 0) {
      throw new Error("the gate thread cannot take a listener");
    }
    const slot = this.#free.pop()!;
    const id = this.#nextId++;
    clearTimeout(this.#idle);
    this.#idle = undefined;
    Atomics.store(this.#slots, slot, SLOT_OPEN);
    this.#entries.set(id, { ctx, fd, slot });
    this.#send({ t: "attach", id, slot, fd, ...opts, fast: this.#fast(ctx) });
    let closed = false;
    return {
      close: () => {
        if (closed) return;
        closed = true;
        if (this.#entries.has(id)) this.#send({ t: "detach", id });
      },
    };
  }

  /** The policy changed: every snapshot the thread holds is stale from now on. */
  policyChanged(): void {
    Atomics.add(this.#ctl, EPOCH, 1);
  }

  /** Stop-all: while up, the thread asks the daemon about every exec. */
  barrier(up: boolean): void {
    Atomics.store(this.#ctl, BARRIER, up ? 1 : 0);
  }

  /** Tests: makes the thread throw (the host must fail closed). */
  injectFailure(): void {
    this.#send({ t: "fail" });
  }

  /** Ends the thread (shutdown, idle). Listeners still attached are closed. */
  async stop(): Promise<void> {
    if (this.#state !== "running") return;
    // From now on it takes no listener (the sandbox starts another thread or gates on the main
    // one): one attached while it stops would be closed with the others.
    this.#state = "stopping";
    clearTimeout(this.#idle);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const left = new Promise<void>((resolve) => {
      this.#stopped = resolve;
      timer = setTimeout(resolve, STOP_MS);
    });
    this.#send({ t: "stop" });
    await left;
    clearTimeout(timer);
    if (this.#state !== "stopping") return; // it failed meanwhile
    this.#state = "stopped";
    this.#end();
  }

  #fast(ctx: C): GateFast {
    const epoch = Atomics.load(this.#ctl, EPOCH);
    let fp: ExecFastPath | undefined;
    try {
      fp = this.#host.fastPath(ctx);
    } catch (err) {
      log.warn("exec fast path unavailable: every exec is asked", { error: err });
    }
    return { epoch, fp: fp ?? null };
  }

  #send(m: ToGate): void {
    if (this.#wakeWrite < 0 || this.#state === "failed" || this.#state === "stopped") return;
    this.#worker.postMessage(m);
    // Counted before the wake-up byte: the thread, woken, waits for every message counted.
    Atomics.add(this.#ctl, SENT, 1);
    sys().write(this.#wakeWrite, this.#wakeByte, 1n); // EAGAIN: a byte is already there
  }

  #onMessage(m: FromGate): void {
    if (this.#state === "failed") return;
    switch (m.t) {
      case "decide":
        return this.#decide(m.id, m.of, m.ev, m.epoch);
      case "note": {
        const e = this.#entries.get(m.of);
        if (e) this.#host.note(e.ctx, m.pid, m.start);
        return;
      }
      case "race": {
        // A check may end after its listener closed: the report still goes to its own context.
        const ctx = this.#entries.get(m.of)?.ctx ?? this.#recent.get(m.of)?.ctx;
        if (ctx !== undefined) this.#host.onRace(m.ev, ctx, m.found);
        else log.error("a late exec race report lost its session", { found: m.found });
        return;
      }
      case "closed": {
        const e = this.#entries.get(m.of);
        if (!e) return;
        this.#entries.delete(m.of);
        this.#remember(m.of, e.ctx);
        Atomics.store(this.#slots, e.slot, SLOT_FREE);
        this.#free.push(e.slot);
        if (this.#entries.size === 0 && this.#state === "running") {
          const idle = this.#idle = setTimeout(() => void this.stop(), IDLE_MS);
          Deno.unrefTimer(idle);
        }
        return;
      }
      case "stopped":
        this.#left = true;
        this.#stopped?.();
        return;
    }
  }

  #remember(id: number, ctx: C): void {
    const now = performance.now();
    for (const [old, r] of this.#recent) {
      if (this.#recent.size < RECENT && now - r.at < RECENT_MS) break;
      this.#recent.delete(old); // oldest first (insertion order)
    }
    this.#recent.set(id, { ctx, at: now });
  }

  #decide(id: number, of: number, ev: ExecEvent, epoch: number): void {
    const e = this.#entries.get(of);
    const reply = (answer: ExecAnswer) => {
      if (this.#state !== "running" && this.#state !== "stopping") return;
      const fast = e && epoch !== Atomics.load(this.#ctl, EPOCH) ? this.#fast(e.ctx) : undefined;
      this.#send({ t: "decided", id, answer, ...(fast ? { fast } : {}) });
    };
    if (!e) return reply({ allow: false }); // detached meanwhile: its execs fail anyway
    let answer: ExecAnswer | Promise<ExecAnswer>;
    try {
      answer = this.#host.decide(ev, e.ctx);
    } catch (err) {
      log.error("exec decider failed: denying", { error: err });
      answer = { allow: false };
    }
    if (!(answer instanceof Promise)) return reply(answer);
    answer.catch((err) => {
      log.error("exec decider failed: denying", { error: err });
      return { allow: false } as ExecAnswer;
    }).then(reply);
  }

  /**
   * The thread is gone or broken: close every listener it still held (their sessions' execs
   * fail from now on: nothing runs unchecked), and never use it again.
   */
  #fail(reason: string): void {
    if (this.#state === "failed") return;
    const wasRunning = this.#state === "running" || this.#state === "stopping";
    this.#state = "failed";
    clearTimeout(this.#idle);
    this.#stopped?.();
    const sessions = this.#entries.size;
    this.#end();
    if (wasRunning) {
      log.error("the exec gate thread failed: its sessions can run nothing new", {
        reason,
        sessions,
      });
    }
  }

  #end(): void {
    // Wake it from poll() so that the termination takes effect now.
    if (this.#wakeWrite >= 0) sys().write(this.#wakeWrite, this.#wakeByte, 1n);
    this.#worker.terminate();
    clearTimeout(this.#idle);
    for (const [id, e] of this.#entries) {
      if (
        Atomics.compareExchange(this.#slots, e.slot, SLOT_OPEN, SLOT_CLOSED_HOST) === SLOT_OPEN
      ) {
        // The listener goes (its processes' execs fail from now on). Unless the thread left its
        // loop, its number stays taken (/dev/null over it): a thread still inside poll() or a
        // handler must not reach whatever the number would be reused for.
        if (this.#left) sys().close(e.fd);
        else placeholder(e.fd);
      }
      this.#remember(id, e.ctx);
    }
    this.#entries.clear();
    // Unless it left its loop, the wake pipe stays open (two fds): the thread may still be
    // inside a poll() that names it, and a number reused meanwhile would be polled instead.
    if (this.#left) {
      sys().close(this.#wakeRead);
      sys().close(this.#wakeWrite);
      this.#wakeRead = this.#wakeWrite = -1;
    }
    this.#onEnd();
  }
}

/** Replaces `fd` with /dev/null (closing what it was, keeping the number taken). */
function placeholder(fd: number): void {
  const libc = sys();
  const nul = libc.open(cstr("/dev/null"), LINUX.O_RDONLY | LINUX.O_CLOEXEC, 0);
  if (nul < 0 || libc.dup2(nul, fd) < 0) {
    log.error("a listener could not be replaced: closing it", { fd });
    libc.close(fd);
  }
  if (nul >= 0 && nul !== fd) libc.close(nul);
}
