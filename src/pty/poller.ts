/**
 * One I/O poller for every PTY in the process.
 *
 * Deno's blocking pool has 32 threads and every pending `nonblocking` FFI call holds one, so a
 * blocked `read()` per session deadlocks at ~30 sessions. Instead a single `poll()` runs on the
 * pool over every registered fd (PTY masters, child pidfds) plus a wake pipe; when it returns,
 * handlers run on the main thread and do non-blocking reads/writes and `waitpid(WNOHANG)`.
 *
 * The poller owns the closing of registered fds: `unregister(fd, {close: true})` defers the
 * `close()` until the pending `poll()` has returned, so a fd number is never reused while the
 * kernel may still be waiting on it. The loop runs only while something is registered, so an
 * idle process holds no pending call and can exit; `stop()` ends it on shutdown.
 */
import { check, LINUX, sys } from "../../ffi/mod.ts";
import { logger } from "../shared/mod.ts";

const log = logger("pty");

/** What a registered fd wants to hear about. */
export interface PollHandler {
  /** Called on the main thread with the `revents` bits after `poll()` returned. */
  ready(revents: number): void;
}

interface Registration {
  fd: number;
  handler: PollHandler;
  events: number;
  paused: boolean;
}

const POLLFD_SIZE = 8; // struct pollfd { int fd; short events; short revents; }

export class Poller {
  #regs = new Map<number, Registration>();
  #toClose: number[] = [];
  #wakeRead = -1;
  #wakeWrite = -1;
  #loop: Promise<void> | undefined;
  #stopping = false;
  #wakeByte = new Uint8Array(1);
  #drainBuf = new Uint8Array(64);
  /** Number of poll() calls made; exposed for tests and benchmarks. */
  cycles = 0;

  /** Starts watching `fd` (POLLIN). Throws if it is already registered. */
  register(fd: number, handler: PollHandler, events: number = LINUX.POLLIN): void {
    if (this.#regs.has(fd)) throw new RangeError(`fd ${fd} is already registered`);
    this.#regs.set(fd, { fd, handler, events, paused: false });
    this.#kick();
  }

  /** Changes the interest set of a registered fd (e.g. add POLLOUT while a write is queued). */
  setEvents(fd: number, events: number): void {
    const reg = this.#regs.get(fd);
    if (!reg || reg.events === events) return;
    reg.events = events;
    this.#kick();
  }

  /** Pauses/resumes interest in a fd (backpressure: a slow reader stops the reads). */
  setPaused(fd: number, paused: boolean): void {
    const reg = this.#regs.get(fd);
    if (!reg || reg.paused === paused) return;
    reg.paused = paused;
    this.#kick();
  }

  /** Stops watching `fd`; with `close`, the poller closes it once no poll() can still see it. */
  unregister(fd: number, options: { close?: boolean } = {}): void {
    const had = this.#regs.delete(fd);
    if (options.close) {
      if (this.#loop) this.#toClose.push(fd);
      else sys().close(fd);
    }
    if (had) this.#kick();
  }

  get size(): number {
    return this.#regs.size;
  }

  /** Ends the loop (shutdown). Registered fds stay registered; a later register restarts it. */
  async stop(): Promise<void> {
    if (!this.#loop) return;
    this.#stopping = true;
    this.#wake();
    await this.#loop;
  }

  #kick(): void {
    if (this.#loop) {
      this.#wake();
      return;
    }
    if (this.#regs.size === 0) return;
    this.#ensureWakePipe();
    this.#stopping = false;
    this.#loop = this.#run().finally(() => {
      this.#loop = undefined;
      this.#flushCloses();
      this.#closeWakePipe();
      // A registration that arrived while the loop was winding down restarts it.
      if (!this.#stopping && this.#regs.size > 0) this.#kick();
    });
  }

  #ensureWakePipe(): void {
    if (this.#wakeRead >= 0) return;
    const fds = new Int32Array(2);
    check(sys().pipe2(fds, LINUX.O_CLOEXEC | LINUX.O_NONBLOCK), "pipe2");
    this.#wakeRead = fds[0]!;
    this.#wakeWrite = fds[1]!;
  }

  #closeWakePipe(): void {
    if (this.#wakeRead < 0) return;
    sys().close(this.#wakeRead);
    sys().close(this.#wakeWrite);
    this.#wakeRead = this.#wakeWrite = -1;
  }

  #wake(): void {
    // EAGAIN means the pipe already holds a wake-up byte: nothing to do.
    if (this.#wakeWrite >= 0) sys().write(this.#wakeWrite, this.#wakeByte, 1n);
  }

  #flushCloses(): void {
    for (const fd of this.#toClose) sys().close(fd);
    this.#toClose.length = 0;
  }

  async #run(): Promise<void> {
    const libc = sys();
    let buf = new Uint8Array(POLLFD_SIZE * 16);
    let view = new DataView(buf.buffer);
    const order: Registration[] = [];
    while (!this.#stopping && this.#regs.size > 0) {
      // Build the pollfd array: wake pipe first, then every active registration.
      order.length = 0;
      for (const reg of this.#regs.values()) if (!reg.paused) order.push(reg);
      const n = order.length + 1;
      if (buf.length < n * POLLFD_SIZE) {
        buf = new Uint8Array(n * POLLFD_SIZE * 2);
        view = new DataView(buf.buffer);
      }
      view.setInt32(0, this.#wakeRead, true);
      view.setInt16(4, LINUX.POLLIN, true);
      view.setInt16(6, 0, true);
      for (let i = 0; i < order.length; i++) {
        const off = (i + 1) * POLLFD_SIZE;
        view.setInt32(off, order[i]!.fd, true);
        view.setInt16(off + 4, order[i]!.events, true);
        view.setInt16(off + 6, 0, true);
      }
      this.cycles++;
      const rc = await libc.poll(buf, BigInt(n), -1);
      // fds unregistered while we waited can be closed now: no poll() refers to them any more.
      this.#flushCloses();
      if (rc < 0) continue; // EINTR (errno is not readable from the worker thread; retry)
      if (view.getInt16(6, true) !== 0) {
        while (
          Number(libc.read(this.#wakeRead, this.#drainBuf, BigInt(this.#drainBuf.length))) > 0
        ) {
          // drain every queued wake-up byte
        }
      }
      for (let i = 0; i < order.length; i++) {
        const revents = view.getInt16((i + 1) * POLLFD_SIZE + 6, true);
        if (revents === 0) continue;
        const reg = order[i]!;
        // Skip handlers unregistered by an earlier handler in this same round.
        if (this.#regs.get(reg.fd) !== reg) continue;
        try {
          reg.handler.ready(revents);
        } catch (err) {
          // A handler bug must not kill I/O for every other session; drop that fd.
          this.#regs.delete(reg.fd);
          log.error("poll handler failed; fd dropped", { fd: reg.fd, error: err });
        }
      }
    }
  }
}

let shared: Poller | undefined;

/** The process-wide poller used by every Pty unless one is injected. */
export function sharedPoller(): Poller {
  return shared ??= new Poller();
}
