/**
 * The exec gate, daemon side: every `execve`/`execveat` of every process of every session
 * arrives here as a seccomp notification, on the gate thread's poller (gate_worker.ts) or the
 * shared Poller (one `poll()` for all fds either way, no thread per process). For each it reads what really runs from the target — the path and argv
 * from its memory (`/proc/<pid>/mem`), the file resolved through the target's own root and cwd
 * (or the fd for `execveat`/`fexecve`), the file's identity and, for a script, its `#!`
 * interpreter — re-checks that the notification is still live (the pid cannot have been
 * reused), asks the decider, and lets the call continue or fails it with EACCES.
 *
 * A decider may answer later (a person approves): the target simply stays blocked in `execve`,
 * killable, until then. Bounds: 64 notifications handled per listener per poll round, paths of
 * 4096 bytes, argv of 4096 strings / 256 KiB in all (what is cut is flagged `truncated`).
 */
import { cstr, cstrInto, errno, LINUX, sys, syscalls } from "../../ffi/mod.ts";
import { type Poller, procStat, readProcFile, sharedPoller } from "../pty/mod.ts";
import { concatBytes, logger } from "../shared/mod.ts";
import { type FileIdentity, fileIdentity, shebang, statId } from "./identity.ts";
import { Listener, type Notification } from "./seccomp.ts";
import { ExecTrace, mayTrace } from "./exec_trace.ts";

const log = logger("sandbox");

export const GATE_LIMITS = {
  pathBytes: 4096,
  argvStrings: 4096,
  argvBytes: 256 * 1024,
  perRound: 64,
} as const;

const AT_FDCWD = -100;
const AT_EMPTY_PATH = 0x1000;

export interface ExecEvent {
  pid: number;
  /** The path as the program passed it (`execve`'s first argument; "" for fexecve). */
  path: string;
  /** Where it resolves in the daemon's view (`/proc/<pid>/root/...`, `/proc/<pid>/fd/<n>`). */
  resolved: string;
  argv: string[];
  /** argv was longer than GATE_LIMITS and was cut. */
  truncated: boolean;
  identity: FileIdentity | undefined;
  /**
   * For a `#!` script: the interpreter the kernel will really run (the end of the chain), with
   * its identity; `chain` has every level, outermost first (the kernel follows up to 4).
   */
  interpreter?: Interpreter;
  chain?: Interpreter[];
  /** The file exists but could not be read (so its content is unknown). */
  unreadable?: boolean;
  /**
   * The dynamic loader run as a program (`ld-linux.so /usr/bin/x …`, under any name: known by
   * its content too): the program it loads; `unknown` when its options could not be parsed.
   */
  loads?: { path: string; argv: string[]; identity: FileIdentity | undefined; unknown?: boolean };
  /** The first exec of this listener (the launcher starting the session's program). */
  first: boolean;
}

/**
 * `verify`: the decision depended on what the program is (the policy has rules), so the gate
 * checks after the exec that the kernel ran that very file and argv (see ExecGate).
 */
export interface Interpreter {
  path: string;
  arg?: string;
  identity: FileIdentity | undefined;
}

export type ExecAnswer = { allow: true; verify?: boolean } | { allow: false; errno?: number };

/** Where a verified exec waits frozen, and where it goes back to (the session's cgroup). */
export interface ExecHold {
  hold: { addPid(pid: number): void; frozen(): boolean };
  home: { addPid(pid: number): void };
}

/** What the gate tells its owner when an exec was not what was allowed (it killed it). */
export type RaceReport<C> = (ev: ExecEvent, ctx: C, found: string) => void;

export type ExecDecider<C> = (ev: ExecEvent, ctx: C) => ExecAnswer | Promise<ExecAnswer>;

export interface GateStats {
  decisions: number;
  allowed: number;
  denied: number;
  /**
   * Microseconds from notification read to the decision (memory, resolution, identity, policy),
   * synchronous decisions only (last 4096).
   */
  p50Us: number;
  p99Us: number;
  /** Execs held and checked after exec (a race was possible), and how long that held them. */
  verified: number;
  /** Of those, held with ptrace (the cheap hold, see exec_trace.ts), not in the freezer. */
  traced: number;
  verifyP50Us: number;
  verifyP99Us: number;
}

const SAMPLES = 4096;
/** decisions, allowed, denied, samples taken, verified, traced (float64 each). */
const COUNTS = 6;

/**
 * The gate's counters and its last SAMPLES decision and verify times, in one buffer: a
 * SharedArrayBuffer when the gate runs on its own thread (gate_thread.ts), so that the daemon's
 * thread reads them without asking. One writer per buffer; a reader may see a count one behind.
 */
export class GateCounters {
  static readonly BYTES = 8 * (COUNTS + 2 * SAMPLES);
  readonly buffer: ArrayBufferLike;
  readonly counts: Float64Array;
  readonly samples: Float64Array;
  readonly verifySamples: Float64Array;

  constructor(buffer: ArrayBufferLike = new ArrayBuffer(GateCounters.BYTES)) {
    this.buffer = buffer;
    this.counts = new Float64Array(buffer, 0, COUNTS);
    this.samples = new Float64Array(buffer, 8 * COUNTS, SAMPLES);
    this.verifySamples = new Float64Array(buffer, 8 * (COUNTS + SAMPLES), SAMPLES);
  }
}

const DECISIONS = 0, ALLOWED = 1, DENIED = 2, SAMPLED = 3, VERIFIED = 4, TRACED = 5;

/** The stats of one or more gates (the daemon's thread's and the gate thread's), together. */
export function gateStats(all: readonly GateCounters[]): GateStats {
  const pct = (pick: (c: GateCounters) => Float64Array, count: number) => {
    const values: number[] = [];
    for (const c of all) {
      const n = Math.min(c.counts[count]!, SAMPLES);
      values.push(...pick(c).subarray(0, n));
    }
    values.sort((a, b) => a - b);
    const n = values.length;
    const q = (p: number) => n === 0 ? 0 : values[Math.min(n - 1, Math.floor(p * n))]!;
    return [Math.round(q(0.5) * 10000) / 10, Math.round(q(0.99) * 10000) / 10] as const;
  };
  const sum = (i: number) => all.reduce((s, c) => s + c.counts[i]!, 0);
  const [p50Us, p99Us] = pct((c) => c.samples, SAMPLED);
  const [verifyP50Us, verifyP99Us] = pct((c) => c.verifySamples, VERIFIED);
  return {
    decisions: sum(DECISIONS),
    allowed: sum(ALLOWED),
    denied: sum(DENIED),
    p50Us,
    p99Us,
    verified: sum(VERIFIED),
    traced: sum(TRACED),
    verifyP50Us,
    verifyP99Us,
  };
}

/** What the gate needs of a poller: the daemon's shared one, or the gate thread's own. */
export type GatePoller = Pick<Poller, "register" | "unregister"> & {
  setPaused?(fd: number, paused: boolean): void;
};

class Attached<C> {
  readonly listener: Listener;
  readonly ctx: C;
  first = true;
  trustFirst = false;
  closed = false;
  pending = 0;
  /** POLLHUP was seen while work was pending: closed when the last one settles. */
  hungUp = false;
  constructor(fd: number, ctx: C) {
    this.listener = new Listener(fd);
    this.ctx = ctx;
  }
}

/** Longest wait for an allowed exec to reach its first instruction (it is killed after). */
export const VERIFY_WAIT_MS = 2000;
/** How long the daemon's thread waits for it in place before finishing the check later. */
export const VERIFY_SPIN_MS = 2;

export class ExecGate<C> {
  readonly #decide: ExecDecider<C>;
  readonly #poller: GatePoller;
  readonly #holdOf: ((ctx: C) => ExecHold | undefined) | undefined;
  readonly #onRace: RaceReport<C> | undefined;
  readonly #quick: ((pid: number, ctx: C) => ExecAnswer | undefined) | undefined;
  readonly #attached = new Map<number, Attached<C>>();
  readonly counters: GateCounters;
  readonly #n: Float64Array;

  constructor(
    decide: ExecDecider<C>,
    options: {
      poller?: GatePoller;
      /** Where to count (default: a buffer of its own). */
      counters?: GateCounters;
      /** Cgroups to hold a verified exec in (none: allowed execs are not verified). */
      holdOf?: (ctx: C) => ExecHold | undefined;
      onRace?: RaceReport<C>;
      /**
       * Answers an exec before anything of it is read, when what it is cannot matter (a policy
       * without exec rules allows everything); undefined: read it and ask the decider.
       */
      quick?: (pid: number, ctx: C) => ExecAnswer | undefined;
    } = {},
  ) {
    this.#decide = decide;
    this.#poller = options.poller ?? sharedPoller();
    this.#holdOf = options.holdOf;
    this.#onRace = options.onRace;
    this.#quick = options.quick;
    this.counters = options.counters ?? new GateCounters();
    this.#n = this.counters.counts;
  }

  /**
   * Starts answering the notifications of one listener fd (the gate owns and closes it).
   * `syncWakeUp`: ask the kernel to hand notifications over on the waker's CPU (the gate's own
   * thread, which waits in poll() itself; see Listener.syncWakeUp).
   */
  attach(
    fd: number,
    ctx: C,
    opts: { trustFirst?: boolean; syncWakeUp?: boolean } = {},
  ): { close(): void } {
    const a = new Attached(fd, ctx);
    a.trustFirst = opts.trustFirst ?? false;
    if (opts.syncWakeUp) a.listener.syncWakeUp();
    this.#attached.set(fd, a);
    this.#poller.register(fd, { ready: (r) => this.#ready(a, r) });
    return { close: () => this.#detach(a) };
  }

  get size(): number {
    return this.#attached.size;
  }

  stats(): GateStats {
    return gateStats([this.counters]);
  }

  /**
   * The kernel reads the path and argv again after we answered, and a second thread of the
   * target (or a process sharing its memory) could rewrite them, or the file at the path could
   * be swapped, in between (the seccomp_unotify pointer race). So: the process waits in a frozen
   * cgroup, is let go into execve, and is checked when it reaches its first instruction (frozen,
   * it runs none): the file it now runs must be the one allowed (or, for a script, its
   * interpreter), its argv the one allowed. Otherwise it is killed before it ran anything, and
   * reported. A failed exec (same image as before) is let go.
   */
  #allowVerified(a: Attached<C>, n: Notification, ev: ExecEvent, hold: ExecHold): void {
    // The cheap hold: traced (see ExecTrace) when the daemon may, the exec'ing thread is its
    // process's only one (a thread that execs takes its leader's pid) and the daemon is not its
    // parent (whose own wait must keep seeing its child's end). One /proc read tells all three.
    const st = mayTrace() ? procStat(n.pid) : undefined;
    if (st && st.threads === 1 && st.ppid !== Deno.pid) {
      const t = ExecTrace.seize(n.pid, st.startTime);
      if (t) {
        this.#n[TRACED]!++;
        if (!a.listener.allow(n.id)) {
          t.release(); // it died meanwhile: nothing ran
          return;
        }
        t.interrupt();
        this.#traced(a, ev, t, performance.now() + VERIFY_SPIN_MS);
        return;
      }
    }
    const tgid = tgidOf(n.pid) ?? n.pid;
    // A new image has a new stack: how a successful exec is told from a failed one.
    const before = stackStart(tgid);
    try {
      hold.hold.addPid(tgid);
    } catch {
      a.listener.allow(n.id); // it exited meanwhile, or the cgroup went away
      return;
    }
    a.listener.allow(n.id);
    // Most execs reach their first instruction within a millisecond: wait for that here, a
    // little; a slower one is finished later, off this turn (it stays frozen meanwhile), so no
    // session can hold the daemon's thread for long.
    const spinUntil = performance.now() + VERIFY_SPIN_MS;
    for (let spins = 0; !hold.hold.frozen(); spins++) {
      // gone (killed or exited): nothing to check. Asked now and then: each look is a /proc read
      // competing with the exec for the CPU.
      if (spins % 16 === 15 && !procStat(tgid)) return;
      if (performance.now() >= spinUntil) {
        a.pending++;
        this.#verifyLater(a, ev, hold, tgid, before, performance.now() + VERIFY_WAIT_MS);
        return;
      }
      sys().usleep(10); // yield the CPU to the exec under way
    }
    this.#verified(a, ev, hold, tgid, before, true);
  }

  /**
   * Waits for a traced exec to stop before its first instruction (in place until `until`, then
   * polled once a millisecond off this turn, up to VERIFY_WAIT_MS), checks it and lets it go; one
   * that never stops is killed. `later`: a deferred poll (counted in `a.pending`).
   */
  #traced(a: Attached<C>, ev: ExecEvent, t: ExecTrace, until: number, later = false): void {
    for (;;) {
      const stop = t.poll();
      if (stop.kind !== "running") {
        if (stop.kind === "stopped") {
          const found = stop.execd ? imageMismatch(t.pid, ev) : undefined;
          if (found !== undefined) {
            t.kill();
            this.#onRace?.(ev, a.ctx, found);
          } else t.detach(stop.signal);
        }
        if (later) this.#settled(a);
        return;
      }
      if (later && performance.now() >= until) {
        this.#settled(a);
        t.kill();
        this.#onRace?.(ev, a.ctx, TOO_SLOW);
        return;
      }
      if (later || performance.now() >= until) break;
      sys().usleep(10); // yield the CPU to the exec under way
    }
    if (!later) a.pending++;
    const deadline = later ? until : performance.now() + VERIFY_WAIT_MS;
    setTimeout(() => this.#traced(a, ev, t, deadline, true), 1);
  }

  #verifyLater(
    a: Attached<C>,
    ev: ExecEvent,
    hold: ExecHold,
    tgid: number,
    before: string | undefined,
    deadline: number,
  ): void {
    setTimeout(() => {
      if (!procStat(tgid)) return void this.#settled(a);
      const frozen = hold.hold.frozen();
      if (!frozen && performance.now() < deadline) {
        return this.#verifyLater(a, ev, hold, tgid, before, deadline);
      }
      this.#settled(a);
      this.#verified(a, ev, hold, tgid, before, frozen);
    }, 1);
  }

  #verified(
    a: Attached<C>,
    ev: ExecEvent,
    hold: ExecHold,
    tgid: number,
    before: string | undefined,
    frozen: boolean,
  ): void {
    let found: string | undefined;
    if (!frozen) found = TOO_SLOW;
    else if (stackStart(tgid) !== before) {
      // It exec'd (a failed exec keeps its image and is simply let go).
      found = imageMismatch(tgid, ev);
    }
    if (found !== undefined) {
      sys().kill(tgid, 9);
      this.#onRace?.(ev, a.ctx, found);
    }
    try {
      hold.home.addPid(tgid);
    } catch {
      // killed and gone, or exited: nothing to move back
    }
  }

  #detach(a: Attached<C>): void {
    if (a.closed) return;
    a.closed = true;
    this.#attached.delete(a.listener.fd);
    // Closing the last listener fd makes pending and future execs of its processes fail
    // (ENOSYS): a detached session can no longer run anything new.
    this.#poller.unregister(a.listener.fd, { close: true });
  }

  #ready(a: Attached<C>, revents: number): void {
    if (a.closed) return;
    // NOTIF_RECV blocks when nothing is pending: receive only what poll() said is there (the
    // first) and what a zero-timeout poll still shows (the rest of this round).
    for (let i = 0; i < GATE_LIMITS.perRound; i++) {
      if (i === 0 ? !(revents & LINUX.POLLIN) : !readable(a.listener.fd)) break;
      const n = a.listener.recv();
      if (!n) break;
      this.#handle(a, n);
    }
    // Every process of the filter is gone: nothing can notify any more. With work still pending
    // (a decision, a check), stop polling it (a hung-up fd is always ready) and close it after.
    if (revents & LINUX.POLLHUP) {
      if (a.pending === 0) this.#detach(a);
      else if (!a.hungUp) {
        a.hungUp = true;
        this.#poller.setPaused?.(a.listener.fd, true);
      }
    }
  }

  /** One pending decision or check of `a` ended: a hung-up listener closes with its last one. */
  #settled(a: Attached<C>): void {
    a.pending--;
    if (a.hungUp && a.pending === 0) this.#detach(a);
  }

  #handle(a: Attached<C>, n: Notification): void {
    const t0 = performance.now();
    const quick = a.first ? undefined : this.#quick?.(n.pid, a.ctx);
    if (quick) return this.#answer(a, n, quick, t0);
    let ev: ExecEvent | undefined;
    try {
      ev = readExec(n, a.first);
    } catch (err) {
      log.warn("exec notification unreadable", { pid: n.pid, error: err });
    }
    // The target's memory is read: make sure it is still that process, in that call.
    if (!a.listener.valid(n.id)) return;
    if (!ev) {
      this.#answer(a, n, { allow: false }, t0);
      return;
    }
    const trusted = a.first && a.trustFirst;
    a.first = false;
    if (trusted) {
      this.#answer(a, n, { allow: true }, t0);
      return;
    }
    let answer: ExecAnswer | Promise<ExecAnswer>;
    try {
      answer = this.#decide(ev, a.ctx);
    } catch (err) {
      log.error("exec decider failed: denying", { error: err });
      answer = { allow: false };
    }
    if (answer instanceof Promise) {
      a.pending++;
      answer.catch((err) => {
        log.error("exec decider failed: denying", { error: err });
        return { allow: false } as ExecAnswer;
      }).then((ans) => {
        if (!a.closed) this.#answer(a, n, ans, undefined, ev);
        this.#settled(a);
      });
      return;
    }
    this.#answer(a, n, answer, t0, ev);
  }

  #answer(
    a: Attached<C>,
    n: Notification,
    ans: ExecAnswer,
    t0: number | undefined,
    ev?: ExecEvent,
  ): void {
    const counts = this.#n;
    counts[DECISIONS]!++;
    if (ans.allow) {
      counts[ALLOWED]!++;
      // Every exec the decision depends on is held and checked after the exec: the kernel reads
      // the path and argv again after this answer, and whatever the target, another process can
      // change them in between (docs/SECURITY.md, "the pointer race").
      const hold = ans.verify && ev ? this.#holdOf?.(a.ctx) : undefined;
      if (hold && ev) {
        // Decided: holding and checking it is the after-exec check's time, not the decision's.
        if (t0 !== undefined) this.#sample(t0);
        const v0 = performance.now();
        this.#allowVerified(a, n, ev, hold);
        this.counters.verifySamples[counts[VERIFIED]!++ % SAMPLES] = performance.now() - v0;
      } else {
        // Sampled before the answer goes: sending it hands the CPU to the target (a sync
        // wake-up), and that is the exec's own time, as on the held path above.
        if (t0 !== undefined) this.#sample(t0);
        a.listener.allow(n.id);
      }
    } else {
      if (t0 !== undefined) this.#sample(t0);
      a.listener.deny(n.id, ans.errno ?? LINUX.EACCES);
      counts[DENIED]!++;
    }
  }

  #sample(t0: number): void {
    this.counters.samples[this.#n[SAMPLED]!++ % SAMPLES] = performance.now() - t0;
  }
}

const pollfd = new Uint8Array(8);
const pollView = new DataView(pollfd.buffer);

/** Whether `fd` has input right now (poll with a zero timeout, on this thread). */
function readable(fd: number): boolean {
  pollView.setInt32(0, fd, true);
  pollView.setInt16(4, LINUX.POLLIN, true);
  pollView.setInt16(6, 0, true);
  if (sys().poll_here(pollfd, 1n, 0) !== 1) return false;
  return (pollView.getInt16(6, true) & LINUX.POLLIN) !== 0;
}

const memBuf = new Uint8Array(4096);
const ptrBuf = new Uint8Array(8 * 512);
const ptrView = new DataView(ptrBuf.buffer);
const decoder = new TextDecoder();

/** The target's memory could not be read (unmapped, gone, or not ours to read). */
class MemoryUnreadable extends Error {}

/**
 * Reads the target's memory into `buf` (memBuf or ptrBuf): at most `len` bytes at `addr`, fewer
 * where the mapping ends; ≤ 0 when nothing at `addr` can be read.
 */
type MemRead = (buf: Uint8Array<ArrayBuffer>, len: number, addr: bigint) => number;

// struct iovec { void *iov_base; size_t iov_len; }: one local (memBuf or ptrBuf), one remote.
const localIov = new Uint8Array(64);
const localIovView = new DataView(localIov.buffer);
const remoteIov = new Uint8Array(64);
const remoteIovView = new DataView(remoteIov.buffer);
let bufAddrs: { mem: bigint; ptr: bigint } | undefined;

/**
 * process_vm_readv: no fd to open and close per exec (the same ptrace-mode check as opening
 * /proc/<pid>/mem). It stops at the first unreadable page, as a read of /proc/<pid>/mem does.
 */
function vmReader(pid: number): MemRead {
  bufAddrs ??= {
    mem: BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(memBuf))),
    ptr: BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(ptrBuf))),
  };
  const addrs = bufAddrs;
  return (buf, len, addr) => {
    localIovView.setBigUint64(0, buf === memBuf ? addrs.mem : addrs.ptr, true);
    localIovView.setBigUint64(8, BigInt(Math.min(len, buf.length)), true);
    remoteIovView.setBigUint64(0, addr, true);
    remoteIovView.setBigUint64(8, BigInt(len), true);
    return Number(sys().process_vm_readv(pid, localIov, 1n, remoteIov, 1n, 0n));
  };
}

/** pread on /proc/<pid>/mem (kept open by the caller). */
function fdReader(fd: number): MemRead {
  return (buf, len, addr) => Number(sys().pread(fd, buf, BigInt(Math.min(len, buf.length)), addr));
}

/** Reads a NUL-terminated string at `addr` in the target (at most `max` bytes). */
function readString(read: MemRead, addr: bigint, max: number): { s: string; cut: boolean } {
  let parts: Uint8Array[] | undefined;
  let total = 0;
  let a = addr;
  while (total < max) {
    // Never cross a page in one read: the next page may be unmapped.
    const pageLeft = 4096 - Number(a & 4095n);
    const want = Math.min(pageLeft, max - total, memBuf.length);
    const n = read(memBuf, want, a);
    if (n <= 0) throw new MemoryUnreadable(`cannot read target memory at 0x${a.toString(16)}`);
    const nul = memBuf.subarray(0, n).indexOf(0);
    if (nul >= 0) {
      // Most strings sit in one page: decoded in place, no copy.
      if (!parts) return { s: decoder.decode(memBuf.subarray(0, nul)), cut: false };
      parts.push(memBuf.slice(0, nul));
      total += nul;
      return { s: join(parts, total), cut: false };
    }
    (parts ??= []).push(memBuf.slice(0, n));
    total += n;
    a += BigInt(n);
  }
  return { s: join(parts ?? [], total), cut: true };
}

function join(parts: Uint8Array[], total: number): string {
  return decoder.decode(concatBytes(parts, total));
}

function readArgv(read: MemRead, addr: bigint): { argv: string[]; truncated: boolean } {
  const argv: string[] = [];
  let bytes = 0;
  let a = addr;
  if (a === 0n) return { argv, truncated: false };
  for (;;) {
    const n = read(ptrBuf, ptrChunk(a), a);
    if (n < 8) throw new MemoryUnreadable("cannot read argv");
    const end = n - (n % 8);
    for (let off = 0; off < end; off += 8) {
      const p = ptrView.getBigUint64(off, true);
      if (p === 0n) return { argv, truncated: false };
      if (argv.length >= GATE_LIMITS.argvStrings || bytes >= GATE_LIMITS.argvBytes) {
        return { argv, truncated: true };
      }
      // ptrBuf is not touched by readString (memBuf is): the rest of this chunk stays valid.
      const { s, cut } = readString(read, p, GATE_LIMITS.argvBytes - bytes);
      argv.push(s);
      bytes += s.length + 1;
      if (cut) return { argv, truncated: true };
    }
    a += BigInt(end);
  }
}

/** How many bytes of the pointer array at `a` to read at once: to the end of its page. */
function ptrChunk(a: bigint): number {
  const left = 4096 - Number(a & 4095n);
  // A pointer split across pages (a misaligned array) needs both.
  return Math.min(ptrBuf.length, left >= 8 ? left : left + 4096);
}

// The batched reads of process_vm_readv: the path and the argv pointers in one call, then the
// argv strings, BATCH at a time, each in a slot of SLOT bytes (or to the end of its page).
const SLOT = 256;
const BATCH = 64;
const batchBuf = new Uint8Array(SLOT * BATCH);
const batchLocal = new Uint8Array(32);
const batchLocalView = new DataView(batchLocal.buffer);
const batchRemote = new Uint8Array(16 * BATCH);
const batchRemoteView = new DataView(batchRemote.buffer);
let batchAddr: bigint | undefined;

function slotLen(p: bigint): number {
  return Math.min(SLOT, 4096 - Number(p & 4095n));
}

/**
 * The path and the argv through process_vm_readv in two calls for most execs (the path and
 * the pointers, then every string), where reading them one by one takes one per string. It
 * reads the same bytes: whatever a batch did not get whole is read as `readCall` does.
 */
function readCallBatched(
  pid: number,
  read: MemRead,
  pathAddr: bigint,
  argvAddr: bigint,
): { path: string; argv: string[]; truncated: boolean } {
  if (pathAddr === 0n || argvAddr === 0n) return readCall(read, pathAddr, argvAddr);
  const addrs = bufAddrs!;
  batchAddr ??= BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(batchBuf)));
  const pathLen = Math.min(4096 - Number(pathAddr & 4095n), GATE_LIMITS.pathBytes);
  const ptrLen = ptrChunk(argvAddr);
  batchLocalView.setBigUint64(0, addrs.mem, true);
  batchLocalView.setBigUint64(8, BigInt(pathLen), true);
  batchLocalView.setBigUint64(16, addrs.ptr, true);
  batchLocalView.setBigUint64(24, BigInt(ptrLen), true);
  batchRemoteView.setBigUint64(0, pathAddr, true);
  batchRemoteView.setBigUint64(8, BigInt(pathLen), true);
  batchRemoteView.setBigUint64(16, argvAddr, true);
  batchRemoteView.setBigUint64(24, BigInt(ptrLen), true);
  const got = Number(sys().process_vm_readv(pid, batchLocal, 2n, batchRemote, 2n, 0n));
  if (got < pathLen + 8) return readCall(read, pathAddr, argvAddr);
  const nul = memBuf.subarray(0, pathLen).indexOf(0);
  if (nul < 0) return readCall(read, pathAddr, argvAddr); // it goes on in the next page
  const path = decoder.decode(memBuf.subarray(0, nul));
  const argv: string[] = [];
  let bytes = 0;
  let a = argvAddr;
  let n = got - pathLen;
  for (;;) {
    if (n < 8) throw new MemoryUnreadable("cannot read argv");
    const end = n - (n % 8);
    let count = 0;
    while (count * 8 < end && ptrView.getBigUint64(count * 8, true) !== 0n) count++;
    for (let first = 0; first < count; first += BATCH) {
      const k = Math.min(BATCH, count - first);
      let total = 0;
      for (let j = 0; j < k; j++) {
        const p = ptrView.getBigUint64((first + j) * 8, true);
        const len = slotLen(p);
        batchRemoteView.setBigUint64(j * 16, p, true);
        batchRemoteView.setBigUint64(j * 16 + 8, BigInt(len), true);
        total += len;
      }
      batchLocalView.setBigUint64(0, batchAddr, true);
      batchLocalView.setBigUint64(8, BigInt(total), true);
      const filled = Number(
        sys().process_vm_readv(pid, batchLocal, 1n, batchRemote, BigInt(k), 0n),
      );
      let at = 0;
      for (let j = 0; j < k; j++) {
        if (argv.length >= GATE_LIMITS.argvStrings || bytes >= GATE_LIMITS.argvBytes) {
          return { path, argv, truncated: true };
        }
        const p = ptrView.getBigUint64((first + j) * 8, true);
        const len = slotLen(p);
        const max = GATE_LIMITS.argvBytes - bytes;
        const zero = at + len <= filled ? batchBuf.subarray(at, at + len).indexOf(0) : -1;
        // Found whole in its slot and within bounds: what readString would return; else it
        // reads it (and fails as it would).
        const { s, cut } = zero >= 0 && zero < max
          ? { s: decoder.decode(batchBuf.subarray(at, at + zero)), cut: false }
          : readString(read, p, max);
        at += len;
        argv.push(s);
        bytes += s.length + 1;
        if (cut) return { path, argv, truncated: true };
      }
    }
    if (count * 8 < end) return { path, argv, truncated: false }; // the NULL that ends argv
    a += BigInt(end);
    n = read(ptrBuf, ptrChunk(a), a);
  }
}

/** What a notified exec passed: its path and argv, read from the target's memory. */
function readCall(
  read: MemRead,
  pathAddr: bigint,
  argvAddr: bigint,
): { path: string; argv: string[]; truncated: boolean } {
  const { s: path, cut } = pathAddr === 0n
    ? { s: "", cut: false }
    : readString(read, pathAddr, GATE_LIMITS.pathBytes);
  if (cut) throw new Error("exec path too long");
  const { argv, truncated } = readArgv(read, argvAddr);
  return { path, argv, truncated };
}

/**
 * The path and argv of the call. process_vm_readv first; where it cannot read (a page only
 * /proc/<pid>/mem's forced access reaches, or a kernel or sandbox without it), everything is
 * read again through /proc/<pid>/mem, as it always was.
 */
function readTarget(
  pid: number,
  pathAddr: bigint,
  argvAddr: bigint,
  procMemOnly = false,
): { path: string; argv: string[]; truncated: boolean } {
  if (!procMemOnly) {
    try {
      return readCallBatched(pid, vmReader(pid), pathAddr, argvAddr);
    } catch (err) {
      if (!(err instanceof MemoryUnreadable)) throw err;
    }
  }
  const libc = sys();
  const mem = libc.open(cstr(`/proc/${pid}/mem`), LINUX.O_RDONLY | LINUX.O_CLOEXEC, 0);
  if (mem < 0) throw new Error(`cannot open memory of pid ${pid} (errno ${errno()})`);
  try {
    return readCall(fdReader(mem), pathAddr, argvAddr);
  } finally {
    libc.close(mem);
  }
}

/**
 * The path and argv at these addresses of `pid`, as the gate reads them (tests compare it with
 * `via: "proc-mem"`, the reading it falls back to).
 */
export function readExecArgs(
  pid: number,
  pathAddr: bigint,
  argvAddr: bigint,
  opts: { via?: "auto" | "proc-mem" } = {},
): { path: string; argv: string[]; truncated: boolean } {
  return readTarget(pid, pathAddr, argvAddr, opts.via === "proc-mem");
}

/** Reads and resolves what a notified execve/execveat will run. */
export function readExec(n: Notification, first: boolean): ExecEvent {
  const sc = syscalls()!;
  const isAt = n.nr === sc.execveat;
  const dirfd = isAt ? Number(BigInt.asIntN(32, n.args[0]!)) : AT_FDCWD;
  const pathAddr = isAt ? n.args[1]! : n.args[0]!;
  const argvAddr = isAt ? n.args[2]! : n.args[1]!;
  const flags = isAt ? Number(n.args[4]! & 0xffffffffn) : 0;
  const { path, argv, truncated } = readTarget(n.pid, pathAddr, argvAddr);
  let resolved: string;
  if (path === "" && (flags & AT_EMPTY_PATH) && dirfd >= 0) {
    resolved = `/proc/${n.pid}/fd/${dirfd}`;
  } else if (dirfd === AT_FDCWD || path.startsWith("/")) resolved = inTarget(n.pid, path);
  else resolved = `/proc/${n.pid}/fd/${dirfd}/${path}`;
  const identity = fileIdentity(resolved);
  const ev: ExecEvent = { pid: n.pid, path, resolved, argv, truncated, identity, first };
  if (!identity && statId(resolved) !== undefined) ev.unreadable = true;
  // The kernel follows `#!` up to 4 levels (BINPRM_MAX_RECURSION): so does the gate.
  let head = identity?.head;
  for (let level = 0; level < 5 && head; level++) {
    const bang = shebang(head);
    if (!bang) break;
    if (level === 4) {
      ev.identity = undefined; // deeper than the kernel goes: it will fail (ELOOP); unknown
      break;
    }
    const interp: Interpreter = {
      path: bang.interpreter,
      ...(bang.arg ? { arg: bang.arg } : {}),
      identity: fileIdentity(inTarget(n.pid, bang.interpreter)),
    };
    (ev.chain ??= []).push(interp);
    ev.interpreter = interp;
    head = interp.identity?.head;
  }
  const runs = ev.interpreter ?? { path, identity };
  if (isLoader(runs.path, runs.identity)) {
    // The loader run as a program: it opens and maps the program itself, no execve of it.
    const prog = loadedProgram(argv);
    ev.loads = prog
      ? { ...prog, identity: fileIdentity(inTarget(n.pid, prog.path)) }
      : { path: "", argv: [], identity: undefined, unknown: true };
  }
  return ev;
}

/** Why a held exec was killed when it did not stop before its first instruction in time. */
const TOO_SLOW = "the exec did not reach its first instruction in time to be checked";

/** What an exec'd process runs now, against what was allowed; undefined when they agree. */
function imageMismatch(tgid: number, ev: ExecEvent): string | undefined {
  const now = statId(`/proc/${tgid}/exe`);
  const want = ev.interpreter ? ev.interpreter.identity : ev.identity;
  if (!now || !want || now.dev !== want.dev || now.ino !== want.ino) {
    return `it runs another file than the one checked (${ev.path})`;
  }
  if (!ev.interpreter && !sameArgv(tgid, ev.argv, ev.truncated)) {
    return "its argv changed after it was checked";
  }
  return undefined;
}

function tgidOf(pid: number): number | undefined {
  const status = procStatus(pid);
  if (status === undefined) return undefined;
  const tgid = statusField(status, "Tgid");
  return tgid === "" ? undefined : Number(tgid);
}

const statusBuf = new Uint8Array(16384);
/** Scratch for the /proc paths the gate opens on its own thread (never held across calls). */
const procPath = new Uint8Array(256);

/**
 * /proc/<pid>/status, or undefined when the process is gone. One read: the kernel writes the
 * whole file in one go when the buffer holds it (it is ~1.5 KB).
 */
function procStatus(pid: number): string | undefined {
  const libc = sys();
  const fd = libc.open(
    cstrInto(`/proc/${pid}/status`, procPath),
    LINUX.O_RDONLY | LINUX.O_CLOEXEC,
    0,
  );
  if (fd < 0) return undefined;
  try {
    let total = 0;
    while (total < statusBuf.length) {
      const n = Number(
        libc.read(fd, statusBuf.subarray(total), BigInt(statusBuf.length - total)),
      );
      if (n <= 0) break;
      total += n;
      // A short read of a seq_file: the rest would be another read returning 0.
      if (n < 4096) break;
    }
    return decoder.decode(statusBuf.subarray(0, total));
  } finally {
    libc.close(fd);
  }
}

/** The value of a `Name:\tvalue` line of /proc/<pid>/status ("" when absent). */
function statusField(status: string, name: string): string {
  const at = status.indexOf(`\n${name}:`);
  if (at < 0) return "";
  const start = at + name.length + 2;
  let end = status.indexOf("\n", start);
  if (end < 0) end = status.length;
  return status.slice(start, end).trim();
}

/** The new image's argv (/proc/<pid>/cmdline, first 16 KiB) against what was allowed. */
function sameArgv(pid: number, argv: readonly string[], truncated: boolean): boolean {
  const text = readProcFile(`/proc/${pid}/cmdline`);
  if (text === undefined) return false;
  const want = argv.join("\0") + "\0";
  if (text.length >= 16384 || truncated) return want.startsWith(text) || text.startsWith(want);
  return text === want;
}

/** `startstack` of /proc/<pid>/stat (field 28): a fresh value after every successful exec. */
function stackStart(pid: number): string | undefined {
  const text = readProcFile(`/proc/${pid}/stat`);
  if (text === undefined) return undefined;
  return text.slice(text.lastIndexOf(")") + 2).split(" ")[25];
}

/**
 * A path as the target sees it, in the daemon's view: through its root and cwd, and with the
 * names that mean "myself" (`/proc/self`, `/proc/thread-self`, `/dev/fd`, `/dev/std*`) bound
 * to the target, not the daemon.
 */
export function inTarget(pid: number, path: string): string {
  if (!path.startsWith("/proc/") && !path.startsWith("/dev/")) {
    return path.startsWith("/") ? `/proc/${pid}/root${path}` : `/proc/${pid}/cwd/${path}`;
  }
  const self = /^\/proc\/(?:self|thread-self)(\/.*)?$/.exec(path);
  if (self) return `/proc/${pid}${self[1] ?? ""}`;
  const fd = /^\/dev\/fd(\/.*)?$/.exec(path);
  if (fd) return `/proc/${pid}/fd${fd[1] ?? ""}`;
  const std = /^\/dev\/std(in|out|err)$/.exec(path);
  if (std) return `/proc/${pid}/fd/${["in", "out", "err"].indexOf(std[1]!)}`;
  if (path.startsWith("/")) return `/proc/${pid}/root${path}`;
  return `/proc/${pid}/cwd/${path}`;
}

const LOADER_PATHS = [
  "/lib64/ld-linux-x86-64.so.2",
  "/lib/ld-linux-aarch64.so.1",
  "/lib/ld-linux.so.2",
  "/lib/ld-linux-armhf.so.3",
  "/lib/ld-musl-x86_64.so.1",
  "/lib/ld-musl-aarch64.so.1",
];
let loaderHashes: Set<string> | undefined;

/**
 * The dynamic loader run as a program: by name (ld-linux*.so*, ld.so, ld64.so*, ld-musl-*) or by
 * content (a copy or link of this system's loader under any name).
 */
function isLoader(path: string, identity: FileIdentity | undefined): boolean {
  if (identity) {
    loaderHashes ??= new Set(
      LOADER_PATHS.map((p) => fileIdentity(p)?.sha256).filter((h): h is string => h !== undefined),
    );
    if (loaderHashes.has(identity.sha256)) return true;
  }
  const base = path.slice(path.lastIndexOf("/") + 1);
  return /^(ld-linux[\w.-]*\.so[\d.]*|ld\.so[\d.]*|ld64\.so[\d.]*|ld-musl-[\w.-]*\.so[\d.]*)$/
    .test(base);
}

/** Options of the loader that take a value (glibc ld.so). */
const LOADER_FLAG_OPTIONS = new Set([
  "--inhibit-cache",
  "--list",
  "--verify",
  "--help",
  "--version",
  "--list-tunables",
  "--list-diagnostics",
]);
const LOADER_VALUE_OPTIONS = new Set([
  "--library-path",
  "--inhibit-rpath",
  "--preload",
  "--audit",
  "--argv0",
  "--glibc-hwcaps-prepend",
  "--glibc-hwcaps-mask",
]);

/** The program a loader invocation runs, and its argv as the program sees it. */
function loadedProgram(argv: readonly string[]): { path: string; argv: string[] } | undefined {
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--") {
      return i + 1 < argv.length ? { path: argv[i + 1]!, argv: argv.slice(i + 1) } : undefined;
    }
    if (LOADER_VALUE_OPTIONS.has(a)) {
      i++;
      continue;
    }
    if (LOADER_FLAG_OPTIONS.has(a)) continue;
    if (a.startsWith("-")) return undefined; // an option we do not know: cannot tell what runs
    return { path: a, argv: argv.slice(i) };
  }
  return undefined;
}
