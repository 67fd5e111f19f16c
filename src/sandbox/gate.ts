/**
 * The exec gate, daemon side: every `execve`/`execveat` of every process of every session
 * arrives here as a seccomp notification, on the shared Poller (one `poll()` for all fds, no
 * thread per process). For each it reads what really runs from the target — the path and argv
 * from its memory (`/proc/<pid>/mem`), the file resolved through the target's own root and cwd
 * (or the fd for `execveat`/`fexecve`), the file's identity and, for a script, its `#!`
 * interpreter — re-checks that the notification is still live (the pid cannot have been
 * reused), asks the decider, and lets the call continue or fails it with EACCES.
 *
 * A decider may answer later (a person approves): the target simply stays blocked in `execve`,
 * killable, until then. Bounds: 64 notifications handled per listener per poll round, paths of
 * 4096 bytes, argv of 4096 strings / 256 KiB in all (what is cut is flagged `truncated`).
 */
import { LINUX, syscalls } from "../../ffi/mod.ts";
import { cstr, errno, type Poller, sharedPoller, sys } from "../pty/mod.ts";
import { logger } from "../shared/mod.ts";
import { type FileIdentity, fileIdentity, shebang } from "./identity.ts";
import { Listener, type Notification } from "./seccomp.ts";

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
  /** For a `#!` script: the interpreter the kernel will run, with its identity. */
  interpreter?: { path: string; arg?: string; identity: FileIdentity | undefined };
  /** The first exec of this listener (the launcher starting the session's program). */
  first: boolean;
}

export type ExecAnswer = { allow: true } | { allow: false; errno?: number };

export type ExecDecider<C> = (ev: ExecEvent, ctx: C) => ExecAnswer | Promise<ExecAnswer>;

export interface GateStats {
  decisions: number;
  allowed: number;
  denied: number;
  /** Microseconds from notification read to answer, synchronous decisions only (last 4096). */
  p50Us: number;
  p99Us: number;
}

const SAMPLES = 4096;

class Attached<C> {
  readonly listener: Listener;
  readonly ctx: C;
  first = true;
  trustFirst = false;
  closed = false;
  pending = 0;
  constructor(fd: number, ctx: C) {
    this.listener = new Listener(fd);
    this.ctx = ctx;
  }
}

export class ExecGate<C> {
  readonly #decide: ExecDecider<C>;
  readonly #poller: Poller;
  readonly #attached = new Map<number, Attached<C>>();
  #samples = new Float64Array(SAMPLES);
  #sampleCount = 0;
  #decisions = 0;
  #allowed = 0;
  #denied = 0;

  constructor(decide: ExecDecider<C>, poller: Poller = sharedPoller()) {
    this.#decide = decide;
    this.#poller = poller;
  }

  /** Starts answering the notifications of one listener fd (the gate owns and closes it). */
  attach(fd: number, ctx: C, opts: { trustFirst?: boolean } = {}): { close(): void } {
    const a = new Attached(fd, ctx);
    a.trustFirst = opts.trustFirst ?? false;
    this.#attached.set(fd, a);
    this.#poller.register(fd, { ready: (r) => this.#ready(a, r) });
    return { close: () => this.#detach(a) };
  }

  get size(): number {
    return this.#attached.size;
  }

  stats(): GateStats {
    const n = Math.min(this.#sampleCount, SAMPLES);
    const sorted = Array.from(this.#samples.subarray(0, n)).sort((a, b) => a - b);
    const q = (p: number) => n === 0 ? 0 : sorted[Math.min(n - 1, Math.floor(p * n))]!;
    return {
      decisions: this.#decisions,
      allowed: this.#allowed,
      denied: this.#denied,
      p50Us: Math.round(q(0.5) * 1000 * 10) / 10,
      p99Us: Math.round(q(0.99) * 1000 * 10) / 10,
    };
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
    // Every process of the filter is gone: nothing can notify any more.
    if (revents & LINUX.POLLHUP && a.pending === 0) this.#detach(a);
  }

  #handle(a: Attached<C>, n: Notification): void {
    const t0 = performance.now();
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
        a.pending--;
        if (!a.closed) this.#answer(a, n, ans, undefined);
      });
      return;
    }
    this.#answer(a, n, answer, t0);
  }

  #answer(a: Attached<C>, n: Notification, ans: ExecAnswer, t0: number | undefined): void {
    if (ans.allow) {
      a.listener.allow(n.id);
      this.#allowed++;
    } else {
      a.listener.deny(n.id, ans.errno ?? LINUX.EACCES);
      this.#denied++;
    }
    this.#decisions++;
    if (t0 !== undefined) this.#samples[this.#sampleCount++ % SAMPLES] = performance.now() - t0;
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
const decoder = new TextDecoder();

/** Reads a NUL-terminated string at `addr` in the target (at most `max` bytes). */
function readString(fd: number, addr: bigint, max: number): { s: string; cut: boolean } {
  const parts: Uint8Array[] = [];
  let total = 0;
  let a = addr;
  while (total < max) {
    // Never cross a page in one read: the next page may be unmapped.
    const pageLeft = 4096 - Number(a & 4095n);
    const want = Math.min(pageLeft, max - total, memBuf.length);
    const n = Number(sys().pread(fd, memBuf, BigInt(want), a));
    if (n <= 0) throw new Error(`cannot read target memory at 0x${a.toString(16)}`);
    const nul = memBuf.subarray(0, n).indexOf(0);
    if (nul >= 0) {
      parts.push(memBuf.slice(0, nul));
      total += nul;
      return { s: join(parts, total), cut: false };
    }
    parts.push(memBuf.slice(0, n));
    total += n;
    a += BigInt(n);
  }
  return { s: join(parts, total), cut: true };
}

function join(parts: Uint8Array[], total: number): string {
  if (parts.length === 1) return decoder.decode(parts[0]);
  const all = new Uint8Array(total);
  let o = 0;
  for (const p of parts) {
    all.set(p, o);
    o += p.length;
  }
  return decoder.decode(all);
}

function readArgv(fd: number, addr: bigint): { argv: string[]; truncated: boolean } {
  const argv: string[] = [];
  let bytes = 0;
  let a = addr;
  if (a === 0n) return { argv, truncated: false };
  for (;;) {
    const n = Number(sys().pread(fd, ptrBuf, BigInt(ptrBuf.length), a));
    if (n < 8) throw new Error("cannot read argv");
    const v = new DataView(ptrBuf.buffer, 0, n - (n % 8));
    for (let off = 0; off < v.byteLength; off += 8) {
      const p = v.getBigUint64(off, true);
      if (p === 0n) return { argv, truncated: false };
      if (argv.length >= GATE_LIMITS.argvStrings || bytes >= GATE_LIMITS.argvBytes) {
        return { argv, truncated: true };
      }
      const { s, cut } = readString(fd, p, GATE_LIMITS.argvBytes - bytes);
      argv.push(s);
      bytes += s.length + 1;
      if (cut) return { argv, truncated: true };
    }
    a += BigInt(v.byteLength);
  }
}

/** Reads and resolves what a notified execve/execveat will run. */
export function readExec(n: Notification, first: boolean): ExecEvent {
  const sc = syscalls()!;
  const libc = sys();
  const mem = libc.open(cstr(`/proc/${n.pid}/mem`), LINUX.O_RDONLY | LINUX.O_CLOEXEC, 0);
  if (mem < 0) throw new Error(`cannot open memory of pid ${n.pid} (errno ${errno()})`);
  try {
    const isAt = n.nr === sc.execveat;
    const dirfd = isAt ? Number(BigInt.asIntN(32, n.args[0]!)) : AT_FDCWD;
    const pathAddr = isAt ? n.args[1]! : n.args[0]!;
    const argvAddr = isAt ? n.args[2]! : n.args[1]!;
    const flags = isAt ? Number(n.args[4]! & 0xffffffffn) : 0;
    const { s: path, cut } = pathAddr === 0n
      ? { s: "", cut: false }
      : readString(mem, pathAddr, GATE_LIMITS.pathBytes);
    if (cut) throw new Error("exec path too long");
    const { argv, truncated } = readArgv(mem, argvAddr);
    let resolved: string;
    if (path === "" && (flags & AT_EMPTY_PATH) && dirfd >= 0) {
      resolved = `/proc/${n.pid}/fd/${dirfd}`;
    } else if (path.startsWith("/")) resolved = `/proc/${n.pid}/root${path}`;
    else if (dirfd === AT_FDCWD) resolved = `/proc/${n.pid}/cwd/${path}`;
    else resolved = `/proc/${n.pid}/fd/${dirfd}/${path}`;
    const identity = fileIdentity(resolved);
    const ev: ExecEvent = { pid: n.pid, path, resolved, argv, truncated, identity, first };
    const bang = identity ? shebang(identity.head) : undefined;
    if (bang) {
      const ipath = bang.interpreter.startsWith("/")
        ? `/proc/${n.pid}/root${bang.interpreter}`
        : `/proc/${n.pid}/cwd/${bang.interpreter}`;
      ev.interpreter = {
        path: bang.interpreter,
        ...(bang.arg ? { arg: bang.arg } : {}),
        identity: fileIdentity(ipath),
      };
    }
    return ev;
  } finally {
    libc.close(mem);
  }
}
