/**
 * One command's life: status machine, cleaned output behind a cursor, and change notification
 * for waiters. A Job does not own a process; its Session (or one-shot runner) feeds it bytes
 * and tells it how it ended.
 */
import { CursorBuffer, Redactor, VtCleaner } from "../output/mod.ts";
import type { Clock } from "../shared/mod.ts";

export type JobStatus =
  | "pending_approval"
  | "running"
  | "awaiting_input"
  | "exited"
  | "killed"
  | "timed_out"
  | "denied"
  | "failed"
  | "orphaned";

export const FINAL_STATUSES: ReadonlySet<JobStatus> = new Set([
  "exited",
  "killed",
  "timed_out",
  "denied",
  "failed",
  "orphaned",
]);

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
  readonly #clock: Clock;
  readonly #startedMono: number;
  #endedMono: number | undefined;
  status: JobStatus = "running";
  exitCode: number | undefined;
  signal: string | undefined;
  /** Why the job ended the way it did (e.g. "session closed", "shell exited"). */
  reason: string | undefined;
  cwd: string | undefined;
  prompt: string | undefined;
  /** How awaiting_input was decided: "kernel" (exact) or "heuristic". */
  inputSource: "kernel" | "heuristic" | undefined;
  /** Set when Termada itself is ending the job (kill/limit): the final status to report. */
  stopping: { status: "killed" | "timed_out"; signal: string } | undefined;
  readonly buffer: CursorBuffer;
  readonly #cleaner = new VtCleaner();
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
  }) {
    this.id = init.id;
    this.owner = init.owner;
    this.sessionId = init.sessionId;
    this.command = init.command;
    this.mode = init.mode;
    this.#clock = init.clock;
    this.startedAt = init.clock.now();
    this.#startedMono = init.clock.mono();
    this.lastOutputMono = this.#startedMono;
    this.cwd = init.cwd;
    this.#redactor = init.redactor;
    this.buffer = new CursorBuffer({
      retentionBytes: init.output.retentionBytes,
      headBytes: init.output.headBytes,
    });
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
    return Math.round((this.#endedMono ?? this.#clock.mono()) - this.#startedMono);
  }

  /** Raw terminal bytes from the job's output zone. */
  feed(bytes: Uint8Array): void {
    if (this.final) return;
    this.lastOutputMono = this.#clock.mono();
    const clean = this.#cleaner.push(bytes);
    if (clean.length > 0) this.buffer.append(this.#redactor.redact(clean));
    if (this.status === "awaiting_input") {
      this.status = "running";
      this.prompt = undefined;
    }
    this.#notify();
  }

  /** The incomplete last line (a prompt, a progress bar), cleaned and redacted. */
  pendingText(): string {
    return new TextDecoder().decode(this.#redactor.redact(this.#cleaner.pending()));
  }

  /** Commits the incomplete last line so readers see it (input awaited, reader idle). */
  commitPending(): void {
    const rest = this.#cleaner.flush();
    if (rest.length > 0) this.buffer.append(this.#redactor.redact(rest));
  }

  setAwaitingInput(prompt: string, source: "kernel" | "heuristic"): void {
    if (this.final || this.status === "awaiting_input") return;
    this.commitPending();
    this.status = "awaiting_input";
    this.prompt = prompt;
    this.inputSource = source;
    this.#notify();
  }

  /** Input was written: the program is working again until the detector says otherwise. */
  resumed(): void {
    if (this.status !== "awaiting_input") return;
    this.status = "running";
    this.prompt = undefined;
    this.#notify();
  }

  /** Ends the job. `exited` becomes `killed`/`timed_out` when Termada was stopping it. */
  finish(
    status: JobStatus,
    details: { exitCode?: number; signal?: string; reason?: string; cwd?: string } = {},
  ): void {
    if (this.final) return;
    this.commitPending();
    this.buffer.end();
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
