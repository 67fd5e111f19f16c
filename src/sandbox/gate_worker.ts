/**
 * The exec gate's own thread (a Web Worker; its host is gate_thread.ts). It owns the listener
 * fds it is given — polls them, receives, reads the targets, answers, checks after the exec and
 * closes them — so that an exec waits for nothing on the daemon's busy thread unless the
 * policy needs it there. The same ExecGate as on the daemon's thread, over a synchronous poller:
 * one `poll()` on this thread over every listener and a wake pipe (no thread hop per exec, which
 * is what the gate cost before), with a turn of this worker's event loop after each round for
 * messages and the gate's 1 ms timers.
 *
 * Decided here: what `fastAnswer` can (the agent's snapshot, current epoch, no stop-all). Asked
 * of the daemon's thread: everything else (`decide`, answered by `decided`). Told to it: races
 * (`race`), execs of sessions without a cgroup (`note`), listeners closed (`closed`).
 *
 * Bounds: GATE_LIMITS per listener and round (gate.ts); at most SLOTS listeners (gate_thread.ts);
 * a forwarded exec waits as long as the daemon's answer takes (its process stays blocked in
 * execve, killable).
 */
/// <reference lib="deno.worker" />
import { LINUX, sys } from "../../ffi/mod.ts";
import { procStat } from "../pty/mod.ts";
import { logger } from "../shared/mod.ts";
import { Cgroup } from "./cgroup.ts";
import { fastAnswer } from "./fast_path.ts";
import { type ExecAnswer, type ExecEvent, ExecGate, type ExecHold, GateCounters } from "./gate.ts";
import {
  BARRIER,
  EPOCH,
  type FromGate,
  type GateFast,
  SENT,
  SLOT_CLOSED_HERE,
  SLOT_OPEN,
  type ToGate,
} from "./gate_thread.ts";

const log = logger("sandbox");

interface Ctx {
  /** The attachment's id (every message about it carries it). */
  id: number;
  cgroup: Cgroup | null;
  killable: boolean;
  hold: Cgroup | null | undefined;
  fast: GateFast;
}

const POLLFD = 8;
const PR_SET_TIMERSLACK = 29;
/** Longest blocking poll: messages also wake it (the wake pipe); this only bounds a lost one. */
const IDLE_POLL_MS = 1000;

/**
 * When this worker's timers (the gate's deferred checks, 1 ms apart) are due: poll() waits no
 * longer than the earliest, and the event loop gets a turn only once one is.
 */
const due = new Map<number, number>();
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;
globalThis.setTimeout = ((fn: () => void, ms = 0) => {
  const id = realSetTimeout(() => {
    due.delete(id);
    fn();
  }, ms) as unknown as number;
  due.set(id, performance.now() + ms);
  return id;
}) as unknown as typeof setTimeout;
globalThis.clearTimeout = ((id?: number) => {
  if (id !== undefined) due.delete(id);
  realClearTimeout(id as unknown as Parameters<typeof clearTimeout>[0]);
}) as unknown as typeof clearTimeout;

/** Milliseconds until the earliest timer is due (0: one is; -1: none pending). */
function untilDue(): number {
  if (due.size === 0) return -1;
  let first = Infinity;
  for (const at of due.values()) if (at < first) first = at;
  return Math.max(0, Math.ceil(first - performance.now()));
}

/** The synchronous poller ExecGate runs over here (its `register`/`unregister`/`setPaused`). */
class SyncPoller {
  readonly regs = new Map<number, (revents: number) => void>();
  readonly paused = new Set<number>();
  /** Listener fd → its attachment and slot (the shared slot decides who closes the fd). */
  readonly owner = new Map<number, { id: number; slot: number }>();

  register(fd: number, handler: { ready(revents: number): void }): void {
    this.regs.set(fd, (r) => handler.ready(r));
  }

  setPaused(fd: number, paused: boolean): void {
    if (paused) this.paused.add(fd);
    else this.paused.delete(fd);
  }

  unregister(fd: number, opts: { close?: boolean } = {}): void {
    this.regs.delete(fd);
    this.paused.delete(fd);
    if (!opts.close) return;
    const o = this.owner.get(fd);
    if (o === undefined) return; // not ours (or closed already)
    this.owner.delete(fd);
    ctxs.delete(o.id);
    // Whoever changes the slot from open closes the fd: here, or the host after a failure.
    if (Atomics.compareExchange(slots, o.slot, SLOT_OPEN, SLOT_CLOSED_HERE) === SLOT_OPEN) {
      sys().close(fd);
    }
    post({ t: "closed", of: o.id });
  }
}

let ctl: Int32Array;
let slots: Int32Array;
let wakeFd = -1;
let received = 0;
let stopping = false;
const poller = new SyncPoller();
const ctxs = new Map<number, { ctx: Ctx; close(): void }>();
const waiting = new Map<number, { resolve(a: ExecAnswer): void; ctx: Ctx }>();
let nextId = 1;
let gate: ExecGate<Ctx> | undefined;

function post(m: FromGate): void {
  self.postMessage(m);
}

function decide(ev: ExecEvent, c: Ctx): ExecAnswer | Promise<ExecAnswer> {
  const f = c.fast;
  if (current(c)) {
    const a = fastAnswer(f.fp!, ev);
    if (a) {
      if (!c.cgroup) note(c, ev.pid);
      return a;
    }
  }
  const id = nextId++;
  return new Promise<ExecAnswer>((resolve) => {
    waiting.set(id, { resolve, ctx: c });
    post({ t: "decide", id, of: c.id, ev, epoch: f.epoch });
  });
}

/** No exec rules (and no stop-all): allowed before anything of it is read. */
function quick(pid: number, c: Ctx): ExecAnswer | undefined {
  if (!current(c) || !c.fast.fp!.allowAll) return undefined;
  if (!c.cgroup) note(c, pid);
  return ALLOW;
}

const ALLOW: ExecAnswer = { allow: true };

/** Tells the host a pid exec'd in a scope without a cgroup, with its start time read now. */
function note(c: Ctx, pid: number): void {
  post({ t: "note", of: c.id, pid, start: procStat(pid)?.startTime });
}

/** The context's snapshot may be used: it has one, of this epoch, and stop-all is not up. */
function current(c: Ctx): boolean {
  const f = c.fast;
  return f.fp !== null && f.epoch === Atomics.load(ctl, EPOCH) && Atomics.load(ctl, BARRIER) === 0;
}

function holdOf(c: Ctx): ExecHold | undefined {
  if (!c.killable || !c.cgroup) return undefined;
  if (c.hold === undefined) {
    try {
      const h = c.cgroup.child("hold");
      c.hold = h.freeze(true) ? h : null;
    } catch {
      c.hold = null;
    }
  }
  return c.hold ? { hold: c.hold, home: c.cgroup } : undefined;
}

function onMessage(m: ToGate): void {
  switch (m.t) {
    case "init": {
      // This thread's sleeps (10 µs, waiting for a held exec to stop) end when asked, not up to
      // 50 µs later (the default timer slack; it applies to the calling thread only).
      sys().prctl(PR_SET_TIMERSLACK, 1n, 0n, 0n, 0n);
      ctl = new Int32Array(m.ctl);
      slots = new Int32Array(m.slots);
      wakeFd = m.wakeFd;
      gate = new ExecGate<Ctx>(decide, {
        poller,
        counters: new GateCounters(m.counters),
        holdOf,
        quick,
        onRace: (ev, c, found) => post({ t: "race", of: c.id, ev, found }),
      });
      void loop();
      return;
    }
    case "attach": {
      const ctx: Ctx = {
        id: m.id,
        cgroup: m.cgroup === null ? null : new Cgroup(m.cgroup),
        killable: m.killable,
        hold: undefined,
        fast: m.fast,
      };
      poller.owner.set(m.fd, { id: m.id, slot: m.slot });
      const handle = gate!.attach(m.fd, ctx, { trustFirst: m.trustFirst, syncWakeUp: true });
      ctxs.set(m.id, { ctx, close: () => handle.close() });
      return;
    }
    case "detach": {
      const a = ctxs.get(m.id);
      ctxs.delete(m.id);
      a?.close();
      return;
    }
    case "decided": {
      const w = waiting.get(m.id);
      if (!w) return;
      waiting.delete(m.id);
      if (m.fast) w.ctx.fast = m.fast;
      w.resolve(m.answer);
      return;
    }
    case "fail":
      // Tests: an unexpected error on this thread (the host must fail closed).
      throw new Error("gate thread failure (injected)");
    case "stop":
      stopping = true;
      return;
  }
}

self.onmessage = (ev: MessageEvent<ToGate>) => {
  received = (received + 1) | 0; // as SENT, an int32 that wraps
  onMessage(ev.data);
};

/**
 * One turn of this worker's event loop (messages from the host are delivered in it). Through a
 * MessageChannel, not setTimeout: a timer waits at least a millisecond here, per exec.
 */
const channel = new MessageChannel();
let turned: (() => void) | undefined;
channel.port2.onmessage = () => turned?.();
const turn = () =>
  new Promise<void>((r) => {
    turned = r;
    channel.port1.postMessage(0);
  });

async function loop(): Promise<void> {
  const libc = sys();
  let buf = new Uint8Array(POLLFD * 16);
  let view = new DataView(buf.buffer);
  const order: number[] = [];
  const drain = new Uint8Array(64);
  while (!stopping) {
    order.length = 0;
    for (const fd of poller.regs.keys()) if (!poller.paused.has(fd)) order.push(fd);
    const n = order.length + 1;
    if (buf.length < n * POLLFD) {
      buf = new Uint8Array(n * POLLFD * 2);
      view = new DataView(buf.buffer);
    }
    view.setInt32(0, wakeFd, true);
    view.setInt16(4, LINUX.POLLIN, true);
    view.setInt16(6, 0, true);
    for (let i = 0; i < order.length; i++) {
      const off = (i + 1) * POLLFD;
      view.setInt32(off, order[i]!, true);
      view.setInt16(off + 4, LINUX.POLLIN, true);
      view.setInt16(off + 6, 0, true);
    }
    // Blocks this thread (its own, not the daemon's): a message or a notification wakes it.
    const wait = untilDue();
    const rc = libc.poll_here(buf, BigInt(n), wait < 0 ? IDLE_POLL_MS : wait);
    if (rc > 0) {
      if (view.getInt16(6, true) !== 0) {
        while (Number(libc.read(wakeFd, drain, BigInt(drain.length))) > 0) {
          // every queued wake-up byte
        }
      }
      for (let i = 0; i < order.length; i++) {
        const revents = view.getInt16((i + 1) * POLLFD + 6, true);
        if (revents === 0) continue;
        const ready = poller.regs.get(order[i]!);
        if (!ready) continue; // detached by an earlier handler of this round
        try {
          ready(revents);
        } catch (err) {
          // A bug must not stop the gate for every other session: drop (close) that listener,
          // so its execs fail instead of waiting.
          log.error("exec gate handler failed: listener closed", { error: err });
          const o = poller.owner.get(order[i]!);
          const a = o === undefined ? undefined : ctxs.get(o.id);
          if (a) a.close();
          else poller.unregister(order[i]!, { close: true });
        }
      }
    }
    // Messages (attach, answers) and due timers run in a turn of the event loop, taken only
    // when one may be due: after a wake-up byte (a message announced in SENT: waited for until
    // it arrived), or when a timer is due. Otherwise straight back to poll(). A turn in which a
    // message arrived is followed by one more: what that message started (a decision's answer
    // goes through promise callbacks) must have run before this thread blocks again.
    const woken = rc > 0 && view.getInt16(6, true) !== 0;
    if (woken || untilDue() === 0) {
      let seen: number;
      do {
        seen = received;
        await turn();
      } while (!stopping && (received !== seen || ((Atomics.load(ctl, SENT) - received) | 0) > 0));
    }
  }
  post({ t: "stopped" });
  self.close();
}
