/**
 * Who owns what: the live sessions and the jobs kept in memory, per owner, with the quotas that
 * bound them and the lookups every operation starts with. An owner never sees another owner's
 * sessions or jobs (their ids are NOT_FOUND). Finished jobs stay in memory only within a count
 * and byte budget; older ones are served from the archive (the store) when asked for.
 */
import type { JobSummary, SessionInfo } from "../wire/mod.ts";
import { type Clock, notFound, TermadaError } from "../shared/mod.ts";
import type { Job } from "./job.ts";
import type { Session } from "./session.ts";

export interface EngineLimits {
  /** Live sessions per owner (QUOTA_EXCEEDED beyond). */
  sessionsPerOwner: number;
  /** Live sessions in all. */
  sessionsTotal: number;
  /** Running background (one-shot) jobs per owner, those waiting for approval included. */
  backgroundPerOwner: number;
  /** Finished jobs kept in memory per owner (older ones are read back from the archive). */
  finishedJobsPerOwner: number;
  /** Finished jobs kept in memory in all. */
  finishedJobsTotal: number;
  /** Bytes of output kept in memory across all finished jobs; oldest finished go first. */
  finishedOutputBytes: number;
}

export const DEFAULT_LIMITS: EngineLimits = {
  sessionsPerOwner: 32,
  sessionsTotal: 128,
  backgroundPerOwner: 16,
  finishedJobsPerOwner: 50,
  finishedJobsTotal: 2000,
  finishedOutputBytes: 64 * 1024 * 1024,
};

/** Jobs that are no longer in memory: from before a restart, or evicted (the store). */
export interface JobArchive {
  /** The stored job `id`; only if it belongs to `owner` when one is given. */
  find(id: string, owner?: string): Job | undefined;
  /** Newest first. */
  list(
    owner: string,
    filter: { active: boolean; startedAfter?: number; limit: number },
  ): JobSummary[];
}

const RECENT_MS = 60 * 60 * 1000;

export class Registry {
  readonly limits: EngineLimits;
  readonly #sessions = new Map<string, Session>();
  readonly #jobs = new Map<string, Job>();
  /** Jobs in creation order (the live ones and the finished ones still in memory). */
  #order: Job[] = [];
  #finished = 0;
  #finishedBytes = 0;
  /**
   * Finished jobs still in memory, oldest end first: all of them, and each owner's. Entries of
   * jobs dropped meanwhile stay until they reach the front (skipped there), so both stay within
   * a few times the limits; eviction costs O(1) however many owners share the daemon.
   */
  #finishedAll: Job[] = [];
  #finishedAllHead = 0;
  readonly #finishedOf = new Map<string, Job[]>();
  readonly #creating = new Map<string, number>();
  readonly #clock: Clock;
  archive: JobArchive | undefined;

  constructor(limits: EngineLimits, clock: Clock) {
    this.limits = limits;
    this.#clock = clock;
  }

  // ── sessions ──────────────────────────────────────────────────────────────

  /**
   * Claims a slot for a session that is about to start (QUOTA_EXCEEDED when the owner or the
   * daemon is full). Call the returned function once the session is added or failed.
   */
  claimSessionSlot(owner: string): () => void {
    const mine = this.countSessions(owner);
    if (mine >= this.limits.sessionsPerOwner) {
      throw new TermadaError(
        "QUOTA_EXCEEDED",
        `Too many sessions: ${mine} of ${this.limits.sessionsPerOwner} allowed per agent`,
        { hint: "Close a session you no longer need (session_close)" },
      );
    }
    if (this.countSessions() >= this.limits.sessionsTotal) {
      throw new TermadaError(
        "QUOTA_EXCEEDED",
        `Too many sessions: the limit of ${this.limits.sessionsTotal} in all is reached`,
        { hint: "Close sessions or raise the limit in the configuration" },
      );
    }
    this.#creating.set(owner, (this.#creating.get(owner) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const n = (this.#creating.get(owner) ?? 1) - 1;
      if (n <= 0) this.#creating.delete(owner);
      else this.#creating.set(owner, n);
    };
  }

  addSession(s: Session): void {
    this.#sessions.set(s.id, s);
  }

  removeSession(id: string): void {
    this.#sessions.delete(id);
  }

  /** Open sessions (and, for an owner, those starting): for quotas and views. */
  countSessions(owner?: string): number {
    let n = 0;
    for (const s of this.#sessions.values()) {
      if (s.state !== "closed" && (owner === undefined || s.owner === owner)) n++;
    }
    if (owner !== undefined) return n + (this.#creating.get(owner) ?? 0);
    for (const c of this.#creating.values()) n += c;
    return n;
  }

  ownSession(owner: string, id: string): Session {
    const s = this.#sessions.get(id);
    if (!s || s.owner !== owner || s.state === "closed") throw notFound("session", id);
    return s;
  }

  /** A session by id whatever its owner (operator use cases only). */
  anySession(id: string): Session {
    const s = this.#sessions.get(id);
    if (!s || s.state === "closed") throw notFound("session", id);
    return s;
  }

  /** The session a job runs in, if it is still open. */
  sessionById(id: string): Session | undefined {
    return this.#sessions.get(id);
  }

  sessionsOf(owner: string): Session[] {
    return [...this.#sessions.values()].filter((s) => s.owner === owner && s.state !== "closed");
  }

  allSessions(): Session[] {
    return [...this.#sessions.values()].filter((s) => s.state !== "closed");
  }

  /** Every session not yet removed, those still closing included (shutdown waits for them). */
  everySession(): Session[] {
    return [...this.#sessions.values()];
  }

  // ── jobs ──────────────────────────────────────────────────────────────────

  addJob(job: Job): void {
    this.#jobs.set(job.id, job);
    this.#order.push(job);
  }

  /** A job of the owner: in memory, else from the archive; NOT_FOUND otherwise. */
  ownJob(owner: string, id: string): Job {
    const j = this.#jobs.get(id) ?? this.archive?.find(id, owner);
    if (!j || j.owner !== owner) throw notFound("job", id);
    return j;
  }

  /** A job in memory whatever its owner (operator use cases only). */
  anyJob(id: string): Job {
    const j = this.#jobs.get(id);
    if (!j) throw notFound("job", id);
    return j;
  }

  /** A job of any owner, from memory or the archive (operator reads). */
  findAnyJob(id: string): Job | undefined {
    return this.#jobs.get(id) ?? this.archive?.find(id);
  }

  /** Jobs that have not ended, oldest first. */
  activeJobs(): Job[] {
    return this.#order.filter((j) => !j.final && this.#jobs.get(j.id) === j);
  }

  /** The owner's jobs, newest first, merged with the archive's. */
  listJobs(
    owner: string,
    filter: "active" | "recent" | "all",
    limit: number,
  ): JobSummary[] {
    const now = this.#clock.now();
    const jobs: JobSummary[] = [];
    for (let i = this.#order.length - 1; i >= 0 && jobs.length < limit; i--) {
      const j = this.#order[i]!;
      if (j.owner !== owner || this.#jobs.get(j.id) !== j) continue;
      if (filter === "active" && j.final) continue;
      if (filter === "recent" && j.final && now - j.startedAt > RECENT_MS) continue;
      jobs.push(summarize(j));
    }
    if (this.archive && jobs.length < limit) {
      const seen = new Set(jobs.map((j) => j.job_id));
      const stored = this.archive.list(owner, {
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
    return jobs;
  }

  /** Jobs of every owner, newest first (operator views). */
  allJobs(limit: number): (JobSummary & { owner: string })[] {
    const out: (JobSummary & { owner: string })[] = [];
    for (let i = this.#order.length - 1; i >= 0 && out.length < limit; i--) {
      const j = this.#order[i]!;
      if (this.#jobs.get(j.id) === j) out.push({ owner: j.owner, ...summarize(j) });
    }
    return out;
  }

  /**
   * A job ended: it stays in memory only within the per-owner count, the total count and the
   * byte budget; beyond, the oldest finished jobs are dropped (the archive has them).
   */
  finished(job: Job): void {
    if (this.#jobs.get(job.id) !== job) return;
    this.#finished++;
    this.#finishedBytes += job.retainedBytes;
    this.#finishedAll.push(job);
    let mine = this.#finishedOf.get(job.owner);
    if (!mine) this.#finishedOf.set(job.owner, mine = []);
    mine.push(job);
    while (this.#kept(mine) > this.limits.finishedJobsPerOwner) this.#drop(mine.shift()!);
    while (
      this.#finished > this.limits.finishedJobsTotal ||
      this.#finishedBytes > this.limits.finishedOutputBytes
    ) {
      const oldest = this.#oldestFinished();
      if (!oldest) break;
      this.#drop(oldest);
    }
    // Dropped jobs leave holes in the lists; compact once they are the majority.
    if (this.#order.length > 2 * this.#jobs.size + 64) {
      this.#order = this.#order.filter((j) => this.#jobs.get(j.id) === j);
    }
    // The front of #finishedAll (up to its head) holds jobs evicted already: released once it
    // is the larger part, and stale entries behind the head once they are the majority, so the
    // list stays within twice what is kept (plus 64) and never holds on to a dropped job's
    // output for long.
    const ahead = this.#finishedAll.length - this.#finishedAllHead;
    if (this.#finishedAllHead > ahead + 64 || ahead > 2 * this.#finished + 64) {
      this.#finishedAll = this.#finishedAll.slice(this.#finishedAllHead)
        .filter((j) => this.#jobs.get(j.id) === j);
      this.#finishedAllHead = 0;
    }
  }

  /** Finished jobs of one owner still in memory (dropping stale entries at the front). */
  #kept(mine: Job[]): number {
    while (mine.length > 0 && this.#jobs.get(mine[0]!.id) !== mine[0]) mine.shift();
    return mine.length;
  }

  #oldestFinished(): Job | undefined {
    while (this.#finishedAllHead < this.#finishedAll.length) {
      const j = this.#finishedAll[this.#finishedAllHead++]!;
      if (this.#jobs.get(j.id) === j) return j;
    }
    return undefined;
  }

  /** Forgets a finished job (the archive has it). */
  #drop(j: Job): void {
    if (this.#jobs.get(j.id) !== j) return;
    this.#jobs.delete(j.id);
    try {
      j.processes?.release?.();
    } catch {
      // what it held in the kernel stays until shutdown: nothing is lost
    }
    this.#finished--;
    this.#finishedBytes -= j.retainedBytes;
    const mine = this.#finishedOf.get(j.owner);
    if (mine) {
      this.#kept(mine);
      if (mine.length === 0) this.#finishedOf.delete(j.owner);
    }
  }

  /**
   * Counts of what is kept in memory (for status and the memory bound's test). `listed`: the
   * entries of the internal lists (creation order, finished order, each owner's), which may
   * still name a dropped job until they are compacted: at most about twice what is kept.
   */
  get kept(): {
    jobs: number;
    finished: number;
    finishedBytes: number;
    sessions: number;
    listed: number;
  } {
    let perOwner = 0;
    for (const l of this.#finishedOf.values()) perOwner += l.length;
    return {
      jobs: this.#jobs.size,
      finished: this.#finished,
      finishedBytes: this.#finishedBytes,
      sessions: this.#sessions.size,
      listed: this.#order.length + this.#finishedAll.length + perOwner,
    };
  }
}

/** A job as exec_list shows it. */
export function summarize(j: Job): JobSummary {
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
    ...(j.reason === undefined ? {} : { reason: j.reason }),
  };
}

/** A session as agents see it. */
export function sessionInfo(s: Session): SessionInfo {
  const info: SessionInfo = {
    session_id: s.id,
    target: s.target,
    shell: s.shell,
    cwd: s.cwd,
    state: s.lease ? "operator" : s.state === "busy" || s.state === "starting" ? "busy" : "ready",
    ...(s.outputPaused ? { output_paused: true } : {}),
    cols: s.cols,
    rows: s.rows,
    created_at: new Date(s.createdAt).toISOString(),
  };
  if (s.workspace !== undefined) info.workspace = s.workspace;
  if (s.job) info.current_job_id = s.job.id;
  if (s.link) {
    info.link = {
      state: s.state === "starting" ? "reconnecting" : "up",
      reconnects: s.link.reconnects,
      ...(s.link.lastError ? { last_error: s.link.lastError } : {}),
    };
  }
  return info;
}
