/**
 * A child process on its own pseudo-terminal, spawned with posix_spawn (never fork from JS).
 *
 * The child gets a new session (POSIX_SPAWN_SETSID), default signal dispositions (Deno ignores
 * SIGPIPE; children must not inherit that), an empty signal mask, and the slave opened as fd 0
 * without O_NOCTTY so it becomes the controlling terminal, duplicated to 1 and 2. The master is
 * O_CLOEXEC and O_NONBLOCK and read by the shared Poller; exit is observed through a pidfd.
 *
 * Ownership: the Pty owns its master fd, its pidfd and the child; `close()` (idempotent) tears
 * all of them down, including grandchildren that left the process group.
 */
import {
  check,
  checkRc,
  cstr,
  cstrArray,
  decodeCString,
  errno,
  LINUX,
  SIGNALS,
  sys,
  SysError,
} from "../../ffi/mod.ts";
import { type Poller, sharedPoller } from "./poller.ts";
import { descendantsOf, pidsInSession, procStat } from "./procfs.ts";

export type SignalName = keyof typeof SIGNALS;

export interface PtySpawnOptions {
  /** Program and arguments; argv[0] is looked up in PATH of `env` (posix_spawnp). */
  argv: readonly string[];
  cwd?: string;
  /** The complete environment of the child (not merged with Deno's). */
  env?: Record<string, string>;
  cols?: number;
  rows?: number;
  poller?: Poller;
  /** Bytes buffered for a reader that is not keeping up before reads pause (default 1 MiB). */
  highWaterMark?: number;
  /** A fd of ours the child gets as its fd 3 (the launcher's control socket). */
  control?: number;
}

export interface ExitStatus {
  /** Exit code when the process exited normally. */
  code: number | null;
  /** Signal name (or number as a string) when it was killed by a signal. */
  signal: string | null;
}

const READ_CHUNK = 65536;
/** Cap of reads per fd per poll round, so one flooding PTY cannot starve the others. */
const READS_PER_ROUND = 64;
/** Bound on input queued for a child that is not reading (bytes). */
export const MAX_QUEUED_INPUT = 1 << 20;

const readBuf = new Uint8Array(READ_CHUNK);

function signalNumber(sig: SignalName | number): number {
  if (typeof sig === "number") return sig;
  const n = SIGNALS[sig];
  if (n === undefined) throw new RangeError(`Unknown signal "${sig}"`);
  return n;
}

function signalName(n: number): string {
  for (const [name, value] of Object.entries(SIGNALS)) if (value === n) return name;
  return String(n);
}

function clampSize(n: number | undefined, fallback: number): number {
  if (n === undefined) return fallback;
  if (!Number.isInteger(n) || n < 1 || n > 4096) throw new RangeError(`Bad terminal size ${n}`);
  return n;
}

/** Pids of the children a Pty waits for (an orphan reaper must leave them alone). */
const ownPids = new Set<number>();

export class Pty implements AsyncDisposable {
  /** True while a Pty of this process waits for `pid`. */
  static owns(pid: number): boolean {
    return ownPids.has(pid);
  }

  readonly pid: number;
  #ttyPath: string;
  #master: number;
  #pidfd: number;
  #poller: Poller;
  #cols: number;
  #rows: number;
  #sink: ((chunk: Uint8Array) => void) | undefined;
  #endSinks: (() => void)[] = [];
  #early: Uint8Array[] = [];
  #earlyBytes = 0;
  #highWater: number;
  #stream: ReadableStream<Uint8Array> | undefined;
  #outputEnded = false;
  #writeQueue: { data: Uint8Array; resolve: () => void; reject: (e: Error) => void }[] = [];
  #queuedBytes = 0;
  #exit: ExitStatus | undefined;
  #exited: PromiseWithResolvers<ExitStatus> = Promise.withResolvers();
  #outputDone: PromiseWithResolvers<void> = Promise.withResolvers();
  #closing: Promise<ExitStatus> | undefined;
  #masterOpen = true;

  private constructor(
    pid: number,
    master: number,
    pidfd: number,
    ttyPath: string,
    opts: PtySpawnOptions,
  ) {
    this.pid = pid;
    this.#ttyPath = ttyPath;
    this.#master = master;
    this.#pidfd = pidfd;
    this.#poller = opts.poller ?? sharedPoller();
    this.#cols = opts.cols ?? 80;
    this.#rows = opts.rows ?? 24;
    this.#highWater = opts.highWaterMark ?? 1 << 20;
    this.#poller.register(master, { ready: (r) => this.#onMaster(r) });
    this.#poller.register(pidfd, { ready: () => this.#onExit() });
    ownPids.add(pid);
  }

  /** Spawns `argv` on a fresh PTY. Spawn errors (missing program, bad cwd) throw SysError. */
  static spawn(options: PtySpawnOptions): Pty {
    const libc = sys();
    if (options.argv.length === 0) throw new TypeError("argv is empty");
    const cols = clampSize(options.cols, 80);
    const rows = clampSize(options.rows, 24);
    const argv = cstrArray(options.argv, "argv");
    const envEntries = Object.entries(options.env ?? Deno.env.toObject()).map(([k, v]) => {
      if (k.includes("=") || k === "") throw new TypeError(`Bad environment name "${k}"`);
      return `${k}=${v}`;
    });
    const envp = cstrArray(envEntries, "env");
    const file = cstr(options.argv[0]!, "argv[0]");
    const cwd = options.cwd === undefined ? undefined : cstr(options.cwd, "cwd");

    const master = check(
      libc.posix_openpt(LINUX.O_RDWR | LINUX.O_NOCTTY | LINUX.O_CLOEXEC),
      "posix_openpt",
    );
    const attr = new Uint8Array(LINUX.SIZEOF_SPAWNATTR);
    const actions = new Uint8Array(LINUX.SIZEOF_FILE_ACTIONS);
    let attrInit = false;
    let actionsInit = false;
    let pidfd = -1;
    try {
      check(libc.grantpt(master), "grantpt");
      check(libc.unlockpt(master), "unlockpt");
      const nameBuf = new Uint8Array(128);
      checkRc(libc.ptsname_r(master, nameBuf, BigInt(nameBuf.length)), "ptsname_r");
      const ttyPath = decodeCString(nameBuf);
      const slavePath = cstr(ttyPath);
      setWinsize(master, cols, rows);
      const flags = check(libc.fcntl(master, LINUX.F_GETFL, 0), "fcntl");
      check(libc.fcntl(master, LINUX.F_SETFL, flags | LINUX.O_NONBLOCK), "fcntl");

      checkRc(libc.posix_spawnattr_init(attr), "posix_spawnattr_init");
      attrInit = true;
      const empty = new Uint8Array(LINUX.SIZEOF_SIGSET);
      const full = new Uint8Array(LINUX.SIZEOF_SIGSET);
      libc.sigemptyset(empty);
      libc.sigfillset(full);
      checkRc(
        libc.posix_spawnattr_setflags(
          attr,
          LINUX.POSIX_SPAWN_SETSID | LINUX.POSIX_SPAWN_SETSIGMASK | LINUX.POSIX_SPAWN_SETSIGDEF,
        ),
        "posix_spawnattr_setflags",
      );
      checkRc(libc.posix_spawnattr_setsigmask(attr, empty), "posix_spawnattr_setsigmask");
      checkRc(libc.posix_spawnattr_setsigdefault(attr, full), "posix_spawnattr_setsigdefault");

      checkRc(libc.posix_spawn_file_actions_init(actions), "posix_spawn_file_actions_init");
      actionsInit = true;
      // Opened without O_NOCTTY after setsid: the slave becomes the controlling terminal.
      checkRc(
        libc.posix_spawn_file_actions_addopen(actions, 0, slavePath, LINUX.O_RDWR, 0),
        "posix_spawn_file_actions_addopen",
      );
      checkRc(libc.posix_spawn_file_actions_adddup2(actions, 0, 1), "adddup2");
      checkRc(libc.posix_spawn_file_actions_adddup2(actions, 0, 2), "adddup2");
      if (cwd) checkRc(libc.posix_spawn_file_actions_addchdir_np(actions, cwd), "addchdir_np");
      if (options.control !== undefined) {
        checkRc(libc.posix_spawn_file_actions_adddup2(actions, options.control, 3), "adddup2");
      }

      const pidBuf = new Int32Array(1);
      checkRc(
        libc.posix_spawnp(pidBuf, file, actions, attr, argv.ptrs, envp.ptrs),
        `posix_spawnp "${options.argv[0]}"`,
      );
      const pid = pidBuf[0]!;
      pidfd = libc.pidfd_open(pid, 0);
      if (pidfd < 0) {
        const e = errno();
        libc.kill(pid, SIGNALS.KILL);
        libc.waitpid(pid, new Int32Array(1), 0);
        throw new SysError("pidfd_open", e);
      }
      // Keep the marshalled strings alive until here.
      void argv.keep;
      void envp.keep;
      return new Pty(pid, master, pidfd, ttyPath, { ...options, cols, rows });
    } catch (err) {
      libc.close(master);
      throw err;
    } finally {
      if (attrInit) libc.posix_spawnattr_destroy(attr);
      if (actionsInit) libc.posix_spawn_file_actions_destroy(actions);
    }
  }

  /**
   * Path of the slave side as the child sees it, e.g. `/dev/pts/3` (after {@link adoptMaster},
   * the name in the session's own devpts instance).
   */
  get ttyPath(): string {
    return this.#ttyPath;
  }

  /**
   * Switches to another terminal the child made its own (a private devpts instance: the
   * launcher opened it, made it the controlling terminal and fds 0–2, and we took its master
   * with pidfd_getfd). The old master is closed; output already read from it stays in order
   * before the new one's. Takes ownership of `fd` (closed on failure too). Call before the
   * output has a consumer and before any input is written.
   */
  adoptMaster(fd: number, ttyPath: string): void {
    const libc = sys();
    try {
      if (!this.#masterOpen || this.#outputEnded) throw new Error("the terminal is closed");
      const flags = check(libc.fcntl(fd, LINUX.F_GETFL, 0), "fcntl");
      check(libc.fcntl(fd, LINUX.F_SETFL, flags | LINUX.O_NONBLOCK), "fcntl");
      setWinsize(fd, this.#cols, this.#rows);
    } catch (err) {
      libc.close(fd);
      throw err;
    }
    const paused = !this.#sink && this.#earlyBytes >= this.#highWater;
    this.#poller.unregister(this.#master, { close: true });
    this.#master = fd;
    this.#ttyPath = ttyPath;
    this.#poller.register(fd, { ready: (r) => this.#onMaster(r) });
    if (paused) this.#poller.setPaused(fd, true);
    this.#flushWrites();
  }

  get cols(): number {
    return this.#cols;
  }
  get rows(): number {
    return this.#rows;
  }

  /**
   * Sets the one consumer of output chunks (the engine's fast path). Chunks are fresh copies
   * owned by the callee. `onEnd` fires once when the slave side is gone (EIO).
   */
  setSink(onData: (chunk: Uint8Array) => void, onEnd?: () => void): void {
    if (this.#sink || this.#stream) throw new Error("Pty output already has a consumer");
    this.#sink = onData;
    if (onEnd) this.#endSinks.push(onEnd);
    for (const c of this.#early) onData(c);
    this.#early = [];
    this.#earlyBytes = 0;
    this.#poller.setPaused(this.#master, false);
    if (this.#outputEnded) this.#fireEnd();
  }

  /** Output as a byte stream with backpressure (a slow reader pauses reads from the PTY). */
  get readable(): ReadableStream<Uint8Array> {
    if (this.#stream) return this.#stream;
    if (this.#sink) throw new Error("Pty output already has a consumer");
    let controller!: ReadableStreamDefaultController<Uint8Array>;
    this.#stream = new ReadableStream<Uint8Array>({
      start: (c) => {
        controller = c;
      },
      pull: () => {
        if (this.#masterOpen && !this.#outputEnded) this.#poller.setPaused(this.#master, false);
      },
      cancel: () => {
        this.#sink = () => {};
      },
    }, new ByteLengthQueuingStrategy({ highWaterMark: this.#highWater }));
    const sink = (chunk: Uint8Array) => {
      controller.enqueue(chunk);
      if ((controller.desiredSize ?? 0) <= 0) this.#poller.setPaused(this.#master, true);
    };
    this.#endSinks.push(() => {
      try {
        controller.close();
      } catch {
        // already closed or cancelled by the reader
      }
    });
    this.#sink = sink;
    for (const c of this.#early) sink(c);
    this.#early = [];
    if (this.#outputEnded) this.#fireEnd();
    return this.#stream;
  }

  /** Resolves when the child exits (not necessarily when all output was read). */
  get exited(): Promise<ExitStatus> {
    return this.#exited.promise;
  }

  /** Resolves when the output stream ended (slave closed by every process, or Pty closed). */
  get outputEnded(): Promise<void> {
    return this.#outputDone.promise;
  }

  get exitStatus(): ExitStatus | undefined {
    return this.#exit;
  }

  /** Queues bytes for the child's terminal input; resolves once the kernel took them all. */
  write(data: Uint8Array | string): Promise<void> {
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    if (!this.#masterOpen || this.#outputEnded) {
      return Promise.reject(new Error(`Cannot write to pty of pid ${this.pid}: it is closed`));
    }
    if (this.#queuedBytes + bytes.length > MAX_QUEUED_INPUT) {
      return Promise.reject(
        new RangeError(`Input queue of pid ${this.pid} is full (${MAX_QUEUED_INPUT} bytes)`),
      );
    }
    if (bytes.length === 0) return Promise.resolve();
    const { promise, resolve, reject } = Promise.withResolvers<void>();
    this.#writeQueue.push({ data: bytes, resolve, reject });
    this.#queuedBytes += bytes.length;
    this.#flushWrites();
    return promise;
  }

  /** Sets the terminal size (TIOCSWINSZ); the kernel sends SIGWINCH to the foreground group. */
  resize(cols: number, rows: number): void {
    cols = clampSize(cols, 80);
    rows = clampSize(rows, 24);
    if (!this.#masterOpen) return;
    setWinsize(this.#master, cols, rows);
    this.#cols = cols;
    this.#rows = rows;
  }

  /** Process group currently in the foreground of the terminal (tcgetpgrp on the master). */
  foregroundPgid(): number | undefined {
    if (!this.#masterOpen) return undefined;
    const pg = sys().tcgetpgrp(this.#master);
    return pg > 0 ? pg : undefined;
  }

  /** Reads the terminal's local mode flags: whether it echoes and is in canonical mode. */
  termMode(): { echo: boolean; canonical: boolean } | undefined {
    if (!this.#masterOpen) return undefined;
    const t = new Uint8Array(LINUX.SIZEOF_TERMIOS);
    if (sys().tcgetattr(this.#master, t) !== 0) return undefined;
    const lflag = new DataView(t.buffer).getUint32(LINUX.TERMIOS_LFLAG_OFFSET, true);
    return { echo: (lflag & LINUX.ECHO) !== 0, canonical: (lflag & LINUX.ICANON) !== 0 };
  }

  /**
   * Sends a signal: to the foreground process group (what Ctrl-C would reach), the child
   * alone, or the child's whole process group. Returns false if nobody was there.
   */
  signal(
    sig: SignalName | number,
    target: "foreground" | "child" | "group" = "foreground",
  ): boolean {
    if (this.#exit && target !== "foreground") return false;
    const n = signalNumber(sig);
    const libc = sys();
    if (target === "child") return libc.kill(this.pid, n) === 0;
    if (target === "group") return libc.kill(-this.pid, n) === 0;
    const pg = this.foregroundPgid();
    if (pg === undefined) return false;
    return libc.kill(-pg, n) === 0;
  }

  /**
   * Ends everything: hang up the terminal (SIGHUP to the foreground group and the child), close
   * the master, and after `graceMs` SIGKILL the child and every process that descended from it
   * (including ones that called setsid). Idempotent; resolves with the exit status.
   */
  close(options: { graceMs?: number } = {}): Promise<ExitStatus> {
    return this.#closing ??= this.#teardown(options.graceMs ?? 500);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #teardown(graceMs: number): Promise<ExitStatus> {
    const libc = sys();
    const tree = this.#exit ? [] : snapshotTree(this.pid);
    if (!this.#exit) {
      const pg = this.foregroundPgid();
      if (pg !== undefined && pg !== this.pid) libc.kill(-pg, SIGNALS.HUP);
      libc.kill(this.pid, SIGNALS.HUP);
      libc.kill(this.pid, SIGNALS.CONT);
    }
    this.#closeMaster();
    if (!this.#exit && !(await this.#waitExit(graceMs))) {
      libc.kill(-this.pid, SIGNALS.KILL);
      libc.kill(this.pid, SIGNALS.KILL);
      await this.#waitExit(5000);
    }
    // Sweep the rest of the tree: anything that escaped the group or the hangup, and anything
    // still in the terminal's session (a job started just as we closed, orphaned to init).
    killTree(tree, "KILL");
    for (const p of pidsInSession(this.pid)) libc.kill(p, SIGNALS.KILL);
    if (!this.#exit) {
      // The child ignores even SIGKILL (stuck in the kernel): stop watching, report it.
      this.#poller.unregister(this.#pidfd, { close: true });
      this.#exit = { code: null, signal: "UNREAPED" };
      this.#exited.resolve(this.#exit);
    }
    return this.#exit;
  }

  #waitExit(ms: number): Promise<boolean> {
    if (this.#exit) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), ms);
      this.#exited.promise.then(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  #closeMaster(): void {
    if (!this.#masterOpen) return;
    this.#masterOpen = false;
    this.#poller.unregister(this.#master, { close: true });
    const err = new Error(`Pty of pid ${this.pid} closed before input was written`);
    for (const w of this.#writeQueue) w.reject(err);
    this.#writeQueue = [];
    this.#queuedBytes = 0;
    this.#endOutput();
  }

  #endOutput(): void {
    if (this.#outputEnded) return;
    this.#outputEnded = true;
    if (this.#sink) this.#fireEnd();
    this.#outputDone.resolve();
  }

  #fireEnd(): void {
    const sinks = this.#endSinks;
    this.#endSinks = [];
    for (const f of sinks) f();
  }

  #deliver(chunk: Uint8Array): void {
    if (this.#sink) {
      this.#sink(chunk);
      return;
    }
    // No consumer yet: hold a bounded amount, then stop reading (the kernel buffers the rest).
    this.#early.push(chunk);
    this.#earlyBytes += chunk.length;
    if (this.#earlyBytes >= this.#highWater) this.#poller.setPaused(this.#master, true);
  }

  #onMaster(revents: number): void {
    const libc = sys();
    if (revents & LINUX.POLLOUT) this.#flushWrites();
    if (!(revents & (LINUX.POLLIN | LINUX.POLLHUP | LINUX.POLLERR))) return;
    // A pty hands out at most ~4 KiB per read: keep reading until EAGAIN (bounded), gathering
    // into one chunk, because another poll() round trip costs far more than a read.
    let filled = 0;
    for (let i = 0; i < READS_PER_ROUND && this.#masterOpen; i++) {
      const n = Number(
        libc.read(this.#master, readBuf.subarray(filled), BigInt(READ_CHUNK - filled)),
      );
      if (n > 0) {
        filled += n;
        if (filled === READ_CHUNK) {
          this.#deliver(readBuf.slice(0, filled));
          filled = 0;
        }
        continue;
      }
      const e = n < 0 ? errno() : LINUX.EIO;
      if (e === LINUX.EAGAIN || e === LINUX.EINTR) break;
      // EIO: every slave fd is closed. That is the end of the stream, not an error.
      if (filled > 0) this.#deliver(readBuf.slice(0, filled));
      filled = 0;
      this.#poller.unregister(this.#master);
      this.#endOutput();
      break;
    }
    if (filled > 0) this.#deliver(readBuf.slice(0, filled));
  }

  #onExit(): void {
    const status = new Int32Array(1);
    const rc = sys().waitpid(this.pid, status, LINUX.WNOHANG);
    if (rc === 0) return; // spurious
    this.#poller.unregister(this.#pidfd, { close: true });
    ownPids.delete(this.pid);
    const s = status[0]!;
    const termSig = s & 0x7f;
    this.#exit = rc < 0
      ? { code: null, signal: null }
      : termSig === 0
      ? { code: (s >> 8) & 0xff, signal: null }
      : { code: null, signal: signalName(termSig) };
    this.#exited.resolve(this.#exit);
  }

  #flushWrites(): void {
    const libc = sys();
    while (this.#writeQueue.length > 0 && this.#masterOpen) {
      const w = this.#writeQueue[0]!;
      const n = Number(libc.write(this.#master, w.data, BigInt(w.data.length)));
      if (n < 0) {
        const e = errno();
        if (e === LINUX.EAGAIN || e === LINUX.EINTR) {
          this.#poller.setEvents(this.#master, LINUX.POLLIN | LINUX.POLLOUT);
          return;
        }
        this.#writeQueue.shift();
        this.#queuedBytes -= w.data.length;
        w.reject(new SysError("write", e));
        continue;
      }
      this.#queuedBytes -= n;
      if (n === w.data.length) {
        this.#writeQueue.shift();
        w.resolve();
      } else {
        w.data = w.data.subarray(n);
      }
    }
    if (this.#masterOpen) this.#poller.setEvents(this.#master, LINUX.POLLIN);
  }
}

function setWinsize(fd: number, cols: number, rows: number): void {
  const ws = new Uint16Array([rows, cols, 0, 0]);
  check(sys().ioctl(fd, BigInt(LINUX.TIOCSWINSZ), new Uint8Array(ws.buffer)), "ioctl(TIOCSWINSZ)");
}

/** A process captured for teardown: pid, start time (pid-reuse guard; survives exec) and group. */
export interface TreeProcess {
  pid: number;
  comm: string;
  pgrp: number;
  startTime: number;
}

/** The descendants of `pid`, captured before teardown changes their parentage. */
export function snapshotTree(pid: number): TreeProcess[] {
  const out: TreeProcess[] = [];
  for (const p of descendantsOf(pid)) {
    const st = procStat(p);
    if (st) out.push({ pid: p, comm: st.comm, pgrp: st.pgrp, startTime: st.startTime });
  }
  return out;
}

/**
 * Sends `sig` to every listed process that is still the same process (same pid and start time:
 * a process that exec'd since the snapshot still counts; a reused pid does not).
 */
export function killTree(tree: readonly TreeProcess[], sig: SignalName): void {
  const n = signalNumber(sig);
  for (const p of tree) {
    const st = procStat(p.pid);
    if (st && st.startTime === p.startTime && st.state !== "Z") sys().kill(p.pid, n);
  }
}

/** Sends `sig` to a whole process group; false when the group no longer exists. */
export function signalGroup(pgid: number, sig: SignalName): boolean {
  if (!Number.isInteger(pgid) || pgid <= 1) throw new RangeError(`Bad process group ${pgid}`);
  return sys().kill(-pgid, signalNumber(sig)) === 0;
}

/** Signal numbers by name (Linux). */
export const SIGNAL_NUMBERS: Readonly<Record<string, number>> = SIGNALS;
