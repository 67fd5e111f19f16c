/**
 * Wires the engine's hooks to durable state: sessions and jobs in SQLite, each job's cleaned
 * output in a bounded spool on disk, so that after a restart (or a crash) every job listed
 * before is still listed and its output is still pageable by cursor.
 */
import { createHash, type Hash } from "node:crypto";
import {
  type EngineHooks,
  Job,
  type JobRecord,
  type JobStatus,
  type JobSummary,
  type OutputReader,
} from "../engine/mod.ts";
import type { Page, Summary } from "../output/mod.ts";
import { encodeCursor } from "../output/mod.ts";
import { type Clock, logger } from "../shared/mod.ts";
import { type JobRow, removeSpool, SpoolReader, SpoolWriter, type Store } from "../store/mod.ts";

const log = logger("daemon");

export interface PersistOptions {
  spoolDir: string;
  spoolMaxBytes: number;
  finishedPerAgent: number;
  clock: Clock;
}

/** Never let a storage failure take the engine down: log it once per kind and go on. */
function guard<A extends unknown[], R>(
  what: string,
  f: (...a: A) => R,
): (...a: A) => R | undefined {
  let reported = false;
  return (...a: A) => {
    try {
      return f(...a);
    } catch (err) {
      if (!reported) log.error(`storage: ${what} failed`, { error: err });
      reported = true;
      return undefined;
    }
  };
}

const EMPTY_READER = {
  totalBytes: 0,
  startOffset: 0,
  read(): Page {
    return { output: "", nextCursor: encodeCursor(0), hasMore: false };
  },
  summary(): Summary {
    return { output: "", nextCursor: encodeCursor(0), hasMore: false };
  },
};

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

export function storeHooks(store: Store, options: PersistOptions): EngineHooks {
  const spools = new Map<string, SpoolWriter>();
  // SHA-256 of each job's whole recorded output, kept as it streams (evidence for missions:
  // it stays exact even when the spool's retention drops old segments).
  const hashes = new Map<string, Hash>();
  const { clock, spoolDir } = options;
  return {
    sessionOpened: guard("session insert", (info, owner) => {
      store.insertSession({
        id: info.session_id,
        owner,
        shell: info.shell,
        target: info.target,
        cwd: info.cwd,
        workspace: info.workspace ?? null,
        cols: info.cols,
        rows: info.rows,
        created_at: Date.parse(info.created_at),
      });
    }),
    sessionUpdated: guard("session update", (id, patch) => store.updateSession(id, patch)),
    sessionClosed: guard("session close", (id, reason) => {
      store.updateSession(id, { state: "closed", closed_at: clock.now(), close_reason: reason });
    }),
    jobStarted: guard("job insert", (job: Job) => {
      store.insertJob({
        id: job.id,
        owner: job.owner,
        session_id: job.sessionId,
        command: [...job.command],
        mode: job.mode,
        status: job.status,
        cwd: job.cwd ?? null,
        started_at: job.startedAt,
      });
      hashes.set(job.id, createHash("sha256"));
      spools.set(job.id, SpoolWriter.create(spoolDir, job.id, { maxBytes: options.spoolMaxBytes }));
    }),
    jobStatus: guard("job status", (job: Job) => store.updateJob(job.id, { status: job.status })),
    // Written through (no buffering in between): output an agent has been shown must survive
    // a crash of the daemon. The page cache makes this a cheap write per chunk.
    jobOutput: guard("spool append", (job: Job, bytes: Uint8Array) => {
      hashes.get(job.id)?.update(bytes);
      const spool = spools.get(job.id);
      if (!spool) return;
      spool.append(bytes);
      spool.flush();
    }),
    jobEnded: guard("job update", (job: Job) => {
      const spool = spools.get(job.id);
      spools.delete(job.id);
      spool?.end();
      const hash = hashes.get(job.id);
      hashes.delete(job.id);
      store.updateJob(job.id, {
        status: job.status,
        exit_code: job.exitCode ?? null,
        signal: job.signal ?? null,
        reason: job.reason ?? null,
        cwd: job.cwd ?? null,
        ended_at: job.endedAt ?? clock.now(),
        output_bytes: job.buffer.totalBytes,
        ...(hash ? { output_sha256: hash.digest("hex") } : {}),
      });
      for (const id of store.pruneJobs(job.owner, options.finishedPerAgent)) {
        removeSpool(spoolDir, id);
      }
    }),
    findJob: guard("job lookup", (owner: string, id: string) => {
      if (!/^job_[0-9a-z]{12}$/.test(id)) return undefined;
      const row = store.getJob(id);
      if (!row || row.owner !== owner) return undefined;
      const spool = SpoolReader.open(spoolDir, id);
      const reader: OutputReader = spool
        ? {
          read: (cursor, max) => spool.read(cursor, max),
          summary: (h, t) => spool.summary(h, t),
          get totalBytes() {
            return spool.totalBytes;
          },
          startOffset: 0, // only a floor for pattern scans; deleted segments read as a gap
        }
        : EMPTY_READER;
      return Job.archived(toRecord(row), reader, clock);
    }),
    listJobs: guard("job list", (owner: string, f) => {
      return store.listJobs({
        owner,
        active: f.active,
        startedAfter: f.startedAfter,
        limit: f.limit,
      })
        .map((r) => toSummary(r, clock));
    }) as EngineHooks["listJobs"],
  };
}

/** Runs several hook sets in order (each hook guarded by its own implementation). */
export function combineHooks(...sets: EngineHooks[]): EngineHooks {
  const out: EngineHooks = {};
  const keys = [
    "sessionOpened",
    "sessionUpdated",
    "sessionClosed",
    "jobStarted",
    "jobStatus",
    "jobOutput",
    "jobEnded",
  ] as const;
  for (const k of keys) {
    const fns = sets.map((s) => s[k]).filter((f) => f !== undefined);
    if (fns.length === 0) continue;
    // deno-lint-ignore no-explicit-any
    (out as any)[k] = (...args: unknown[]) => {
      // deno-lint-ignore no-explicit-any
      for (const f of fns) (f as any)(...args);
    };
  }
  out.findJob = sets.find((s) => s.findJob)?.findJob;
  out.listJobs = sets.find((s) => s.listJobs)?.listJobs;
  return out;
}

/** Jobs an operator typed into a session they took over are owned by "operator:<id>". */
function actorOf(owner: string): { kind: "agent" | "system"; id: string } {
  return owner.startsWith("operator:")
    ? { kind: "operator" as "agent", id: owner.slice("operator:".length) }
    : { kind: "agent", id: owner };
}

/** Audit records for what the engine does on its own: sessions opening/closing, jobs ending. */
export function auditHooks(
  audit: {
    record(
      actor: { kind: "agent" | "system"; id: string },
      event: string,
      data?: Record<string, unknown>,
    ): void;
  },
): EngineHooks {
  const safe = guard(
    "audit",
    (
      actor: { kind: "agent" | "system"; id: string },
      event: string,
      data: Record<string, unknown>,
    ) => audit.record(actor, event, data),
  );
  return {
    sessionOpened: (info, owner) =>
      safe({ kind: "agent", id: owner }, "session.created", {
        session_id: info.session_id,
        shell: info.shell,
        cwd: info.cwd,
      }),
    sessionClosed: (id, reason) =>
      safe({ kind: "system", id: "termada" }, "session.closed", { session_id: id, reason }),
    jobEnded: (job) =>
      safe(actorOf(job.owner), "job.finished", {
        job_id: job.id,
        status: job.status,
        ...(job.exitCode === undefined ? {} : { exit_code: job.exitCode }),
        ...(job.signal === undefined ? {} : { signal: job.signal }),
        ...(job.reason === undefined ? {} : { reason: job.reason }),
        duration_ms: job.durationMs,
        output_bytes: job.buffer.totalBytes,
      }),
  };
}
