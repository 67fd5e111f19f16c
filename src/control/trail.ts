/**
 * The trail of every job and session, from one place: its row in the store and its audit
 * records, from the request to the outcome. Nothing else writes a job's records.
 *
 * Durability of one command (docs/CONTROL.md): the row is inserted before the gate decides (a
 * job whose row cannot be stored never runs), the intent record is on disk before it runs, and
 * at its end ONE statement stores the outcome and the output (kept inline when small), with the
 * session's cwd in the same transaction when it changed, then the outcome record is written
 * (durable with the next group sync). A crash before that sync leaves the row active: the next
 * start marks it `orphaned` (outcome unknown), never lost.
 *
 * The end is written behind: just after the job's reply has gone out (a `soon` turn), not before
 * it. Nobody can tell: every read of the jobs table and every later audit record first flushes
 * what is held back (`settle`), so the chain and the rows read exactly as if it were written at
 * once; only a crash in that turn differs, and it reads as `orphaned`, like any crash before the
 * outcome's sync.
 */
import { createHash, type Hash } from "node:crypto";
import type { DecisionRecord } from "../audit/mod.ts";
import {
  CursorBuffer,
  encodeCursor,
  type Page,
  pruneSpools,
  removeSpool,
  SpoolReader,
  SpoolWriter,
  type Summary,
} from "../output/mod.ts";
import { type Clock, concatBytes, isId, logger, soon, TermadaError } from "../shared/mod.ts";
import type { JobRow, Store } from "../store/mod.ts";
import type { JobStatus, JobSummary } from "../wire/mod.ts";
import {
  Job,
  type JobArchive,
  type JobRecord,
  type OutputReader,
  type Session,
} from "../engine/mod.ts";
import type { Actor, Recorder } from "./recorder.ts";
import { SYSTEM } from "./recorder.ts";

const log = logger("control");

/** Output up to this size is kept with the job's row; beyond, it goes to a spool on disk. */
export const INLINE_OUTPUT_BYTES = 64 * 1024;
/**
 * A job still running after this long spools its output; so does one whose output a caller was
 * shown while it ran (so a crash keeps it).
 */
export const SPOOL_AFTER_MS = 250;
/** Store pruning and the WAL checkpoint run at most this often, off the path of any call. */
const PRUNE_EVERY_MS = 2000;

/** The store tables the trail writes (src/store's Store satisfies it). */
export type TrailStore = Pick<
  Store,
  "jobs" | "sessions" | "checkpoint" | "setWriteBehind" | "transaction"
>;

export interface TrailOptions {
  store: TrailStore;
  recorder: Recorder;
  spoolDir: string;
  spoolMaxBytes: number;
  /** Finished jobs kept in the store per agent (older ones are pruned with their spools). */
  finishedPerAgent: number;
  clock: Clock;
  /** The cwd of an open session (recorded with each of its jobs' end). */
  sessionCwd: (sessionId: string) => string | undefined;
}

/** Jobs an operator typed into a session they took over are owned by "operator:<id>". */
export function actorOfOwner(owner: string): Actor {
  return owner.startsWith("operator:")
    ? { kind: "operator", id: owner.slice("operator:".length) }
    : { kind: "agent", id: owner };
}

function jobRequest(job: Job): {
  job_id: string;
  session_id: string;
  command: string[];
  mode: "foreground" | "background";
  cwd?: string;
} {
  return {
    job_id: job.id,
    session_id: job.sessionId,
    command: [...job.command],
    mode: job.mode,
    ...(job.requestedCwd === undefined ? {} : { cwd: job.requestedCwd }),
  };
}

export class Trail {
  /** The recorder records go through (for events the trail has no helper for). */
  get recorder(): Recorder {
    return this.#o.recorder;
  }

  readonly #o: TrailOptions;
  readonly #captures = new Map<string, Capture>();
  #pruneTimer: ReturnType<typeof setTimeout> | undefined;
  readonly #pruneOwners = new Set<string>();
  /** Ended jobs whose end is not stored yet, in the order they ended (see settle). */
  readonly #ended = new Map<string, Job>();
  #settling = false;
  /** Runs with each periodic prune (the ledger bounds the actions, grants and usage tables). */
  onPrune: (() => void) | undefined;
  /** Runs when a job's end is stored (the gateway settles its budgets and action row). */
  onFinished: ((job: Job) => void) | undefined;
  /** The cwd last stored for each open session (its row is only rewritten when it changes). */
  readonly #storedCwd = new Map<string, string>();

  constructor(options: TrailOptions) {
    this.#o = options;
    options.store.setWriteBehind(() => this.settle());
    options.recorder.beforeEachRecord(() => this.settle());
  }

  /**
   * Stores the end of every job that ended and is not stored yet, in the order they ended.
   * Runs by itself just after the replies of those jobs went out; every reader of the jobs
   * table and every audit record runs it first.
   */
  settle(): void {
    if (this.#settling) return; // re-entered from a record written below: it comes in order
    this.#settling = true;
    try {
      for (const job of this.#ended.values()) {
        this.#ended.delete(job.id);
        this.#finished(job);
      }
    } finally {
      this.#settling = false;
    }
  }

  // ── jobs ──────────────────────────────────────────────────────────────────

  /**
   * A job an agent asked for, before the gate decides: its row is stored (or the job must not
   * run: this throws) and its output captured from now on.
   */
  opened(job: Job): void {
    try {
      this.#o.store.jobs.insert(rowOf(job));
    } catch (err) {
      throw new TermadaError("INTERNAL", `Cannot store job "${job.id}": it was not run`, {
        cause: err,
        retriable: true,
        hint: "The state directory may be full or read-only; an operator should check it",
      });
    }
    this.#capture(job);
  }

  /** A job an operator typed at the prompt of a session they hold (it already runs). */
  operatorJob(job: Job): void {
    try {
      this.#o.store.jobs.insert(rowOf(job));
      this.#capture(job);
    } catch (err) {
      log.error("could not store an operator's job", { job: job.id, error: err });
    }
    try {
      this.#o.recorder.note(actorOfOwner(job.owner), "job.started_by_operator", {
        job_id: job.id,
        session_id: job.sessionId,
        command: [...job.command],
      });
    } catch (err) {
      log.error("could not audit an operator's job", { job: job.id, error: err });
    }
  }

  /** The kill switch barrier refused it. */
  refused(job: Job, reason: string): void {
    this.#o.recorder.record({ kind: "agent", id: job.owner }, "admission.refused", {
      ...jobRequest(job),
      reason,
    });
  }

  denied(job: Job, decision: DecisionRecord): void {
    this.#o.recorder.record({ kind: "agent", id: job.owner }, "policy.denied", {
      ...jobRequest(job),
      decision,
    });
  }

  /** The intent: on disk before the job runs. */
  async requested(job: Job, decision: DecisionRecord): Promise<void> {
    await this.#o.recorder.intent({ kind: "agent", id: job.owner }, "job.requested", {
      ...jobRequest(job),
      decision,
    });
  }

  async approvalRequested(job: Job, approvalId: string, decision: DecisionRecord): Promise<void> {
    await this.#o.recorder.intent({ kind: "agent", id: job.owner }, "approval.requested", {
      ...jobRequest(job),
      approval_id: approvalId,
      decision,
    });
  }

  /** An action that is not a job waits for a person: on disk before anyone sees it. */
  async actionApprovalRequested(
    action: { id: string; owner: string; kind: string; sessionId?: string; summary: string[] },
    approvalId: string,
    decision: DecisionRecord,
  ): Promise<void> {
    await this.#o.recorder.intent(
      { kind: "agent", id: action.owner },
      "action.approval_requested",
      {
        action_id: action.id,
        kind: action.kind,
        ...(action.sessionId ? { session_id: action.sessionId } : {}),
        summary: [...action.summary],
        approval_id: approvalId,
        decision,
      },
    );
  }

  /** A program of a running job waits in execve for a person: on disk before anyone sees it. */
  async execApprovalRequested(
    job: Job,
    approvalId: string,
    exec: { pid: number; path: string; argv: string[]; decision: DecisionRecord },
  ): Promise<void> {
    await this.#o.recorder.intent({ kind: "agent", id: job.owner }, "exec.approval_requested", {
      job_id: job.id,
      session_id: job.sessionId,
      approval_id: approvalId,
      pid: exec.pid,
      path: exec.path,
      argv: [...exec.argv],
      decision: exec.decision,
    });
  }

  /**
   * The exec gate refused a program (deny rule, stop-all, no approval): recorded, not awaited —
   * the program is already stopped by the kernel.
   */
  execDenied(
    owner: string,
    where: { job_id?: string; session_id: string },
    exec: { pid: number; path: string; argv: string[]; sha256?: string; interpreter?: string },
    decision: DecisionRecord,
  ): void {
    this.#o.recorder.record({ kind: "agent", id: owner }, "exec.denied", {
      ...where,
      ...exec,
      argv: [...exec.argv],
      decision,
    });
  }

  /** An approval was decided (or expired, or closed with its job): on disk before it acts. */
  async approvalResolved(
    by: Actor,
    subject: { id: string; owner: string; sessionId: string },
    approvalId: string,
    approved: boolean,
    reason: string | undefined,
    command: readonly string[],
    approvers?: readonly string[],
  ): Promise<void> {
    await this.#o.recorder.intent(by, "approval.resolved", {
      approval_id: approvalId,
      job_id: subject.id,
      owner: subject.owner,
      ...(subject.sessionId && subject.sessionId !== "-" ? { session_id: subject.sessionId } : {}),
      command: [...command],
      approved,
      ...(reason === undefined ? {} : { reason }),
      ...(approvers && approvers.length > 0 ? { approvers: [...approvers] } : {}),
    });
  }

  /** The job's status changed while it lives (parked for approval). */
  statusChanged(job: Job): void {
    try {
      this.#o.store.jobs.update(job.id, { status: job.status });
    } catch (err) {
      log.error("could not store a job's status", { job: job.id, error: err });
    }
  }

  killedByOperator(by: Actor, job: Job, graceMs: number | undefined): void {
    this.#o.recorder.record(by, "job.killed_by_operator", {
      job_id: job.id,
      session_id: job.sessionId,
      owner: job.owner,
      status: job.status,
      ...(graceMs === undefined ? {} : { grace_ms: graceMs }),
    });
  }

  inputRefused(job: Job, line: string, reader: string, reason: string): void {
    this.#o.recorder.record({ kind: "agent", id: job.owner }, "admission.refused", {
      job_id: job.id,
      session_id: job.sessionId,
      line,
      reader,
      reason,
    });
  }

  inputDenied(job: Job, line: string, reader: string, decision: DecisionRecord): void {
    this.#o.recorder.record({ kind: "agent", id: job.owner }, "policy.denied", {
      job_id: job.id,
      session_id: job.sessionId,
      line,
      reader,
      decision,
    });
  }

  async inputWritten(
    job: Job,
    line: string,
    reader: string,
    decision?: DecisionRecord,
  ): Promise<void> {
    await this.#o.recorder.intent({ kind: "agent", id: job.owner }, "input.written", {
      job_id: job.id,
      session_id: job.sessionId,
      line,
      reader,
      ...(decision ? { decision } : {}),
    });
  }

  autoAnswered(job: Job, prompt: string, answer: string): void {
    this.#o.recorder.record({ kind: "system", id: "auto_answer" }, "input.auto_answered", {
      job_id: job.id,
      session_id: job.sessionId,
      owner: job.owner,
      prompt,
      answer,
    });
  }

  #capture(job: Job): void {
    const capture = new Capture(job, this.#o);
    this.#captures.set(job.id, capture);
    job.onOutput = (bytes) => capture.append(bytes);
    job.onShown = () => capture.spool();
    job.done.then(() => {
      this.#ended.set(job.id, job);
      if (this.#ended.size === 1) soon(() => this.settle());
    });
  }

  /** One transaction for the outcome, the output and the session's cwd; then the record. */
  #finished(job: Job): void {
    const capture = this.#captures.get(job.id);
    this.#captures.delete(job.id);
    const out = capture?.end() ?? { inline: null, sha256: null };
    // Its output is stored: a job kept in memory afterwards holds no capture (hash, timer).
    job.onOutput = undefined;
    job.onShown = undefined;
    let cwd = job.mode === "foreground" ? this.#o.sessionCwd(job.sessionId) : undefined;
    if (cwd !== undefined && this.#storedCwd.get(job.sessionId) === cwd) cwd = undefined;
    // The job's row and its action's (the gateway settles budgets in onFinished): one commit.
    try {
      this.#o.store.transaction(() => this.#storeEnd(job, out, cwd));
    } catch (err) {
      log.error("could not store a job's outcome", { job: job.id, error: err });
    }
    try {
      this.#o.recorder.note(actorOfOwner(job.owner), "job.finished", {
        job_id: job.id,
        session_id: job.sessionId,
        status: job.status,
        ...(job.exitCode === undefined ? {} : { exit_code: job.exitCode }),
        ...(job.signal === undefined ? {} : { signal: job.signal }),
        ...(job.reason === undefined ? {} : { reason: job.reason }),
        duration_ms: job.durationMs,
        output_bytes: job.buffer.totalBytes,
      });
    } catch (err) {
      log.error("could not audit a job's outcome", { job: job.id, error: err });
    }
    this.#schedulePrune(job.owner);
  }

  /**
   * Inside the end's transaction: the job's row (a failure is logged and rolls back its own
   * savepoint only), then onFinished, whose writes join the same commit.
   */
  #storeEnd(
    job: Job,
    out: { inline: Uint8Array | null; sha256: string | null },
    cwd?: string,
  ): void {
    try {
      this.#o.store.jobs.finish(job.id, {
        status: job.status,
        exit_code: job.exitCode ?? null,
        signal: job.signal ?? null,
        reason: job.reason ?? null,
        cwd: job.cwd ?? null,
        ended_at: job.endedAt ?? this.#o.clock.now(),
        output_bytes: job.buffer.totalBytes,
        output_sha256: out.sha256,
        output: out.inline,
      }, cwd === undefined ? undefined : { id: job.sessionId, cwd });
      if (cwd !== undefined) this.#storedCwd.set(job.sessionId, cwd);
    } catch (err) {
      log.error("could not store a job's outcome", { job: job.id, error: err });
    }
    this.onFinished?.(job);
  }

  /** Deletes old finished jobs (and their spools) beyond the per-agent count, off the hot path. */
  #schedulePrune(owner: string): void {
    this.#pruneOwners.add(owner);
    if (this.#pruneTimer !== undefined) return;
    this.#pruneTimer = setTimeout(() => {
      this.#pruneTimer = undefined;
      this.pruneNow();
    }, PRUNE_EVERY_MS);
  }

  pruneNow(): void {
    const owners = [...this.#pruneOwners];
    this.#pruneOwners.clear();
    try {
      this.onPrune?.();
    } catch (err) {
      log.warn("could not prune the governance tables", { error: err });
    }
    try {
      this.#o.store.checkpoint();
    } catch (err) {
      log.warn("could not checkpoint the database", { error: err });
    }
    for (const owner of owners) {
      try {
        for (const j of this.#o.store.jobs.prune(owner, this.#o.finishedPerAgent)) {
          if (j.spooled) removeSpool(this.#o.spoolDir, j.id);
        }
      } catch (err) {
        log.warn("could not prune old jobs", { owner, error: err });
      }
    }
  }

  /** Removes spools of jobs the store no longer has (a crash between prune and delete). */
  pruneOrphanSpools(): void {
    try {
      pruneSpools(this.#o.spoolDir, (id) => this.#o.store.jobs.get(id) !== undefined);
    } catch (err) {
      log.warn("could not prune old spools", { error: err });
    }
  }

  /** Flushes pending work (shutdown): prunes now, ends open spools. */
  close(): void {
    this.settle();
    clearTimeout(this.#pruneTimer);
    this.#pruneTimer = undefined;
    for (const c of this.#captures.values()) c.abandon();
    this.#captures.clear();
  }

  // ── sessions ──────────────────────────────────────────────────────────────

  /** A session was opened: stored and audited, or it must be closed again (this throws). */
  sessionOpened(s: Session): void {
    this.#o.store.sessions.insert({
      id: s.id,
      owner: s.owner,
      shell: s.shell,
      target: s.target,
      cwd: s.cwd,
      workspace: s.workspace ?? null,
      cols: s.cols,
      rows: s.rows,
      created_at: s.createdAt,
    });
    this.#storedCwd.set(s.id, s.cwd);
    this.#o.recorder.record({ kind: "agent", id: s.owner }, "session.created", {
      session_id: s.id,
      ...(s.target === "local" ? {} : { target: s.target }),
      shell: s.shell,
      cwd: s.cwd,
      ...(s.workspace === undefined ? {} : { workspace: s.workspace }),
    });
  }

  sessionResized(s: Session): void {
    try {
      this.#o.store.sessions.update(s.id, { cols: s.cols, rows: s.rows });
    } catch (err) {
      log.error("could not store a session's size", { session: s.id, error: err });
    }
  }

  sessionClosed(s: Session, reason: string): void {
    this.#storedCwd.delete(s.id);
    try {
      this.#o.store.sessions.update(s.id, {
        state: "closed",
        closed_at: this.#o.clock.now(),
        close_reason: reason,
        cwd: s.cwd,
      });
    } catch (err) {
      log.error("could not store a closed session", { session: s.id, error: err });
    }
    try {
      this.#o.recorder.note(SYSTEM, "session.closed", { session_id: s.id, reason });
    } catch (err) {
      log.error("could not audit a closed session", { session: s.id, error: err });
    }
  }

  // ── the archive: jobs no longer in memory ─────────────────────────────────

  archive(): JobArchive {
    const { store, spoolDir, clock } = this.#o;
    return {
      find(id, owner) {
        if (!isId("job", id)) return undefined;
        let row: JobRow | undefined;
        try {
          row = store.jobs.get(id);
        } catch (err) {
          log.error("could not read a stored job", { job: id, error: err });
          return undefined;
        }
        if (!row || (owner !== undefined && row.owner !== owner)) return undefined;
        return Job.archived(toRecord(row), readerOf(row, spoolDir), clock);
      },
      list(owner, f) {
        try {
          return store.jobs.list({
            owner,
            active: f.active,
            startedAfter: f.startedAfter,
            limit: f.limit,
          }).map((r) => toSummary(r, clock));
        } catch (err) {
          log.error("could not list stored jobs", { error: err });
          return [];
        }
      },
    };
  }
}

/**
 * A job's output on its way to the store: its SHA-256 as it streams (mission evidence), kept in
 * memory while small, spooled to disk once large or long-running.
 */
class Capture {
  readonly #job: Job;
  readonly #o: TrailOptions;
  readonly #hash: Hash = createHash("sha256");
  #chunks: Uint8Array[] | null = [];
  #bytes = 0;
  #spool: SpoolWriter | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(job: Job, o: TrailOptions) {
    this.#job = job;
    this.#o = o;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (!job.final) this.#openSpool();
    }, SPOOL_AFTER_MS);
  }

  append(bytes: Uint8Array): void {
    this.#hash.update(bytes);
    this.#bytes += bytes.length;
    if (this.#spool) {
      this.#write(bytes);
      return;
    }
    this.#chunks?.push(bytes);
    if (this.#bytes > INLINE_OUTPUT_BYTES) this.#openSpool();
  }

  /** The output to keep with the row (null when spooled or unavailable) and its hash. */
  end(): { inline: Uint8Array | null; sha256: string } {
    clearTimeout(this.#timer);
    const sha256 = this.#hash.digest("hex");
    if (this.#spool) {
      try {
        this.#spool.end();
      } catch (err) {
        log.error("could not close a job's spool", { job: this.#job.id, error: err });
      }
      return { inline: null, sha256 };
    }
    const chunks = this.#chunks;
    this.#chunks = null;
    if (chunks === null) return { inline: null, sha256 };
    return { inline: concatBytes(chunks, this.#bytes), sha256 };
  }

  /** Writes through to disk from now on (what a caller was shown must survive a crash). */
  spool(): void {
    this.#openSpool();
  }

  abandon(): void {
    clearTimeout(this.#timer);
    try {
      this.#spool?.end();
    } catch {
      // shutting down: the spool reads back up to its last flushed segment
    }
  }

  #openSpool(): void {
    if (this.#spool || this.#chunks === null) return;
    try {
      this.#spool = SpoolWriter.create(this.#o.spoolDir, this.#job.id, {
        maxBytes: this.#o.spoolMaxBytes,
      });
    } catch (err) {
      log.error("could not open a job's spool", { job: this.#job.id, error: err });
      this.#chunks = null; // neither inline (too big) nor spooled: output stays in memory only
      return;
    }
    const chunks = this.#chunks;
    this.#chunks = null;
    for (const c of chunks) this.#write(c);
  }

  // Written through (no buffering in between): output an agent has been shown must survive a
  // crash of the daemon. The page cache makes this a cheap write per chunk.
  #write(bytes: Uint8Array): void {
    try {
      this.#spool!.append(bytes);
      this.#spool!.flush();
    } catch (err) {
      log.error("could not spool a job's output", { job: this.#job.id, error: err });
    }
  }
}

function rowOf(job: Job): Parameters<TrailStore["jobs"]["insert"]>[0] {
  return {
    id: job.id,
    owner: job.owner,
    session_id: job.sessionId,
    command: [...job.command],
    mode: job.mode,
    status: job.status,
    cwd: job.cwd ?? null,
    started_at: job.startedAt,
  };
}

const EMPTY_READER: OutputReader = {
  totalBytes: 0,
  startOffset: 0,
  read(): Page {
    return { output: "", nextCursor: encodeCursor(0), hasMore: false };
  },
  summary(): Summary {
    return { output: "", nextCursor: encodeCursor(0), hasMore: false };
  },
};

/** How a stored job's output reads back: from its row when inline, else from its spool. */
function readerOf(row: JobRow, spoolDir: string): OutputReader {
  if (row.output !== null) {
    const buffer = new CursorBuffer({
      retentionBytes: Math.max(1, row.output.length),
      headBytes: 0,
    });
    buffer.append(row.output);
    buffer.end();
    return buffer;
  }
  const spool = SpoolReader.open(spoolDir, row.id);
  if (!spool) return EMPTY_READER;
  return {
    read: (cursor, max) => spool.read(cursor, max),
    summary: (h, t) => spool.summary(h, t),
    get totalBytes() {
      return spool.totalBytes;
    },
    startOffset: 0, // only a floor for pattern scans; deleted segments read as a gap
  };
}

export function toRecord(row: JobRow): JobRecord {
  return {
    id: row.id,
    owner: row.owner,
    sessionId: row.session_id,
    command: row.command,
    mode: row.mode,
    status: row.status as JobStatus,
    exitCode: row.exit_code ?? undefined,
    signal: row.signal ?? undefined,
    reason: row.reason ?? undefined,
    cwd: row.cwd ?? undefined,
    startedAt: row.started_at,
    endedAt: row.ended_at ?? undefined,
  };
}

function toSummary(row: JobRow, clock: Clock): JobSummary {
  const s: JobSummary = {
    job_id: row.id,
    session_id: row.session_id,
    command: row.command,
    mode: row.mode,
    status: row.status as JobStatus,
    started_at: new Date(row.started_at).toISOString(),
    duration_ms: (row.ended_at ?? clock.now()) - row.started_at,
  };
  if (row.exit_code !== null) s.exit_code = row.exit_code;
  if (row.signal !== null) s.signal = row.signal;
  if (row.cwd !== null) s.cwd = row.cwd;
  return s;
}
