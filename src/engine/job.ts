/**
 * One command's life: status machine, cleaned output behind a cursor, and change notification
 * for waiters. A Job does not own a process; its Session (or one-shot runner) feeds it bytes
 * and tells it how it ended.
 */
import {
  ALL_FLAGS,
  CursorBuffer,
  HAS_ANCHOR,
  MAX_LINE_HEAD,
  type Page,
  Redactor,
  type Summary,
  VtCleaner,
} from "../output/mod.ts";
import { type Clock, concatBytes } from "../shared/mod.ts";
import { FINAL_JOB_STATUSES, type JobStatus } from "../wire/mod.ts";

export type { JobStatus };

/** Statuses after which a job never changes (from the wire contract's one list). */
export const FINAL_STATUSES: ReadonlySet<JobStatus> = new Set(FINAL_JOB_STATUSES);

/** Read side of a job's output: the live cursor buffer, or a spool on disk after a restart. */
/**
 * The processes a job led to (its cgroup, or what started in its session while it ran) and how
 * to end them all: set when it starts, kept after it ends (children it left running are still
 * its own).
 */
export interface JobProcesses {
  list(): { pid: number; startTime: number }[];
  end(graceMs: number): Promise<{ survivors: Survivor[] }>;
  /**
   * It is being stopped from now on: what starts meanwhile (a trap's `setsid …`) is its own too.
   * end() says so as well; a stop that signals the job first says it before.
   */
  stopping?(): void;
  /**
   * The job left memory (the registry dropped it): what it holds in the kernel (a one-shot's
   * cgroup) goes, unless processes it left still run there (they stay until shutdown ends them).
   */
  release?(): void;
}

export interface Survivor {
  pid: number;
  comm: string;
  state: string;
  reason: string;
}

/** Most blocked execs a job remembers (the newest). */
export const MAX_BLOCKED = 8;

export interface BlockedExec {
  program: string;
  path: string;
  argv: string[];
  rule?: string;
  reason: string;
}

export interface OutputReader {
  read(cursor?: string, maxBytes?: number): Page;
  summary(headLimit: number, tailLimit: number): Summary;
  readonly totalBytes: number;
  readonly startOffset: number;
}

/** A job as persisted: what is needed to show it again after a restart. */
export interface JobRecord {
  id: string;
  owner: string;
  sessionId: string;
  command: readonly string[];
  mode: "foreground" | "background";
  status: JobStatus;
  exitCode?: number;
  signal?: string;
  reason?: string;
  cwd?: string;
  startedAt: number;
  endedAt?: number;
}

/** Most bytes an operator's pause holds back from the agent (then it gives way). */
const HOLD_LIMIT = 8 * 1024 * 1024;
const EMPTY = new Uint8Array(0);
const LF = 0x0a;

/** `a` then `b` (no copy when one is empty). */
const concat = (a: Uint8Array, b: Uint8Array): Uint8Array =>
  a.length === 0 ? b : b.length === 0 ? a : concatBytes([a, b]);

export interface JobOutputOptions {
  retentionBytes: number;
  headBytes: number;
}

export class Job {
  readonly id: string;
  readonly owner: string;
  readonly sessionId: string;
  readonly command: readonly string[];
  readonly mode: "foreground" | "background";
  readonly startedAt: number;
  /** Wall time the job ended (ms since the epoch), once final. */
  endedAt: number | undefined;
  readonly #clock: Clock;
  readonly #startedMono: number;
  #endedMono: number | undefined;
  status: JobStatus = "running";
  exitCode: number | undefined;
  signal: string | undefined;
  /** Why the job ended the way it did (e.g. "session closed", "shell exited"). */
  reason: string | undefined;
  cwd: string | undefined;
  /** The cwd the caller asked this one command to run in (exec_run `cwd`), if any. */
  requestedCwd: string | undefined;
  prompt: string | undefined;
  /** How awaiting_input was decided: "kernel" (exact) or "heuristic". */
  inputSource: "kernel" | "heuristic" | undefined;
  /** Command name of the process waiting for input (bash, python3, ssh…), when known. */
  inputReader: string | undefined;
  /**
   * The reading process runs what it reads (a shell or interpreter, by name or by the content
   * of its executable, src/engine/readers.ts): a line typed to it is a command for the policy.
   */
  inputReaderRunsCommands = false;
  /** True while a standing answer is being typed (waiters do not report that prompt). */
  autoAnswering = false;
  /** Set while the job waits for an operator's decision. */
  approvalId: string | undefined;
  /** Programs the exec gate stopped (bounded: the last MAX_BLOCKED). */
  blocked: BlockedExec[] = [];
  /** Its processes (see JobProcesses); undefined until it started. */
  processes: JobProcesses | undefined;
  /**
   * An operator approved this job's command (the static confirm): the exec gate does not ask
   * again for programs its confirm rules match (its deny rules still apply).
   */
  approved = false;
  /**
   * Where its exit status comes from: `kernel` — waitpid of the process the daemon spawned (a
   * one-shot argv job; the session's shell itself exiting); `shell` — the end marker the
   * session's shell printed (a job's own output could imitate it: not evidence).
   */
  exitSource: "kernel" | "shell" | undefined;
  /** What a kill could not end (empty after a kill that left nothing). */
  survivors: Survivor[] | undefined;
  /** Set when Termada itself is ending the job (kill/limit): the final status to report. */
  stopping: { status: "killed" | "timed_out"; signal: string } | undefined;
  readonly buffer: OutputReader;
  readonly #live: CursorBuffer | undefined;
  /** Receives every cleaned, redacted byte appended to the output (the on-disk spool). */
  onOutput: ((bytes: Uint8Array) => void) | undefined;
  /**
   * Called when a caller is shown output of this job while it still runs: what was shown must
   * then survive a crash of the daemon (the trail spools it).
   */
  onShown: (() => void) | undefined;
  #archivedDuration: number | undefined;
  #held: Uint8Array[] | undefined;
  #heldBytes = 0;
  /**
   * Dropped by compact() once the job has ended (a finished job takes no more bytes). A line
   * drawn over keeps its secrets masked (the guard).
   */
  #cleaner: VtCleaner | undefined = new VtCleaner({
    guard: (line) => this.#redactor.spansOf(line),
  });
  /** A committed line's tail kept back: it may be the start of a secret (commitPending). */
  #carry: Uint8Array = EMPTY;
  /**
   * The current line's start already handed out (commitPending), unredacted, at most
   * MAX_LINE_HEAD bytes: the rules see it ahead of the line's rest, so a value whose key went
   * out before a pause is still masked.
   */
  #head: Uint8Array = EMPTY;
  readonly #redactor: Redactor;
  #listeners = new Set<() => void>();
  #done = Promise.withResolvers<void>();
  /** Mono time of the last output byte (for idle waits). */
  lastOutputMono: number;

  constructor(init: {
    id: string;
    owner: string;
    sessionId: string;
    command: readonly string[];
    mode: "foreground" | "background";
    clock: Clock;
    redactor: Redactor;
    output: JobOutputOptions;
    cwd?: string;
    /** Present for a job restored from storage: its output comes from `reader`. */
    archive?: { reader: OutputReader; startedAt: number; endedAt?: number };
  }) {
    this.id = init.id;
    this.owner = init.owner;
    this.sessionId = init.sessionId;
    this.command = init.command;
    this.mode = init.mode;
    this.#clock = init.clock;
    this.startedAt = init.archive?.startedAt ?? init.clock.now();
    this.#startedMono = init.clock.mono();
    this.lastOutputMono = this.#startedMono;
    this.cwd = init.cwd;
    this.#redactor = init.redactor;
    if (init.archive) {
      this.#live = undefined;
      this.buffer = init.archive.reader;
      this.#archivedDuration = Math.max(
        0,
        (init.archive.endedAt ?? init.archive.startedAt) - init.archive.startedAt,
      );
    } else {
      this.#live = new CursorBuffer({
        retentionBytes: init.output.retentionBytes,
        headBytes: init.output.headBytes,
      });
      this.buffer = this.#live;
    }
  }

  /** A finished job from before a restart, its output read from `reader`. */
  static archived(record: JobRecord, reader: OutputReader, clock: Clock): Job {
    const job = new Job({
      id: record.id,
      owner: record.owner,
      sessionId: record.sessionId,
      command: record.command,
      mode: record.mode,
      clock,
      redactor: new Redactor(),
      output: { retentionBytes: 1, headBytes: 0 },
      cwd: record.cwd,
      archive: { reader, startedAt: record.startedAt, endedAt: record.endedAt },
    });
    job.status = record.status;
    job.exitCode = record.exitCode;
    job.signal = record.signal;
    job.reason = record.reason;
    job.#done.resolve();
    return job;
  }

  /** Redacts this job's output (shared with its session, so secrets typed there apply). */
  get redactor(): Redactor {
    return this.#redactor;
  }

  get final(): boolean {
    return FINAL_STATUSES.has(this.status);
  }

  get done(): Promise<void> {
    return this.#done.promise;
  }

  get durationMs(): number {
    if (this.#archivedDuration !== undefined) return this.#archivedDuration;
    return Math.round((this.#endedMono ?? this.#clock.mono()) - this.#startedMono);
  }

  /**
   * Raw terminal bytes from the job's output zone, with their scan flags when the caller has them
   * (src/output/scan.ts; the stages then skip what the bytes cannot hold).
   */
  feed(bytes: Uint8Array, flags: number = ALL_FLAGS): void {
    if (this.final) return;
    this.lastOutputMono = this.#clock.mono();
    let clean = this.#cleaner!.push(bytes, flags);
    let carried = 0;
    if (clean.length > 0 && this.#carry.length > 0) {
      carried = this.#carry.length;
      clean = concat(this.#carry, clean);
      this.#carry = EMPTY;
    }
    if (clean.length > 0) {
      // Bytes held from before (the carry, the cleaner's pending line) all come out ahead of the
      // first line end this push makes; after it every byte is from this chunk.
      let anchorFree: number | undefined;
      if ((flags & HAS_ANCHOR) === 0) {
        const lf = clean.indexOf(LF, carried);
        if (lf >= 0) anchorFree = lf + 1;
      }
      const head = this.#head;
      this.#append(
        this.#redactor.redact(clean, anchorFree, head.length > 0 ? { head } : undefined),
      );
      this.#advanceHead(clean);
    }
    if (this.status === "awaiting_input") {
      this.status = "running";
      this.prompt = undefined;
    }
    this.#notify();
  }

  #append(bytes: Uint8Array): void {
    if (this.#held) {
      this.#held.push(bytes);
      this.#heldBytes += bytes.length;
      // Bounded like the buffer itself: beyond it, holding gives way rather than lose bytes.
      if (this.#heldBytes > HOLD_LIMIT) this.releaseOutput();
      return;
    }
    this.#live?.append(bytes);
    this.onOutput?.(bytes);
  }

  /** An operator paused what the agent reads: new output waits until `releaseOutput`. */
  holdOutput(): void {
    if (!this.final) this.#held ??= [];
  }

  releaseOutput(): void {
    const held = this.#held;
    if (!held) return;
    this.#held = undefined;
    this.#heldBytes = 0;
    for (const b of held) {
      this.#live?.append(b);
      this.onOutput?.(b);
    }
    this.#notify();
  }

  /** True while an operator holds this job's output back from the agent. */
  get outputHeld(): boolean {
    return this.#held !== undefined;
  }

  /**
   * The incomplete last line (a prompt, a progress bar), cleaned and redacted — without a tail
   * that may be the start of a secret still being printed.
   */
  pendingText(): string {
    const pending = concat(this.#carry, this.#cleaner?.pending() ?? EMPTY);
    if (pending.length === 0) return "";
    const safe = pending.subarray(0, this.#redactor.safeLength(pending, this.#head));
    const head = this.#head;
    return new TextDecoder().decode(this.#redactor.redact(safe, undefined, { head, peek: true }));
  }

  /** `out` went out: the current line's start is what of it follows its last line end. */
  #advanceHead(out: Uint8Array): void {
    const lf = out.lastIndexOf(LF);
    if (lf === out.length - 1) {
      this.#head = EMPTY;
      return;
    }
    const tail = lf >= 0 ? out.subarray(lf + 1) : concat(this.#head, out);
    this.#head = tail.slice(Math.max(0, tail.length - MAX_LINE_HEAD));
  }

  /**
   * Commits the incomplete last line so readers see it (input awaited, reader idle). A tail
   * that may be the start of a secret (a value printed in two writes with a pause between) is
   * kept back and joined with what follows, so the whole value is masked; at the end
   * (`final`) everything goes.
   */
  commitPending(final = false): void {
    const rest = concat(this.#carry, this.#cleaner?.flush() ?? EMPTY);
    this.#carry = EMPTY;
    if (rest.length > 0) {
      const cut = final ? rest.length : this.#redactor.safeLength(rest, this.#head);
      if (cut < rest.length) this.#carry = rest.slice(cut);
      if (cut > 0) {
        const out = rest.subarray(0, cut);
        const head = this.#head;
        this.#append(this.#redactor.redact(out, undefined, head.length > 0 ? { head } : undefined));
        this.#advanceHead(out);
      }
    }
    if (final) this.#head = EMPTY;
  }

  /**
   * Releases what only a running job needs (the VT cleaner's line state, listeners) so that a
   * finished job kept in memory costs its output bytes and a few hundred bytes more.
   */
  compact(): void {
    if (!this.final) return;
    this.#cleaner = undefined;
    this.#listeners.clear();
  }

  /** Bytes of storage this job holds for its output (memory accounting of finished jobs). */
  get retainedBytes(): number {
    return (this.#live?.allocatedBytes ?? 0) + 512;
  }

  setAwaitingInput(
    prompt: string,
    source: "kernel" | "heuristic",
    reader?: string,
    readsCommands = false,
  ): void {
    if (this.final || this.status !== "running") return;
    this.commitPending();
    this.status = "awaiting_input";
    this.prompt = prompt;
    this.inputSource = source;
    this.inputReader = reader;
    this.inputReaderRunsCommands = readsCommands;
    this.#notify();
  }

  /** Parks the job until an operator decides (policy said confirm). */
  /** The exec gate stopped one of this job's programs. */
  noteBlocked(b: BlockedExec): void {
    this.blocked.push(b);
    if (this.blocked.length > MAX_BLOCKED) this.blocked.shift();
  }

  park(approvalId: string): void {
    if (this.final) return;
    this.status = "pending_approval";
    this.approvalId = approvalId;
    this.#notify();
  }

  /** The operator approved: the job runs now. */
  unpark(): void {
    if (this.status !== "pending_approval") return;
    this.status = "running";
    this.#notify();
  }

  /** Input was written: the program is working again until the detector says otherwise. */
  resumed(): void {
    if (this.status !== "awaiting_input") return;
    this.status = "running";
    this.prompt = undefined;
    this.inputReader = undefined;
    this.inputReaderRunsCommands = false;
    this.#notify();
  }

  /** Ends the job. `exited` becomes `killed`/`timed_out` when Termada was stopping it. */
  finish(
    status: JobStatus,
    details: {
      exitCode?: number;
      signal?: string;
      reason?: string;
      cwd?: string;
      source?: "kernel" | "shell";
    } = {},
  ): void {
    if (this.final) return;
    if (details.source) this.exitSource = details.source;
    this.commitPending(true);
    this.releaseOutput();
    this.#live?.end();
    if (this.stopping && (status === "exited" || status === "killed")) {
      this.status = this.stopping.status;
      this.signal = details.signal ?? this.stopping.signal;
    } else {
      this.status = status;
      this.signal = details.signal;
    }
    this.exitCode = details.exitCode;
    this.reason = details.reason ?? this.reason;
    if (details.cwd !== undefined) this.cwd = details.cwd;
    this.prompt = undefined;
    this.#endedMono = this.#clock.mono();
    this.endedAt = this.#clock.now();
    this.#notify();
    this.#done.resolve();
  }

  /** Subscribes to any change (output, status). Returns the unsubscribe function. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #notify(): void {
    for (const l of [...this.#listeners]) l();
  }
}
