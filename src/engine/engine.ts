/**
 * The command engine: sessions and jobs per owner (an agent identity), quotas, the operations
 * behind the "Commands and jobs" and "Sessions" tools, and retention of finished jobs.
 * Every public method takes the caller's owner id and untrusted input, validates it with the
 * shared schemas, and returns wire-shaped results (snake_case, as TOOLS.md). An owner never
 * sees another owner's sessions or jobs: their ids are NOT_FOUND.
 */
import { join } from "node:path";
import {
  decodeCursor,
  encodeCursor,
  type Page,
  Redactor,
  type ScreenSnapshot,
} from "../output/mod.ts";
import { sharedPoller } from "../pty/mod.ts";
import { argvToScript, scopeScript, type ShellKind } from "../shell/mod.ts";
import {
  type Clock,
  newId,
  notFound,
  systemClock,
  TermadaError,
  toTermadaError,
  within,
} from "../shared/mod.ts";
import { Job, type JobStatus } from "./job.ts";
import { OneShot, waitDone } from "./oneshot.ts";
import {
  ExecKillInput,
  ExecListInput,
  ExecPollInput,
  ExecRunInput,
  ExecSignalInput,
  ExecStartInput,
  ExecWaitInput,
  ExecWriteInput,
  parseInput,
  SessionCreateInput,
  SessionIdInput,
  SessionResizeInput,
} from "./schema.ts";
import { Session } from "./session.ts";
import { compilePattern, type Matched, waitForJob } from "./wait.ts";

export interface EngineLimits {
  /** Live sessions per owner (QUOTA_EXCEEDED beyond). */
  sessionsPerOwner: number;
  /** Live sessions in all. */
  sessionsTotal: number;
  /** Running background (one-shot) jobs per owner. */
  backgroundPerOwner: number;
  /** Finished jobs kept per owner for polling and listing; oldest are forgotten first. */
  finishedJobsPerOwner: number;
  /** Bytes of output kept across all finished jobs; oldest finished jobs are forgotten first. */
  finishedOutputBytes: number;
}

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

/**
 * Persistence and observation hooks (the daemon wires them to SQLite and the output spool).
 * Called synchronously on the engine's thread; they must be cheap and must not throw.
 */
export interface EngineHooks {
  sessionOpened?(info: SessionInfo, owner: string): void;
  sessionUpdated?(id: string, patch: { cwd?: string; cols?: number; rows?: number }): void;
  sessionClosed?(id: string, reason: string): void;
  jobStarted?(job: Job): void;
  /** The job's status changed while it lives (parked for approval, released). */
  jobStatus?(job: Job): void;
  /** Cleaned, redacted output bytes as they are appended. */
  jobOutput?(job: Job, bytes: Uint8Array): void;
  jobEnded?(job: Job): void;
  /** A job that is not in memory (from before a restart, or evicted). */
  findJob?(owner: string, id: string): Job | undefined;
  /** Jobs from storage, newest first (merged with the live ones by id). */
  listJobs?(
    owner: string,
    filter: { active: boolean; startedAfter?: number; limit: number },
  ): JobSummary[];
}

/** What the admission gateway is asked before anything runs. */
export interface AdmissionRequest {
  owner: string;
  jobId: string;
  sessionId: string;
  command: readonly string[];
  mode: "foreground" | "background";
  cwd?: string;
  env?: Record<string, string>;
}

/** A line an agent types into a program that reads commands (a shell, an interpreter). */
export interface InputAdmissionRequest {
  owner: string;
  jobId: string;
  sessionId: string;
  line: string;
  /** Command name of the reading process (bash, python3…). */
  reader: string;
  /** The agent marked it secret (exec_write `secret`): the audit must not keep the text. */
  secret: boolean;
  /**
   * The terminal does not echo (a kernel fact: a password prompt of su, ssh, sudo…): the line
   * is not a command. An agent's `secret` flag alone never skips the policy.
   */
  echoOff: boolean;
}

export type AdmissionVerdict = { verdict: "run" } | { verdict: "confirm"; approvalId: string };

/**
 * The gate every side effect passes (src/control implements it). `admit` throws a TermadaError
 * to refuse (DENIED_BY_POLICY, STOPPED, AUDIT_UNAVAILABLE); `confirm` parks the job until
 * `Engine.resolveApproval`.
 */
export interface AdmissionHook {
  admit(req: AdmissionRequest): AdmissionVerdict | Promise<AdmissionVerdict>;
  admitInput?(req: InputAdmissionRequest): void | Promise<void>;
  /**
   * The operator's standing answer for a prompt (policy `auto_answer`), or undefined. The
   * gate records the answer in the audit log before the engine types it.
   */
  autoAnswer?(
    req: { owner: string; jobId: string; sessionId: string; prompt: string },
  ): string | undefined;
  /**
   * A job parked for approval ended before anyone decided (its session closed, the daemon shut
   * down): the gate closes the approval so nothing stays pending for a job that is gone.
   */
  parkedEnded?(
    req: { approvalId: string; jobId: string; owner: string; sessionId: string; reason: string },
  ): void;
}

/** Most automatic answers typed into one job (a wrong answer must not loop forever). */
const MAX_AUTO_ANSWERS = 16;

/** Programs whose stdin lines are commands: a line typed into them is checked like a command. */
const COMMAND_READERS =
  /^(ba|z|da|k|tc|c|fi|)sh$|^(python[0-9.]*|node|deno|bun|perl|ruby|irb|php|lua[0-9.]*|R|julia|ghci|psql|mysql|sqlite3|redis-cli|mongo(sh)?|ssh|su|sudo|doas)$/;

export interface PendingApproval {
  approval_id: string;
  job_id: string;
  owner: string;
  session_id: string;
  command: string[];
  mode: "foreground" | "background";
  requested_at: string;
}

export interface EngineOptions {
  /** The admission gateway (policy, approvals, audit); without it everything is admitted. */
  admission?: AdmissionHook;
  /** Persistence hooks (see EngineHooks). */
  hooks?: EngineHooks;
  /** Private runtime directory: per-session rc files and staged commands, recordings. */
  runtimeDir: string;
  limits?: Partial<EngineLimits>;
  output?: Partial<EngineOutputOptions>;
  /** Base environment of every shell (default: this process's, minus TERMADA_* variables). */
  env?: Record<string, string>;
  defaultShell?: ShellKind;
  /** Where sessions start when no cwd is given (default: $HOME, else the process cwd). */
  defaultCwd?: string;
  /** Record sessions as asciicast v2 (default true) in `recordingsDir`. */
  record?: boolean;
  /** Where recordings go (default `<runtimeDir>/recordings`). */
  recordingsDir?: string;
  recording?: { maxFileBytes?: number; keepFiles?: number };
  /** Source the user's own ~/.bashrc / ~/.zshrc in sessions (default false: a clean shell). */
  userRc?: boolean;
  /** Extra redaction regexes (config `redaction.patterns`), applied with the built-in ones. */
  redactPatterns?: readonly string[];
  /** Grace between INT, TERM and KILL when a job is killed (default 2000 ms). */
  killGraceMs?: number;
  /** Time a new shell has to show its first prompt (default 10 s). */
  startTimeoutMs?: number;
  clock?: Clock;
}

export const DEFAULT_LIMITS: EngineLimits = {
  sessionsPerOwner: 32,
  sessionsTotal: 256,
  backgroundPerOwner: 16,
  finishedJobsPerOwner: 200,
  finishedOutputBytes: 256 * 1024 * 1024,
};

export const DEFAULT_OUTPUT: EngineOutputOptions = {
  retentionBytes: 8 * 1024 * 1024,
  headBytes: 16 * 1024,
  resultHeadBytes: 8 * 1024,
  resultTailBytes: 8 * 1024,
  ringBytes: 256 * 1024,
};

export interface SessionInfo {
  session_id: string;
  target: string;
  shell: ShellKind;
  cwd: string;
  workspace?: string;
  state: "ready" | "busy" | "operator";
  current_job_id?: string;
  cols: number;
  rows: number;
  created_at: string;
  /** An operator holds back what agents read from this session's job. */
  output_paused?: boolean;
}

export interface JobStart {
  job_id: string;
  session_id: string;
  status: JobStatus;
  mode: "foreground" | "background";
  approval_id?: string;
}

export interface JobView {
  job_id: string;
  session_id: string;
  command: string[];
  status: JobStatus;
  exit_code?: number;
  signal?: string;
  reason?: string;
  output: string;
  tail?: string;
  omitted_bytes?: number;
  next_cursor: string;
  has_more: boolean;
  gap?: { from_offset: number; to_offset: number; dropped_bytes: number };
  awaiting_input?: boolean;
  prompt?: string;
  input_detection?: "kernel" | "heuristic";
  approval_id?: string;
  cwd?: string;
  duration_ms: number;
  waited_ms?: number;
  matched?: Matched;
  match?: string;
}

export interface JobSummary {
  job_id: string;
  session_id: string;
  command: string[];
  mode: "foreground" | "background";
  status: JobStatus;
  exit_code?: number;
  signal?: string;
  started_at: string;
  duration_ms: number;
  cwd?: string;
}

export interface CallOptions {
  /** Progress callback for long waits (MCP progress notifications). */
  onProgress?: (elapsedMs: number, totalMs: number) => void;
  /** Aborts a wait early (client went away); the job is not affected. */
  signal?: AbortSignal;
}

const DEFAULT_RUN_WAIT_MS = 30_000;
const DEFAULT_WAIT_MS = 30_000;
/** A run/poll hands out an unfinished last line once output has been quiet this long. */
const PARTIAL_LINE_IDLE_MS = 50;
const RECENT_MS = 60 * 60 * 1000;

export class Engine {
  readonly limits: EngineLimits;
  readonly output: EngineOutputOptions;
  #opts: EngineOptions;
  #clock: Clock;
  #sessions = new Map<string, Session>();
  #defaults = new Map<string, Promise<Session>>();
  #creating = new Map<string, number>();
  #jobs = new Map<string, Job>();
  #oneshots = new Map<string, OneShot>();
  #jobOrder: Job[] = [];
  #closed = false;
  #env: Record<string, string>;
  #hooks: EngineHooks;
  #redactPatterns: RegExp[];
  #parked = new Map<
    string,
    { job: Job; script?: string; req: ExecStartInput; session?: Session }
  >();

  constructor(options: EngineOptions) {
    this.#opts = options;
    this.#clock = options.clock ?? systemClock;
    this.limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.output = { ...DEFAULT_OUTPUT, ...options.output };
    this.#env = baseEnv(options.env);
    this.#hooks = options.hooks ?? {};
    this.#redactPatterns = (options.redactPatterns ?? []).map((p) => new RegExp(p, "g"));
  }

  // ── sessions ──────────────────────────────────────────────────────────────

  async createSession(owner: string, input: unknown = {}): Promise<SessionInfo> {
    const req = parseInput(SessionCreateInput, input ?? {});
    if (req.target !== undefined && req.target !== "local") {
      throw new TermadaError(
        "NOT_SUPPORTED",
        `Remote target "${req.target}" is not available yet`,
        {
          hint: 'Use target "local" (remote SSH sessions come with server support)',
        },
      );
    }
    const s = await this.#newSession(owner, req);
    return this.#sessionInfo(s);
  }

  listSessions(owner: string): SessionInfo[] {
    return [...this.#sessions.values()]
      .filter((s) => s.owner === owner && s.state !== "closed")
      .map((s) => this.#sessionInfo(s));
  }

  async closeSession(owner: string, input: unknown): Promise<{ ok: true; session_id: string }> {
    const { session_id } = parseInput(SessionIdInput, input);
    const s = this.#ownSession(owner, session_id);
    await s.close("closed by its owner");
    return { ok: true, session_id };
  }

  async screen(owner: string, input: unknown): Promise<ScreenSnapshot & { session_id: string }> {
    const { session_id } = parseInput(SessionIdInput, input);
    const s = this.#ownSession(owner, session_id);
    return { session_id, ...(await s.screen()) };
  }

  resizeSession(owner: string, input: unknown): { ok: true; cols: number; rows: number } {
    const req = parseInput(SessionResizeInput, input);
    const s = this.#ownSession(owner, req.session_id);
    s.resize(req.cols, req.rows);
    this.#hooks.sessionUpdated?.(s.id, { cols: req.cols, rows: req.rows });
    return { ok: true, cols: req.cols, rows: req.rows };
  }

  /** Every open session of every owner (operator views only; agents never reach this). */
  allSessions(): (SessionInfo & { owner: string })[] {
    return [...this.#sessions.values()]
      .filter((s) => s.state !== "closed")
      .map((s) => ({ ...this.#sessionInfo(s), owner: s.owner }));
  }

  /**
   * An operator takes the keyboard of a session (operator only): agents' commands there get
   * SESSION_BUSY with state "operator" until `releaseSession`; a job already running goes on.
   */
  takeover(sessionId: string, operator: string): SessionInfo {
    const s = this.anySession(sessionId);
    assertNotHeldByOther(s, operator);
    s.lease = { operator, since: this.#clock.now() };
    return this.#sessionInfo(s);
  }

  /** Hands the keyboard back to agents. */
  releaseSession(sessionId: string, operator: string): SessionInfo {
    const s = this.anySession(sessionId);
    if (!s.lease) return this.#sessionInfo(s);
    assertNotHeldByOther(s, operator);
    s.lease = undefined;
    if (s.outputPaused) {
      s.outputPaused = false;
      s.job?.releaseOutput();
    }
    return this.#sessionInfo(s);
  }

  /**
   * Pauses what agents read from the session's current job (output waits; released by
   * `resumeOutput`, by releasing the lease, or when the job ends). Only the lease holder.
   */
  pauseOutput(sessionId: string, operator: string): SessionInfo {
    const s = this.#leasedBy(sessionId, operator);
    s.outputPaused = true;
    s.job?.holdOutput();
    return this.#sessionInfo(s);
  }

  resumeOutput(sessionId: string, operator: string): SessionInfo {
    const s = this.#leasedBy(sessionId, operator);
    s.outputPaused = false;
    s.job?.releaseOutput();
    return this.#sessionInfo(s);
  }

  #leasedBy(sessionId: string, operator: string): Session {
    const s = this.anySession(sessionId);
    if (s.lease?.operator !== operator) {
      throw new TermadaError("INVALID_ARGUMENT", `Take over session "${sessionId}" first`);
    }
    return s;
  }

  /** Keys from the operator who holds the session's keyboard, written to its terminal. */
  async operatorInput(sessionId: string, operator: string, text: string): Promise<void> {
    const s = this.anySession(sessionId);
    if (s.lease?.operator !== operator) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Take over session "${sessionId}" before typing into it`,
      );
    }
    if (text.length > 65_536) throw new TermadaError("INVALID_ARGUMENT", "Input over 64 KiB");
    await s.operatorInput(text);
  }

  /** Jobs of every owner, newest first (operator views only). */
  allJobs(limit: number): (JobSummary & { owner: string })[] {
    const out: (JobSummary & { owner: string })[] = [];
    for (let i = this.#jobOrder.length - 1; i >= 0 && out.length < limit; i--) {
      out.push(this.#anySummary(this.#jobOrder[i]!));
    }
    return out;
  }

  /** A session by id whatever its owner (operator views only). */
  anySession(id: string): Session {
    const s = this.#sessions.get(id);
    if (!s || s.state === "closed") throw notFound("session", id);
    return s;
  }

  /** Open sessions in all (every owner): for the operator's views. */
  sessionCount(): number {
    return this.#countSessions();
  }

  /** The session object for trusted in-process callers (dashboard, tests). */
  sessionOf(owner: string, sessionId: string): Session {
    return this.#ownSession(owner, sessionId);
  }

  // ── jobs ──────────────────────────────────────────────────────────────────

  async start(owner: string, input: unknown): Promise<JobStart> {
    const req = parseInput(ExecStartInput, input);
    const job = await this.#launch(owner, req);
    return {
      job_id: job.id,
      session_id: job.sessionId,
      status: job.status,
      mode: job.mode,
      ...(job.approvalId && job.status === "pending_approval"
        ? { approval_id: job.approvalId }
        : {}),
    };
  }

  /** Starts a job and waits (bounded) for it to end or need input. A deadline never kills. */
  async run(owner: string, input: unknown, call: CallOptions = {}): Promise<JobView> {
    const req = parseInput(ExecRunInput, input);
    const t0 = this.#clock.mono();
    const job = await this.#launch(owner, req);
    const timeoutMs = job.status === "pending_approval" ? 0 : req.timeout_ms ?? DEFAULT_RUN_WAIT_MS;
    await waitForJob(job, { exit: true, prompt: true }, {
      timeoutMs,
      fromOffset: 0,
      clock: this.#clock,
      onProgress: call.onProgress,
      signal: call.signal,
    });
    this.#exposePartialLine(job);
    const s = job.buffer.summary(this.output.resultHeadBytes, this.output.resultTailBytes);
    return {
      ...this.#view(job, s),
      ...(s.tail === undefined ? {} : { tail: s.tail, omitted_bytes: s.omittedBytes }),
      waited_ms: Math.round(this.#clock.mono() - t0),
    };
  }

  async poll(owner: string, input: unknown, call: CallOptions = {}): Promise<JobView> {
    const req = parseInput(ExecPollInput, input);
    const job = this.#ownJob(owner, req.job_id);
    const from = req.cursor ?? encodeCursor(0);
    job.buffer.read(from, 1); // validates the cursor before waiting
    const waitMs = req.wait_ms ?? 0;
    const t0 = this.#clock.mono();
    if (waitMs > 0 && !this.#hasNews(job, from)) {
      const news = Promise.withResolvers<void>();
      const off = job.onChange(() => news.resolve());
      call.signal?.addEventListener("abort", () => news.resolve(), { once: true });
      await within(news.promise, waitMs);
      off();
    }
    this.#exposePartialLine(job, from);
    return {
      ...this.#view(job, job.buffer.read(from, req.max_bytes)),
      waited_ms: Math.round(this.#clock.mono() - t0),
    };
  }

  async wait(owner: string, input: unknown, call: CallOptions = {}): Promise<JobView> {
    const req = parseInput(ExecWaitInput, input);
    const job = this.#ownJob(owner, req.job_id);
    const from = req.cursor ?? encodeCursor(0);
    job.buffer.read(from, 1);
    const until = req.until ?? {};
    const none = until.exit === undefined && until.pattern === undefined &&
      until.prompt === undefined && until.idle_ms === undefined;
    const t0 = this.#clock.mono();
    const r = await waitForJob(job, {
      exit: none ? true : until.exit,
      prompt: until.prompt,
      pattern: until.pattern === undefined ? undefined : compilePattern(until.pattern),
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
      ...this.#view(job, job.buffer.read(from, req.max_bytes)),
      waited_ms: Math.round(this.#clock.mono() - t0),
      matched: r.matched,
      ...(r.match === undefined ? {} : { match: r.match }),
    };
  }

  /** Types input for a job that is waiting for it. `secret` values are redacted everywhere. */
  async write(
    owner: string,
    input: unknown,
  ): Promise<{ ok: true; job_id: string; status: JobStatus }> {
    const req = parseInput(ExecWriteInput, input);
    const job = this.#ownJob(owner, req.job_id);
    if (job.status !== "awaiting_input") {
      throw new TermadaError(
        "NOT_AWAITING_INPUT",
        `Cannot write to job "${job.id}": it is ${job.status}, not waiting for input`,
        { hint: "Wait with exec_wait until.prompt, or use exec_poll to see what it is doing" },
      );
    }
    const text = req.input + (req.append_newline === false ? "" : "\r");
    const leased = this.#sessions.get(job.sessionId)?.lease;
    if (leased && job.mode === "foreground") throw operatorHolds(job.sessionId);
    const target = this.#inputTarget(job);
    const gate = this.#opts.admission;
    if (gate?.admitInput && job.inputReader && COMMAND_READERS.test(job.inputReader)) {
      // The reader runs what it is given: the line is a command and passes the gate as one —
      // unless the terminal does not echo (a password prompt of su, ssh, sudo…).
      await gate.admitInput({
        owner,
        jobId: job.id,
        sessionId: job.sessionId,
        line: req.input,
        reader: job.inputReader,
        secret: req.secret === true,
        echoOff: target.echo() === false,
      });
    }
    if (req.secret) {
      // Registered before the bytes leave, so no echo or later output can carry them.
      target.redactor.addLiteral(req.input);
      if (target.redactor !== target.jobRedactor) target.jobRedactor.addLiteral(req.input);
    }
    await target.write(text);
    return { ok: true, job_id: job.id, status: job.status };
  }

  signal(owner: string, input: unknown): { ok: boolean; job_id: string; status: JobStatus } {
    const req = parseInput(ExecSignalInput, input);
    const job = this.#ownJob(owner, req.job_id);
    if (job.final) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Cannot signal job "${job.id}": it is ${job.status}`,
      );
    }
    const one = this.#oneshots.get(job.id);
    const ok = one ? one.signal(req.signal) : this.#sessionOfJob(job).signalForeground(req.signal);
    return { ok, job_id: job.id, status: job.status };
  }

  /** INT → TERM → KILL with `grace_ms` between; resolves with the final status. */
  async kill(owner: string, input: unknown): Promise<JobView> {
    const req = parseInput(ExecKillInput, input);
    const job = this.#ownJob(owner, req.job_id);
    await this.#stop(job, req.grace_ms ?? this.#opts.killGraceMs ?? 2000, "killed");
    return this.#view(job, job.buffer.summary(this.output.resultHeadBytes, 0));
  }

  /** A job of any owner, as a summary (operator views only). */
  anyJob(jobId: string): JobSummary & { owner: string } {
    const job = this.#jobs.get(jobId);
    if (!job) throw notFound("job", jobId);
    return this.#anySummary(job);
  }

  /**
   * An operator's kill: stops a job of any owner (INT → TERM → KILL, `graceMs` apart) through
   * the same path as an agent's kill. Operator routes only; agents never reach this.
   */
  async killAny(jobId: string, graceMs?: number): Promise<JobSummary & { owner: string }> {
    const job = this.#jobs.get(jobId);
    if (!job) throw notFound("job", jobId);
    await this.#stop(job, graceMs ?? this.#opts.killGraceMs ?? 2000, "killed");
    return this.#anySummary(job);
  }

  #anySummary(j: Job): JobSummary & { owner: string } {
    return { owner: j.owner, ...summarize(j) };
  }

  listJobs(owner: string, input: unknown = {}): { jobs: JobSummary[] } {
    const req = parseInput(ExecListInput, input ?? {});
    const filter = req.filter ?? "recent";
    const limit = req.limit ?? (filter === "all" ? 200 : 50);
    const now = this.#clock.now();
    const jobs: JobSummary[] = [];
    for (let i = this.#jobOrder.length - 1; i >= 0 && jobs.length < limit; i--) {
      const j = this.#jobOrder[i]!;
      if (j.owner !== owner) continue;
      if (filter === "active" && j.final) continue;
      if (filter === "recent" && j.final && now - j.startedAt > RECENT_MS) continue;
      jobs.push(summarize(j));
    }
    if (this.#hooks.listJobs && jobs.length < limit) {
      const seen = new Set(jobs.map((j) => j.job_id));
      const stored = this.#hooks.listJobs(owner, {
        active: filter === "active",
        startedAfter: filter === "recent" ? now - RECENT_MS : undefined,
        limit,
      });
      for (const j of stored) {
        if (jobs.length >= limit) break;
        if (!seen.has(j.job_id) && !this.#jobs.has(j.job_id)) jobs.push(j);
      }
      jobs.sort((a, b) => b.started_at.localeCompare(a.started_at));
    }
    return { jobs };
  }

  /** The job object for trusted in-process callers (tests, later the dashboard). */
  jobOf(owner: string, jobId: string): Job {
    return this.#ownJob(owner, jobId);
  }

  /** Closes every session and background job. The engine refuses work afterwards. */
  async shutdown(): Promise<void> {
    this.#closed = true;
    for (const { job } of this.#parked.values()) {
      job.finish("denied", { reason: "the daemon shut down before an operator decided" });
    }
    await Promise.all([
      ...[...this.#sessions.values()].map((s) => s.close("daemon shutting down")),
      ...[...this.#oneshots.values()].map((o) => o.close()),
    ]);
    await sharedPoller().stop();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.shutdown();
  }

  // ── internals ─────────────────────────────────────────────────────────────

  async #launch(owner: string, req: ExecStartInput): Promise<Job> {
    this.#assertOpen();
    if (req.mode === "background") return this.#launchBackground(owner, req);
    const session = req.session === undefined
      ? await this.#defaultSession(owner)
      : this.#ownSession(owner, req.session);
    if (session.lease) throw operatorHolds(session.id);
    if (session.state === "busy" && !session.job) await within(session.ready, 1000);
    if (session.state !== "ready") {
      const running = session.job?.id;
      throw new TermadaError(
        session.state === "closed" ? "NOT_FOUND" : "SESSION_BUSY",
        session.state === "closed"
          ? `Session "${session.id}" is closed`
          : `Session "${session.id}" is busy${running ? ` with job "${running}"` : ""}`,
        {
          details: running ? { job_id: running } : undefined,
          hint: running
            ? `Wait for "${running}" (exec_wait), kill it, use another session, or pass mode "background"`
            : "Retry in a moment",
        },
      );
    }
    const script = scopeScript(argvToScript(req.command), { cwd: req.cwd, env: req.env });
    const jobId = newId("job");
    // Hold the session while the gate decides, so no other command slips in between.
    const job = this.#newJob(owner, session.id, req.command, "foreground", session.redactor, jobId);
    job.cwd = session.cwd;
    session.reserve(job);
    let verdict: AdmissionVerdict;
    try {
      verdict = await this.#admit(job, req);
    } catch (err) {
      session.release(job);
      throw err;
    }
    if (verdict.verdict === "confirm") {
      this.#park(job, verdict.approvalId, { job, script, req, session });
      return job;
    }
    try {
      await session.run(job, script);
    } catch (err) {
      // The session closed while the gate decided: the job could not start.
      if (!job.final) {
        job.finish("failed", { reason: `could not start: ${(err as Error).message}` });
      }
      throw new TermadaError(
        "NOT_FOUND",
        `Session "${session.id}" closed before the command started`,
        {
          cause: err,
          details: { job_id: job.id },
          hint: "Run it again (your default session is recreated on demand)",
        },
      );
    }
    return job;
  }

  async #launchBackground(owner: string, req: ExecStartInput): Promise<Job> {
    // Background jobs waiting for approval count too: the approval queue is bounded as well.
    let running = 0;
    for (const o of this.#oneshots.values()) if (o.job.owner === owner && !o.job.final) running++;
    for (const p of this.#parked.values()) {
      if (p.job.owner === owner && p.job.mode === "background") running++;
    }
    if (running >= this.limits.backgroundPerOwner) {
      throw new TermadaError(
        "QUOTA_EXCEEDED",
        `Too many background jobs: ${running} of ${this.limits.backgroundPerOwner} running`,
        { hint: "Wait for or kill a background job (exec_list filter active)" },
      );
    }
    const base = req.session === undefined ? undefined : this.#ownSession(owner, req.session);
    const cwd = req.cwd ?? base?.cwd ?? this.#defaultCwd();
    const id = newId("job");
    const redactor = base?.redactor;
    const job = this.#newJob(
      owner,
      base?.id ?? "background",
      req.command,
      "background",
      redactor,
      id,
    );
    job.cwd = cwd;
    const verdict = await this.#admit(job, req);
    if (verdict.verdict === "confirm") {
      this.#park(job, verdict.approvalId, { job, req });
      return job;
    }
    this.#startOneShot(job, req, base, cwd);
    return job;
  }

  #startOneShot(job: Job, req: ExecStartInput, base: Session | undefined, cwd: string): void {
    const one = OneShot.start(job, {
      argv: req.command,
      shell: base?.shell ?? this.#opts.defaultShell ?? "bash",
      cwd,
      env: { ...this.#env, ...req.env },
      cols: base?.cols ?? 120,
      rows: base?.rows ?? 40,
    });
    this.#oneshots.set(job.id, one);
    job.done.then(() => this.#oneshots.delete(job.id));
  }

  #park(
    job: Job,
    approvalId: string,
    entry: { job: Job; script?: string; req: ExecStartInput; session?: Session },
  ): void {
    job.park(approvalId);
    this.#hooks.jobStatus?.(job);
    this.#parked.set(approvalId, entry);
    // A parked job that ends another way (session closed, shutdown) leaves nothing behind, and
    // the gate closes its approval.
    job.done.then(() => {
      if (this.#parked.get(approvalId)?.job !== job) return; // decided: resolveApproval took it
      this.#parked.delete(approvalId);
      try {
        this.#opts.admission?.parkedEnded?.({
          approvalId,
          jobId: job.id,
          owner: job.owner,
          sessionId: job.sessionId,
          reason: job.reason ?? `the job ended ${job.status} before a decision`,
        });
      } catch {
        // The gate records what it can; a failure there must not reach the job's waiters.
      }
    });
  }

  /** Types the policy's standing answers when the job waits at a matching prompt. */
  #autoAnswer(job: Job): () => void {
    const gate = this.#opts.admission;
    if (!gate?.autoAnswer) return () => {};
    let answered = 0;
    let busy = false;
    return job.onChange(() => {
      if (job.status !== "awaiting_input" || busy || answered >= MAX_AUTO_ANSWERS) return;
      let answer: string | undefined;
      try {
        answer = gate.autoAnswer!({
          owner: job.owner,
          jobId: job.id,
          sessionId: job.sessionId,
          prompt: job.prompt ?? "",
        });
      } catch {
        return; // the gate could not record it (audit down): the agent answers itself
      }
      if (answer === undefined) return;
      let target: ReturnType<Engine["inputTargetFor"]>;
      try {
        target = this.inputTargetFor(job);
      } catch {
        return;
      }
      busy = true;
      answered++;
      job.autoAnswering = true;
      target.write(answer + "\r").catch(() => {}).finally(() => {
        busy = false;
        job.autoAnswering = false;
      });
    });
  }

  /** Where input for a job goes (its session, or its own terminal). */
  inputTargetFor(job: Job): { write: (s: string) => Promise<void> } {
    return this.#inputTarget(job);
  }

  /** Asks the gate; a refusal is recorded as a `denied` job and rethrown with its id. */
  async #admit(job: Job, req: ExecStartInput): Promise<AdmissionVerdict> {
    const gate = this.#opts.admission;
    if (!gate) return { verdict: "run" };
    try {
      return await gate.admit({
        owner: job.owner,
        jobId: job.id,
        sessionId: job.sessionId,
        command: req.command,
        mode: job.mode,
        cwd: req.cwd,
        env: req.env,
      });
    } catch (err) {
      const e = toTermadaError(err);
      job.finish(e.code === "STOPPED" || e.code === "AUDIT_UNAVAILABLE" ? "failed" : "denied", {
        reason: e.message,
      });
      throw new TermadaError(e.code, e.message, {
        cause: e,
        hint: e.hint,
        retriable: e.retriable,
        details: { ...e.details, job_id: job.id },
      });
    }
  }

  /**
   * The operator's decision on a parked job (never reachable by agents: src/control and the
   * operator API call it). Approved: the job runs once, exactly as requested. Denied or
   * expired: it ends as `denied` with the reason.
   */
  async resolveApproval(
    approvalId: string,
    decision: { approve: boolean; by: string; reason?: string },
  ): Promise<JobView> {
    const parked = this.#parked.get(approvalId);
    if (!parked) throw notFound("approval", approvalId);
    this.#parked.delete(approvalId);
    const { job, session } = parked;
    if (!decision.approve) {
      job.finish("denied", { reason: decision.reason ?? `denied by ${decision.by}` });
      session?.release(job);
      return this.#view(job, job.buffer.summary(this.output.resultHeadBytes, 0));
    }
    job.unpark();
    this.#hooks.jobStatus?.(job);
    if (job.mode === "background") {
      const base = parked.req.session === undefined
        ? undefined
        : this.#sessions.get(parked.req.session);
      try {
        this.#startOneShot(job, parked.req, base, job.cwd ?? this.#defaultCwd());
      } catch (err) {
        // OneShot.start already finished the job as failed.
        void err;
      }
    } else if (session && session.state !== "closed" && session.job === job) {
      try {
        await session.run(job, parked.script!);
      } catch (err) {
        if (!job.final) {
          job.finish("failed", { reason: `could not start: ${(err as Error).message}` });
        }
      }
    } else if (!job.final) {
      job.finish("failed", { reason: "its session closed while it waited for approval" });
    }
    return this.#view(job, job.buffer.summary(this.output.resultHeadBytes, 0));
  }

  /** Jobs waiting for an operator, oldest first. */
  pendingApprovals(): PendingApproval[] {
    return [...this.#parked.entries()].map(([id, p]) => ({
      approval_id: id,
      job_id: p.job.id,
      owner: p.job.owner,
      session_id: p.job.sessionId,
      command: [...p.job.command],
      mode: p.job.mode,
      requested_at: new Date(p.job.startedAt).toISOString(),
    }));
  }

  /**
   * The kill switch's engine half: cancels every pending approval and stops every active job of
   * every owner (INT → TERM → KILL, `graceMs` apart). Resolves with the ids it touched.
   */
  async stopAll(
    graceMs: number,
    reason: string,
  ): Promise<{ stopped: string[]; cancelled: string[] }> {
    const cancelled: string[] = [];
    for (const id of [...this.#parked.keys()]) {
      cancelled.push(id);
      await this.resolveApproval(id, { approve: false, by: "system", reason });
    }
    const active = this.#jobOrder.filter((j) => !j.final);
    await Promise.all(active.map((j) => this.#stop(j, graceMs, "killed")));
    for (const j of active) if (!j.final) j.finish("killed", { reason });
    return { stopped: active.map((j) => j.id), cancelled };
  }

  #newJob(
    owner: string,
    sessionId: string,
    command: readonly string[],
    mode: "foreground" | "background",
    redactor?: Redactor,
    id = newId("job"),
  ): Job {
    const job = new Job({
      id,
      owner,
      sessionId,
      command: [...command],
      mode,
      clock: this.#clock,
      redactor: redactor ?? new Redactor({ extraPatterns: this.#redactPatterns }),
      output: { retentionBytes: this.output.retentionBytes, headBytes: this.output.headBytes },
    });
    this.#jobs.set(job.id, job);
    this.#jobOrder.push(job);
    const hooks = this.#hooks;
    if (hooks.jobOutput) job.onOutput = (bytes) => hooks.jobOutput!(job, bytes);
    hooks.jobStarted?.(job);
    const stopAnswering = this.#autoAnswer(job);
    job.done.then(() => {
      stopAnswering();
      hooks.jobEnded?.(job);
      if (mode === "foreground") {
        const s = this.#sessions.get(sessionId);
        if (s && job.cwd !== undefined) hooks.sessionUpdated?.(sessionId, { cwd: s.cwd });
      }
      this.#evict(owner);
    });
    return job;
  }

  /** Forgets the oldest finished jobs beyond the per-owner count and the global byte budget. */
  #evict(owner: string): void {
    let finishedOfOwner = 0;
    let bytes = 0;
    for (const j of this.#jobOrder) {
      if (!j.final) continue;
      if (j.owner === owner) finishedOfOwner++;
      bytes += Math.min(j.buffer.totalBytes, this.output.retentionBytes + this.output.headBytes);
    }
    const keep: Job[] = [];
    for (const j of this.#jobOrder) {
      const over = j.final && (
        (j.owner === owner && finishedOfOwner > this.limits.finishedJobsPerOwner) ||
        bytes > this.limits.finishedOutputBytes
      );
      if (over) {
        if (j.owner === owner) finishedOfOwner--;
        bytes -= Math.min(j.buffer.totalBytes, this.output.retentionBytes + this.output.headBytes);
        this.#jobs.delete(j.id);
      } else {
        keep.push(j);
      }
    }
    this.#jobOrder = keep;
  }

  async #stop(job: Job, graceMs: number, status: "killed" | "timed_out"): Promise<void> {
    if (job.final) return;
    if (job.status === "pending_approval" && job.approvalId) {
      // Nothing runs yet: withdrawing the request is all a kill means.
      await this.resolveApproval(job.approvalId, {
        approve: false,
        by: job.owner,
        reason: "withdrawn before an operator decided",
      });
      return;
    }
    const one = this.#oneshots.get(job.id);
    if (one) await one.stop(graceMs, status);
    else {
      const s = this.#sessions.get(job.sessionId);
      if (s) await s.stopJob(job, graceMs, status);
    }
    await waitDone(job, 1000);
  }

  #inputTarget(job: Job): {
    write: (s: string) => Promise<void>;
    /** Whether the terminal echoes input now (false at password prompts). */
    echo: () => boolean | undefined;
    redactor: Redactor;
    jobRedactor: Redactor;
  } {
    const one = this.#oneshots.get(job.id);
    if (one) {
      return {
        write: (s) => one.writeInput(s),
        echo: () => one.pty.termMode()?.echo,
        redactor: job.redactor,
        jobRedactor: job.redactor,
      };
    }
    const s = this.#sessionOfJob(job);
    return {
      write: (t) => s.writeInput(t),
      echo: () => s.pty.termMode()?.echo,
      redactor: s.redactor,
      jobRedactor: job.redactor,
    };
  }

  #sessionOfJob(job: Job): Session {
    const s = this.#sessions.get(job.sessionId);
    if (!s || s.job !== job) {
      throw new TermadaError("INVALID_ARGUMENT", `Job "${job.id}" is not running in a session`);
    }
    return s;
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

  #view(job: Job, page: Page): JobView {
    const v: JobView = {
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
    if (page.gap) {
      v.gap = {
        from_offset: page.gap.fromOffset,
        to_offset: page.gap.toOffset,
        dropped_bytes: page.gap.droppedBytes,
      };
    }
    if (job.status === "awaiting_input") {
      v.awaiting_input = true;
      v.prompt = job.prompt ?? "";
      if (job.inputSource) v.input_detection = job.inputSource;
    }
    if (job.cwd !== undefined) v.cwd = job.cwd;
    if (job.status === "pending_approval" && job.approvalId) v.approval_id = job.approvalId;
    return v;
  }

  async #defaultSession(owner: string): Promise<Session> {
    const existing = this.#defaults.get(owner);
    if (existing) {
      const s = await existing.catch(() => undefined);
      if (s && s.state !== "closed") return s;
    }
    const p = this.#newSession(owner, {});
    this.#defaults.set(owner, p);
    p.catch(() => this.#defaults.delete(owner));
    return await p;
  }

  async #newSession(owner: string, req: SessionCreateInput): Promise<Session> {
    this.#assertOpen();
    const mine = this.#countSessions(owner);
    if (mine >= this.limits.sessionsPerOwner) {
      throw new TermadaError(
        "QUOTA_EXCEEDED",
        `Too many sessions: ${mine} of ${this.limits.sessionsPerOwner} allowed per agent`,
        { hint: "Close a session you no longer need (session_close)" },
      );
    }
    if (this.#countSessions() >= this.limits.sessionsTotal) {
      throw new TermadaError(
        "QUOTA_EXCEEDED",
        `Too many sessions: the limit of ${this.limits.sessionsTotal} in all is reached`,
        { hint: "Close sessions or raise the limit in the configuration" },
      );
    }
    const cwd = req.cwd ?? this.#defaultCwd();
    try {
      if (!Deno.statSync(cwd).isDirectory) throw new Error("not a directory");
    } catch {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Cannot start a session in "${cwd}": not a directory`,
      );
    }
    const id = newId("ses");
    this.#creating.set(owner, (this.#creating.get(owner) ?? 0) + 1);
    try {
      const cols = req.cols ?? 120;
      const rows = req.rows ?? 40;
      const s = await Session.start({
        id,
        owner,
        shell: req.shell ?? this.#opts.defaultShell ?? "bash",
        cwd,
        env: {
          ...this.#env,
          ...req.env,
          TERMADA_SESSION_ID: id,
          COLUMNS: String(cols),
          LINES: String(rows),
        },
        cols,
        rows,
        workspace: req.workspace,
        dir: join(this.#opts.runtimeDir, "sessions", id),
        recordingPath: this.#opts.record === false ? undefined : join(
          this.#opts.recordingsDir ?? join(this.#opts.runtimeDir, "recordings"),
          `${id}.cast`,
        ),
        recording: {
          maxFileBytes: this.#opts.recording?.maxFileBytes ?? 16 * 1024 * 1024,
          keepFiles: this.#opts.recording?.keepFiles ?? 3,
        },
        ringBytes: this.output.ringBytes,
        redactPatterns: this.#redactPatterns,
        userRc: this.#opts.userRc ?? false,
        clock: this.#clock,
        startTimeoutMs: this.#opts.startTimeoutMs ?? 10_000,
        onOperatorCommand: (sess, line, operator) => {
          const job = this.#newJob(
            `operator:${operator}`,
            sess.id,
            [line],
            "foreground",
            sess.redactor,
          );
          job.cwd = sess.cwd;
          return job;
        },
        onClosed: (closed) => {
          this.#sessions.delete(closed.id);
          this.#hooks.sessionClosed?.(closed.id, closed.closeReason ?? "closed");
        },
      });
      if (this.#closed) {
        await s.close("daemon shutting down");
        this.#assertOpen();
      }
      this.#sessions.set(id, s);
      this.#hooks.sessionOpened?.(this.#sessionInfo(s), owner);
      return s;
    } finally {
      this.#creating.set(owner, this.#creating.get(owner)! - 1);
    }
  }

  #countSessions(owner?: string): number {
    let n = 0;
    for (const s of this.#sessions.values()) {
      if (s.state !== "closed" && (owner === undefined || s.owner === owner)) n++;
    }
    if (owner !== undefined) return n + (this.#creating.get(owner) ?? 0);
    for (const c of this.#creating.values()) n += c;
    return n;
  }

  #ownSession(owner: string, id: string): Session {
    const s = this.#sessions.get(id);
    if (!s || s.owner !== owner || s.state === "closed") throw notFound("session", id);
    return s;
  }

  #ownJob(owner: string, id: string): Job {
    const j = this.#jobs.get(id) ?? this.#hooks.findJob?.(owner, id);
    if (!j || j.owner !== owner) throw notFound("job", id);
    return j;
  }

  #sessionInfo(s: Session): SessionInfo {
    const info: SessionInfo = {
      session_id: s.id,
      target: "local",
      shell: s.shell,
      cwd: s.cwd,
      state: s.lease ? "operator" : s.state === "busy" ? "busy" : "ready",
      ...(s.outputPaused ? { output_paused: true } : {}),
      cols: s.cols,
      rows: s.rows,
      created_at: new Date(s.createdAt).toISOString(),
    };
    if (s.workspace !== undefined) info.workspace = s.workspace;
    if (s.job) info.current_job_id = s.job.id;
    return info;
  }

  #defaultCwd(): string {
    return this.#opts.defaultCwd ?? this.#env.HOME ?? Deno.cwd();
  }

  #assertOpen(): void {
    if (this.#closed) {
      throw new TermadaError("STOPPED", "The engine is shutting down", { retriable: true });
    }
  }
}

/** Environment for shells: the given base (or ours), minus Termada's own secrets. */
/** A job as exec_list shows it. */
function summarize(j: Job): JobSummary {
  return {
    job_id: j.id,
    session_id: j.sessionId,
    command: [...j.command],
    mode: j.mode,
    status: j.status,
    ...(j.exitCode === undefined ? {} : { exit_code: j.exitCode }),
    ...(j.signal === undefined ? {} : { signal: j.signal }),
    started_at: new Date(j.startedAt).toISOString(),
    duration_ms: j.durationMs,
    ...(j.cwd === undefined ? {} : { cwd: j.cwd }),
  };
}

function assertNotHeldByOther(s: Session, operator: string): void {
  if (s.lease && s.lease.operator !== operator) {
    throw new TermadaError(
      "SESSION_BUSY",
      `Operator "${s.lease.operator}" holds session "${s.id}"`,
    );
  }
}

function operatorHolds(sessionId: string): TermadaError {
  return new TermadaError(
    "SESSION_BUSY",
    `An operator holds the keyboard of session "${sessionId}"`,
    {
      details: { state: "operator" },
      hint: "Wait until the operator releases it, or use another session",
    },
  );
}

function baseEnv(given?: Record<string, string>): Record<string, string> {
  const env = { ...(given ?? Deno.env.toObject()) };
  for (const k of Object.keys(env)) if (k.startsWith("TERMADA_")) delete env[k];
  env.TERM = "xterm-256color";
  env.PAGER = "cat";
  env.GIT_PAGER = "cat";
  env.LANG ??= "C.UTF-8";
  return env;
}
