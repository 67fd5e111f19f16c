/**
 * Fleet runs: one argv on many servers at once, under one daemon-wide limit of concurrent targets.
 * This module owns the remote command line, the per-target exec (output capture, exit, timeout,
 * cancellation, killing what is left on the server) and the output budget of a call. It does not
 * decide whether the run may happen (policy, approval and audit are the caller's: one decision per
 * call, per-target records through `onTargetDone`) and it does not own connections (the caller's
 * pool hands them out through `connect` and takes them back with `release`).
 */
import type { ServerBinding } from "./binding.ts";
import type { ClientChannel, SshClient } from "./ssh2.ts";
import { quoteArgv } from "../shell/mod.ts";
import { type ErrorCode, randomHex, TermadaError, within } from "../shared/mod.ts";

export const FLEET_LIMITS = {
  /** Most servers one call may run on (after duplicates are dropped). */
  targets: 256,
  /** Most targets running at once across every fleet call of the daemon. */
  concurrency: 5,
  /** Most output (UTF-8 bytes, after redaction) one call returns, all targets together. */
  totalOutputBytes: 2 << 20,
  defaultTimeoutMs: 60_000,
  maxTimeoutMs: 600_000,
  /** Longest argv word (UTF-8 bytes). */
  wordBytes: 64 << 10,
  /**
   * Longest remote command line (UTF-8 bytes). sshd hands the line to the login shell as one
   * `-c` argument, and Linux refuses a single argument of 128 KiB or more (MAX_ARG_STRLEN).
   */
  commandLineBytes: 120 << 10,
} as const;

export type FleetStatus = "exited" | "timed_out" | "unreachable" | "failed" | "cancelled";

export interface FleetTargetResult {
  /** The inventory name. */
  server: string;
  status: FleetStatus;
  /** The command's exit status, when it exited normally. */
  exit_code?: number;
  /** The signal that ended the command (`SIGKILL`, …), when the server reported one. */
  signal?: string;
  /** stdout and stderr interleaved in arrival order, redacted, at most the target's share. */
  output: string;
  /** True when `output` is the head of the output only. */
  truncated: boolean;
  /** Bytes the command really wrote (stdout + stderr, before redaction and truncation). */
  output_bytes: number;
  /** From the start of the connect to the end of the command (or of the attempt). */
  duration_ms: number;
  error?: string;
  /** The TermadaError code behind `error` (e.g. `SERVER_UNREACHABLE`, `VAULT_LOCKED`). */
  error_code?: ErrorCode;
}

/** A connection lent by the caller's pool; `release()` gives it back (called exactly once). */
export interface FleetConnection {
  client: SshClient;
  release(): void;
}

export interface FleetOptions {
  /** Targets of this call running at once: 1 up to the limiter's maximum (larger is clamped). */
  concurrency?: number;
  /** Per target, from the start of the connect to the exit (default 60 s, at most 600 s). */
  timeoutMs?: number;
  /**
   * Connects to a server, or throws (a TermadaError SERVER_UNREACHABLE for a host that is down).
   * Should give up when `signal` aborts; a connection that arrives afterwards is released.
   */
  connect(target: ServerBinding, signal: AbortSignal): Promise<FleetConnection>;
  /** Masks secrets; applied to every output before it is kept. */
  redact(text: string): string;
  /** A target got its slot and is connecting. */
  onTargetStart?(server: string): void;
  /**
   * A target is done (also a target cancelled before it started). If this throws (say the
   * audit cannot record), the rest of the call is cancelled and runFleet rejects with that error.
   */
  onTargetDone?(r: FleetTargetResult): void;
  /** Stop all / the client went away: running targets are cancelled, queued ones never start. */
  signal?: AbortSignal;
}

/**
 * One limiter for the daemon: at most `max` fleet targets run at once across all fleet calls.
 * Waiters are served first come, first served.
 */
export class FleetLimiter {
  readonly max: number;
  #running = 0;
  #queue: (() => void)[] = [];

  constructor(max: number = FLEET_LIMITS.concurrency) {
    if (!Number.isInteger(max) || max < 1) {
      throw new RangeError(`Cannot create a fleet limiter for ${max} targets: need an integer ≥ 1`);
    }
    this.max = max;
  }

  /** Waits for a slot; the returned function gives it back (calling it again does nothing). */
  acquire(signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.#running < this.max && this.#queue.length === 0) {
      this.#running++;
      return Promise.resolve(this.#releaser());
    }
    return new Promise((resolve, reject) => {
      const grant = () => {
        signal?.removeEventListener("abort", onAbort);
        this.#running++;
        resolve(this.#releaser());
      };
      const onAbort = () => {
        const i = this.#queue.indexOf(grant);
        if (i >= 0) this.#queue.splice(i, 1);
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#queue.push(grant);
    });
  }

  get running(): number {
    return this.#running;
  }

  get waiting(): number {
    return this.#queue.length;
  }

  #releaser(): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.#running--;
      while (this.#running < this.max) {
        const next = this.#queue.shift();
        if (!next) break;
        next();
      }
    };
  }
}

/**
 * Runs `argv` on every target (duplicates by name run once), at most `concurrency` of them at
 * once and never more than the limiter allows. Resolves with one result per distinct target, in
 * the order of `targets`; rejects only for invalid input (INVALID_ARGUMENT, before anything
 * runs) or when a callback throws.
 */
export async function runFleet(
  argv: readonly string[],
  targets: readonly ServerBinding[],
  limiter: FleetLimiter,
  o: FleetOptions,
): Promise<FleetTargetResult[]> {
  // The pid line carries a secret of this call: output printed before it (a login script the
  // agent wrote) cannot pose as it and make a timeout kill another process group.
  const mark = `${PID_MARK}${randomHex(8)}:`;
  const line = remoteLine(argv, mark);
  const unique = distinctTargets(targets);
  const timeoutMs = checkTimeout(o.timeoutMs);
  const concurrency = checkConcurrency(o.concurrency, limiter.max);
  const n = unique.length;
  if (n === 0) return [];

  const budget = new OutputBudget(FLEET_LIMITS.totalOutputBytes, n);
  const stop = new AbortController();
  const onOuterAbort = () => stop.abort(new Stop("cancelled"));
  if (o.signal?.aborted) onOuterAbort();
  else o.signal?.addEventListener("abort", onOuterAbort, { once: true });

  const results: FleetTargetResult[] = new Array(n);
  let failure: { error: unknown } | undefined;
  const fail = (error: unknown) => {
    failure ??= { error };
    stop.abort(new Stop("cancelled"));
  };
  const report = (i: number, r: FleetTargetResult) => {
    results[i] = r;
    try {
      o.onTargetDone?.(r);
    } catch (e) {
      fail(e);
    }
  };
  const notStarted = (target: ServerBinding): FleetTargetResult => {
    budget.take(0);
    return {
      server: target.name,
      status: "cancelled",
      output: "",
      truncated: false,
      output_bytes: 0,
      duration_ms: 0,
      error: "Cancelled before it started",
    };
  };

  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      const target = unique[i]!;
      let release: () => void;
      try {
        release = await limiter.acquire(stop.signal);
      } catch {
        // Only an abort rejects: the call is being cancelled.
        report(i, notStarted(target));
        continue;
      }
      try {
        if (stop.signal.aborted) {
          report(i, notStarted(target));
          continue;
        }
        try {
          o.onTargetStart?.(target.name);
        } catch (e) {
          fail(e);
          report(i, notStarted(target));
          continue;
        }
        report(i, await runTarget(target, line, mark, timeoutMs, budget, o, stop.signal));
      } finally {
        release();
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker));
  } finally {
    o.signal?.removeEventListener("abort", onOuterAbort);
  }
  if (failure) throw failure.error;
  return results;
}

/**
 * The argv as one line a POSIX shell reads back word for word: every word quoted, and the first
 * one never read as a reserved word or an assignment. Throws INVALID_ARGUMENT for argv that
 * cannot be carried exactly.
 */
export function fleetCommandLine(argv: readonly string[]): string {
  if (argv.length === 0) throw badCommand("Cannot run on the fleet: the command is empty");
  const words = argv.map((w, i) => {
    if (typeof w !== "string") {
      throw badCommand(`Cannot run on the fleet: word ${i + 1} is not text`);
    }
    if (w.includes("\0")) {
      throw badCommand(
        `Cannot run on the fleet: word ${i + 1} of the command holds a NUL character`,
      );
    }
    if (!w.isWellFormed()) {
      throw badCommand(
        `Cannot run on the fleet: word ${i + 1} of the command is not valid Unicode`,
      );
    }
    if (utf8Length(w) > FLEET_LIMITS.wordBytes) {
      const most = FLEET_LIMITS.wordBytes;
      throw badCommand(
        `Cannot run on the fleet: word ${i + 1} of the command is over ${most} bytes`,
      );
    }
    return w;
  });
  return quoteArgv(words, { posix: true });
}

// ---------------------------------------------------------------------------------------------

/** Bytes of output a target may keep beyond its share so a secret across the cut is masked. */
const REDACT_OVERREAD = 8 << 10;
/** Each target may keep at least this much when the budget allows (more targets: less). */
const MIN_TARGET_SHARE = 64 << 10;
/** How long cleanup (the remote kill, the channel close) may take before we stop waiting. */
const CLEANUP_MS = 5_000;
/**
 * Printed by the remote shell before the command so a timeout can kill the command's whole
 * process group (sshd makes the shell a session leader). The `signal` channel request alone is
 * not enough: OpenSSH refuses it for root logins and older servers ignore it.
 */
const PID_MARK = "termada-fleet-pid-";
/** Stdout held while looking for the pid line (login scripts may print before it). */
const MAX_PREAMBLE_BYTES = 64 << 10;

function remoteLine(argv: readonly string[], mark: string): string {
  // The command's stdin is /dev/null (a fleet command gets no input, and a prompt must not wait
  // for the timeout); the channel stays open so a `signal` request can still be sent.
  const line = `echo ${mark}$$; ${fleetCommandLine(argv)} </dev/null`;
  if (utf8Length(line) > FLEET_LIMITS.commandLineBytes) {
    throw badCommand(
      `Cannot run on the fleet: the command line is longer than ${FLEET_LIMITS.commandLineBytes} bytes`,
      "Copy long input to the servers as a file and pass its path",
    );
  }
  return line;
}

function badCommand(message: string, hint?: string): TermadaError {
  return new TermadaError("INVALID_ARGUMENT", message, { hint, details: { key: "command" } });
}

function distinctTargets(targets: readonly ServerBinding[]): ServerBinding[] {
  const seen = new Map<string, ServerBinding>();
  for (const t of targets) {
    const had = seen.get(t.name);
    if (!had) seen.set(t.name, t);
    else if (had.host !== t.host || had.port !== t.port || had.user !== t.user) {
      throw new RangeError(`Server "${t.name}" is listed twice with different settings`);
    }
  }
  if (seen.size > FLEET_LIMITS.targets) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      `Cannot run on the fleet: ${seen.size} servers matched, at most ${FLEET_LIMITS.targets} may`,
      { hint: "Narrow the servers or tags", details: { key: "servers" } },
    );
  }
  return [...seen.values()];
}

function checkTimeout(ms: number | undefined): number {
  if (ms === undefined) return FLEET_LIMITS.defaultTimeoutMs;
  if (!Number.isInteger(ms) || ms < 1 || ms > FLEET_LIMITS.maxTimeoutMs) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      `Cannot run on the fleet: timeout_ms must be an integer from 1 to ${FLEET_LIMITS.maxTimeoutMs}, not ${ms}`,
      { details: { key: "timeout_ms" } },
    );
  }
  return ms;
}

function checkConcurrency(c: number | undefined, max: number): number {
  if (c === undefined) return max;
  if (!Number.isInteger(c) || c < 1) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      `Cannot run on the fleet: concurrency must be an integer ≥ 1, not ${c}`,
      { details: { key: "concurrency" } },
    );
  }
  return Math.min(c, max);
}

/**
 * The call's output budget, split fairly: every target is sure of `total / n` bytes, and may keep
 * more (up to max(64 KiB, total / n)) out of what targets that finished with less left over,
 * shared among the targets still to finish. The sum never exceeds `total`.
 */
class OutputBudget {
  readonly cap: number;
  readonly #total: number;
  readonly #share: number;
  #used = 0;
  #pending: number;

  constructor(total: number, n: number) {
    this.#total = total;
    this.#share = Math.floor(total / n);
    this.cap = Math.min(total, Math.max(MIN_TARGET_SHARE, this.#share));
    this.#pending = n;
  }

  /** Bytes a finishing target keeps out of the `want` it has; called once per target. */
  take(want: number): number {
    // Invariant: used + share × pending ≤ total, so every later target still gets its share.
    const free = this.#total - this.#used - this.#share * this.#pending;
    const allowed = Math.min(this.cap, this.#share + Math.floor(free / this.#pending));
    const keep = Math.min(want, allowed);
    this.#used += keep;
    this.#pending--;
    return keep;
  }
}

/** Why a target's own controller aborted. */
class Stop extends Error {
  constructor(readonly status: "timed_out" | "cancelled") {
    super(status);
  }
}

interface Outcome {
  status: FleetStatus;
  exit_code?: number;
  signal?: string;
  error?: string;
  error_code?: ErrorCode;
}

interface ExitInfo {
  code?: number;
  signal?: string;
}

async function runTarget(
  target: ServerBinding,
  line: string,
  mark: string,
  timeoutMs: number,
  budget: OutputBudget,
  o: FleetOptions,
  stop: AbortSignal,
): Promise<FleetTargetResult> {
  const started = performance.now();
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new Stop("timed_out")), timeoutMs);
  const onStop = () => ac.abort(new Stop("cancelled"));
  if (stop.aborted) onStop();
  else stop.addEventListener("abort", onStop, { once: true });
  const capture = new Capture(budget.cap + REDACT_OVERREAD, mark);
  let outcome: Outcome;
  try {
    let conn: FleetConnection | undefined;
    try {
      conn = await abortable(o.connect(target, ac.signal), ac.signal, (late) => late.release());
    } catch (e) {
      outcome = ac.signal.aborted
        ? stopped(ac.signal.reason, timeoutMs, {}, "while connecting")
        : { status: "unreachable", ...errorFields(e) };
    }
    if (conn) {
      try {
        outcome = await execOn(conn.client, line, capture, ac.signal, timeoutMs);
      } catch (e) {
        outcome = { status: "failed", ...errorFields(e) };
      } finally {
        conn.release();
      }
    }
  } finally {
    clearTimeout(timer);
    stop.removeEventListener("abort", onStop);
  }
  return finish(target.name, outcome!, capture, budget, o.redact, performance.now() - started);
}

function stopped(reason: unknown, timeoutMs: number, exit: ExitInfo, when?: string): Outcome {
  const status = reason instanceof Stop ? reason.status : "cancelled";
  const tail = when ? ` ${when}` : "";
  const error = status === "timed_out"
    ? `Timed out after ${timeoutMs} ms${tail}`
    : `Cancelled${tail}`;
  return { status, ...exitFields(exit), error };
}

function exitFields(exit: ExitInfo): { exit_code?: number; signal?: string } {
  return {
    ...(exit.code === undefined ? {} : { exit_code: exit.code }),
    ...(exit.signal === undefined ? {} : { signal: exit.signal }),
  };
}

function errorFields(e: unknown): { error: string; error_code?: ErrorCode } {
  if (e instanceof TermadaError) return { error: e.message, error_code: e.code };
  return { error: e instanceof Error ? e.message : String(e) };
}

/** `p`, or a rejection with the abort reason; a value that arrives too late goes to `late`. */
function abortable<T>(p: Promise<T>, signal: AbortSignal, late: (v: T) => void): Promise<T> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      p.then(late, () => {/* nobody waits for it any more */});
      reject(signal.reason);
    };
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}

/** An exec channel that opened: its listeners went on before anything could be missed. */
interface OpenRun {
  channel: ClientChannel;
  exit: ExitInfo;
  /** Resolves when the channel closed (all output has arrived by then). */
  closed: Promise<void>;
  error(): string | undefined;
}

/** Opens an exec channel and listens to it at once (ssh2 may emit exit and close right away). */
function openExec(client: SshClient, line: string, capture: Capture): Promise<OpenRun> {
  return new Promise((resolve, reject) => {
    try {
      client.exec(line, { pty: false }, (err, channel) => {
        if (err) return reject(err);
        const exit: ExitInfo = {};
        let error: string | undefined;
        channel.on("data", (b: Uint8Array) => capture.stdout(b));
        channel.stderr.on("data", (b: Uint8Array) => capture.stderr(b));
        channel.on("exit", (code: number | null, sig?: string) => {
          if (typeof code === "number") exit.code = code;
          else if (sig) exit.signal = sig;
        });
        channel.on("error", (e: Error) => error ??= e.message);
        channel.stderr.on("error", (e: Error) => error ??= e.message);
        const closed = new Promise<void>((done) => channel.once("close", () => done()));
        resolve({ channel, exit, closed, error: () => error });
      });
    } catch (e) {
      // ssh2 throws synchronously when the connection is already gone.
      reject(e);
    }
  });
}

async function execOn(
  client: SshClient,
  line: string,
  capture: Capture,
  signal: AbortSignal,
  timeoutMs: number,
): Promise<Outcome> {
  let run: OpenRun;
  try {
    run = await abortable(openExec(client, line, capture), signal, (late) => late.channel.close());
  } catch (e) {
    if (signal.aborted) return stopped(signal.reason, timeoutMs, {}, "before the command started");
    throw e;
  }
  try {
    await abortable(run.closed, signal, () => {});
  } catch {
    // Only an abort rejects: the timeout or a cancel. Kill what runs, then close the channel.
    // A slow login (rc files) may not have printed the pid line yet: without it only the
    // `signal` request is left, which OpenSSH refuses for root. So wait for it (bounded), or
    // for the command to end by itself.
    if (capture.pid === undefined) {
      await within(Promise.race([capture.pidKnown, run.closed]), CLEANUP_MS);
    }
    await killRemote(client, run.channel, capture.pid);
    await within(run.closed, CLEANUP_MS);
    capture.end();
    return stopped(signal.reason, timeoutMs, run.exit, "while the command ran");
  }
  capture.end();
  if (run.exit.code === undefined && run.exit.signal === undefined) {
    return {
      status: "failed",
      error: run.error() ?? "The connection closed before the command reported its exit",
    };
  }
  return { status: "exited", ...exitFields(run.exit) };
}

/** Best effort: the `signal` request, then a kill of the process group, then the close. */
async function killRemote(client: SshClient, channel: ClientChannel, pid?: number): Promise<void> {
  try {
    channel.signal("KILL");
  } catch {
    // Best effort: the channel may be closing already.
  }
  if (pid !== undefined) {
    await within(
      quietExec(client, `kill -s KILL -- -${pid} 2>/dev/null || kill -s KILL ${pid} 2>/dev/null`),
      CLEANUP_MS,
    );
  }
  channel.close();
}

/** Runs a line and waits for its channel to close; never rejects. */
function quietExec(client: SshClient, line: string): Promise<void> {
  return new Promise((resolve) => {
    try {
      client.exec(line, { pty: false }, (err, ch) => {
        if (err) return resolve();
        ch.on("data", () => {});
        ch.stderr.on("data", () => {});
        ch.on("error", () => {});
        ch.on("close", () => resolve());
      });
    } catch {
      // The connection is gone: nothing left to kill through it.
      resolve();
    }
  });
}

/**
 * A target's raw output: stdout and stderr in arrival order, the head kept up to `limit` bytes,
 * every byte counted. The pid line the remote shell prints first is taken out of stdout.
 */
class Capture {
  readonly limit: number;
  total = 0;
  pid: number | undefined;
  #chunks: Uint8Array[] = [];
  #kept = 0;
  #preamble: Uint8Array | undefined = new Uint8Array(0);

  readonly #mark: Uint8Array;

  constructor(limit: number, mark: string) {
    this.limit = limit;
    this.#mark = new TextEncoder().encode(mark);
  }

  stdout(b: Uint8Array): void {
    if (this.#preamble === undefined) return this.#add(b);
    const pre = new Uint8Array(this.#preamble.length + b.length);
    pre.set(this.#preamble);
    pre.set(b, this.#preamble.length);
    const at = indexOf(pre, this.#mark);
    const nl = at < 0 ? -1 : pre.indexOf(0x0a, at + this.#mark.length);
    if (nl < 0) {
      this.#preamble = pre;
      if (pre.length > MAX_PREAMBLE_BYTES) this.end();
      return;
    }
    this.#preamble = undefined;
    const digits = latin1.decode(pre.subarray(at + this.#mark.length, nl));
    // Never 1 (or 0): `kill -- -1` would reach every process of the user.
    if (/^[1-9][0-9]{0,9}$/.test(digits) && Number(digits) > 1) this.pid = Number(digits);
    this.#pid.resolve();
    if (at > 0) this.#add(pre.subarray(0, at));
    if (nl + 1 < pre.length) this.#add(pre.subarray(nl + 1));
  }

  stderr(b: Uint8Array): void {
    this.#add(b);
  }

  /** The stream is over: stdout held back looking for the pid line is output after all. */
  end(): void {
    const pre = this.#preamble;
    this.#preamble = undefined;
    if (pre && pre.length > 0) this.#add(pre);
    this.#pid.resolve();
  }

  readonly #pid = Promise.withResolvers<void>();
  /** Resolves once the pid line was read (or the stream ended without one). */
  get pidKnown(): Promise<void> {
    return this.#pid.promise;
  }

  /** The kept head, and whether bytes beyond it were dropped. */
  head(): { bytes: Uint8Array; cut: boolean } {
    const bytes = new Uint8Array(this.#kept);
    let at = 0;
    for (const c of this.#chunks) {
      bytes.set(c, at);
      at += c.length;
    }
    return { bytes, cut: this.total > this.#kept };
  }

  #add(b: Uint8Array): void {
    this.total += b.length;
    const room = this.limit - this.#kept;
    if (room <= 0 || b.length === 0) return;
    // A copy: ssh2 may reuse the buffer it handed out.
    const part = new Uint8Array(b.subarray(0, Math.min(room, b.length)));
    this.#chunks.push(part);
    this.#kept += part.length;
  }
}

const latin1 = new TextDecoder("latin1");
const encoder = new TextEncoder();

function indexOf(hay: Uint8Array, needle: Uint8Array): number {
  const first = needle[0]!;
  for (
    let i = hay.indexOf(first);
    i >= 0 && i + needle.length <= hay.length;
    i = hay.indexOf(first, i + 1)
  ) {
    let k = 1;
    while (k < needle.length && hay[i + k] === needle[k]) k++;
    if (k === needle.length) return i;
  }
  return -1;
}

function finish(
  server: string,
  outcome: Outcome,
  capture: Capture,
  budget: OutputBudget,
  redact: (text: string) => string,
  durationMs: number,
): FleetTargetResult {
  const { bytes, cut } = capture.head();
  // A cut head may end inside a character: stream mode holds those bytes back, and they are
  // dropped with the rest of the cut.
  const text = new TextDecoder().decode(bytes, { stream: cut });
  let redacted: string;
  try {
    redacted = redact(text);
  } catch (e) {
    budget.take(0);
    return {
      server,
      ...outcome,
      status: "failed",
      output: "",
      truncated: capture.total > 0,
      output_bytes: capture.total,
      duration_ms: Math.round(durationMs),
      error: `Cannot redact the output: ${e instanceof Error ? e.message : String(e)}`,
    };
  }
  const size = utf8Length(redacted);
  // When the head was cut, its last REDACT_OVERREAD bytes may end in part of a secret the
  // redactor could not recognise: they are never kept.
  const keep = budget.take(cut ? Math.max(0, size - REDACT_OVERREAD) : size);
  const output = keep >= size ? redacted : utf8Head(redacted, keep);
  return {
    server,
    status: outcome.status,
    ...(outcome.exit_code === undefined ? {} : { exit_code: outcome.exit_code }),
    ...(outcome.signal === undefined ? {} : { signal: outcome.signal }),
    output,
    truncated: cut || keep < size,
    output_bytes: capture.total,
    duration_ms: Math.round(durationMs),
    ...(outcome.error === undefined ? {} : { error: outcome.error }),
    ...(outcome.error_code === undefined ? {} : { error_code: outcome.error_code }),
  };
}

/** UTF-8 length of a string (a lone surrogate counts as U+FFFD, as TextEncoder writes it). */
function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c < 0xdc00 && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d < 0xe000) {
        n += 4;
        i++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}

/** The longest head of `s` of at most `bytes` UTF-8 bytes that ends on a character boundary. */
function utf8Head(s: string, bytes: number): string {
  const { read } = encoder.encodeInto(s, new Uint8Array(bytes));
  return s.slice(0, read);
}
