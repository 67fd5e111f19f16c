/**
 * Reading a job: the bounded wait of exec_run, exec_poll's long-poll by cursor, exec_wait's
 * conditions, and the result shape (a page of output plus the job's facts). Read-only: nothing
 * here changes a job.
 */
import { decodeCursor, encodeCursor, type Page, type Summary } from "../output/mod.ts";
import { type Clock, within } from "../shared/mod.ts";
import type { ExecPollInput, ExecWaitInput, JobResult } from "../wire/mod.ts";
import type { Job } from "./job.ts";
import { compilePattern, waitForJob } from "./wait.ts";

export interface EngineOutputOptions {
  /** Cleaned output kept per job (older bytes become an explicit gap). */
  retentionBytes: number;
  /** First bytes of each job kept forever (head of a result). */
  headBytes: number;
  /** Head and tail sizes of the output in an exec_run result. */
  resultHeadBytes: number;
  resultTailBytes: number;
  /** Raw bytes per session kept for terminal replay. */
  ringBytes: number;
}

export const DEFAULT_OUTPUT: EngineOutputOptions = {
  retentionBytes: 8 * 1024 * 1024,
  headBytes: 16 * 1024,
  resultHeadBytes: 8 * 1024,
  resultTailBytes: 8 * 1024,
  ringBytes: 256 * 1024,
};

export interface CallOptions {
  /** Progress callback for long waits (MCP progress notifications). */
  onProgress?: (elapsedMs: number, totalMs: number) => void;
  /** Aborts a wait early (client went away); the job is not affected. */
  signal?: AbortSignal;
}

export const DEFAULT_RUN_WAIT_MS = 30_000;
const DEFAULT_WAIT_MS = 30_000;
/** A run/poll hands out an unfinished last line once output has been quiet this long. */
const PARTIAL_LINE_IDLE_MS = 50;

export class JobReader {
  readonly #clock: Clock;
  readonly #output: EngineOutputOptions;

  constructor(clock: Clock, output: EngineOutputOptions) {
    this.#clock = clock;
    this.#output = output;
  }

  /** Waits (bounded) for a just-started job to end or need input; a deadline never kills. */
  async runResult(job: Job, timeoutMs: number, t0: number, call: CallOptions): Promise<JobResult> {
    await waitForJob(job, { exit: true, prompt: true }, {
      timeoutMs: job.status === "pending_approval" ? 0 : timeoutMs,
      fromOffset: 0,
      clock: this.#clock,
      onProgress: call.onProgress,
      signal: call.signal,
    });
    this.#exposePartialLine(job);
    const s = job.buffer.summary(this.#output.resultHeadBytes, this.#output.resultTailBytes);
    return {
      ...this.view(job, s),
      ...(s.tail === undefined ? {} : { tail: s.tail, omitted_bytes: s.omittedBytes }),
      waited_ms: Math.round(this.#clock.mono() - t0),
    };
  }

  async poll(job: Job, req: ExecPollInput, call: CallOptions): Promise<JobResult> {
    const from = req.cursor ?? encodeCursor(0);
    job.buffer.read(from, 1); // validates the cursor before waiting
    const waitMs = req.wait_ms ?? 0;
    const t0 = this.#clock.mono();
    if (waitMs > 0 && !this.#hasNews(job, from)) {
      const news = Promise.withResolvers<void>();
      const off = job.onChange(() => news.resolve());
      const onAbort = () => news.resolve();
      call.signal?.addEventListener("abort", onAbort, { once: true });
      await within(news.promise, waitMs);
      call.signal?.removeEventListener("abort", onAbort);
      off();
    }
    this.#exposePartialLine(job, from);
    return {
      ...this.view(job, job.buffer.read(from, req.max_bytes)),
      waited_ms: Math.round(this.#clock.mono() - t0),
    };
  }

  async wait(job: Job, req: ExecWaitInput, call: CallOptions): Promise<JobResult> {
    const from = req.cursor ?? encodeCursor(0);
    job.buffer.read(from, 1);
    const until = req.until ?? {};
    const none = until.exit === undefined && until.pattern === undefined &&
      until.prompt === undefined && until.idle_ms === undefined;
    const pattern = until.pattern === undefined ? undefined : compilePattern(until.pattern);
    const t0 = this.#clock.mono();
    const r = await waitForJob(job, {
      exit: none ? true : until.exit,
      prompt: until.prompt,
      pattern,
      idleMs: until.idle_ms,
    }, {
      timeoutMs: req.timeout_ms ?? DEFAULT_WAIT_MS,
      fromOffset: decodeCursor(from),
      clock: this.#clock,
      onProgress: call.onProgress,
      signal: call.signal,
    });
    this.#exposePartialLine(job, from);
    return {
      ...this.view(job, job.buffer.read(from, req.max_bytes)),
      waited_ms: Math.round(this.#clock.mono() - t0),
      matched: r.matched,
      ...(r.match === undefined ? {} : { match: r.match }),
    };
  }

  /** The job with the head of its output (kill results, decisions). */
  headResult(job: Job): JobResult {
    return this.view(job, job.buffer.summary(this.#output.resultHeadBytes, 0));
  }

  /**
   * The job's whole cleaned output as one text, at most `maxBytes` (what a parser reads): its
   * pages joined; `dropped` counts the bytes retention already let go of.
   */
  fullText(job: Job, maxBytes: number): { text: string; dropped: number } {
    const parts: string[] = [];
    let cursor = encodeCursor(0);
    let bytes = 0;
    let dropped = 0;
    while (bytes < maxBytes) {
      const page = job.buffer.read(cursor, Math.min(65_536, maxBytes - bytes));
      parts.push(page.output);
      dropped += page.gap?.droppedBytes ?? 0;
      bytes = decodeCursor(page.nextCursor) - dropped;
      if (page.nextCursor === cursor || page.output === "") break;
      cursor = page.nextCursor;
    }
    return { text: parts.join(""), dropped };
  }

  /** A page as the operator's job output view shows it. */
  page(job: Job, cursor: string | undefined, maxBytes: number | undefined): Page {
    this.#exposePartialLine(job, cursor);
    return job.buffer.read(cursor ?? encodeCursor(0), maxBytes);
  }

  view(job: Job, page: Page | Summary): JobResult {
    if (!job.final && page.output !== "") job.onShown?.();
    const v: JobResult = {
      job_id: job.id,
      session_id: job.sessionId,
      command: [...job.command],
      status: job.status,
      output: page.output,
      next_cursor: page.nextCursor,
      has_more: page.hasMore,
      duration_ms: job.durationMs,
    };
    if (job.exitCode !== undefined) v.exit_code = job.exitCode;
    if (job.signal !== undefined) v.signal = job.signal;
    if (job.reason !== undefined) v.reason = job.reason;
    const gap = page.gap;
    if (gap) {
      v.gap = {
        from_offset: gap.fromOffset,
        to_offset: gap.toOffset,
        dropped_bytes: gap.droppedBytes,
      };
    }
    if (job.status === "awaiting_input") {
      v.awaiting_input = true;
      v.prompt = job.prompt ?? "";
      if (job.inputSource) v.input_detection = job.inputSource;
    }
    if (job.cwd !== undefined) v.cwd = job.cwd;
    if (job.status === "pending_approval" && job.approvalId) v.approval_id = job.approvalId;
    if (job.blocked.length > 0) v.blocked = job.blocked.map((b) => ({ ...b, argv: [...b.argv] }));
    if (job.survivors !== undefined) v.survivors = job.survivors.map((s) => ({ ...s }));
    if (job.final && job.processes) {
      const left = job.processes.list();
      if (left.length > 0) v.left_running = left.slice(0, 16).map((p) => p.pid);
    }
    return v;
  }

  #hasNews(job: Job, cursor: string): boolean {
    return job.final || job.status === "awaiting_input" ||
      job.buffer.totalBytes > decodeCursor(cursor) || job.pendingText() !== "";
  }

  /** Commits an unfinished last line when it is all there is to read and output went quiet. */
  #exposePartialLine(job: Job, cursor?: string): void {
    if (job.final) return;
    if (cursor !== undefined && job.buffer.totalBytes > decodeCursor(cursor)) return;
    if (this.#clock.mono() - job.lastOutputMono >= PARTIAL_LINE_IDLE_MS) job.commitPending();
  }
}
