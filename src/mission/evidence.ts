/**
 * The runtime's checks behind a mission's claims: a job offered as a step's proof is looked up in
 * the engine (and SQLite), its session, status and exit code checked and its facts snapshotted;
 * a mission may succeed only on a closed plan with no job still active in its sessions. The
 * checks throw and never write: the service audits and stores what passes.
 */
import type { Job } from "../control/mod.ts";
import { createHash } from "node:crypto";
import type { AdapterRunView, ExecListInput, JobList } from "../wire/mod.ts";
import { isActiveStatus } from "../wire/mod.ts";
import { type Clock, invalidArgument, TermadaError } from "../shared/mod.ts";
import type { MissionRow, StepRow, Store } from "../store/mod.ts";
import { type AdapterEvidence, iso, type JobEvidence, stepId } from "./view.ts";

/** What the checks need of the runtime (a part of the service's MissionRuntime). */
export interface EvidenceRuntime {
  job(agent: string, jobId: string): Job;
  listJobs(agent: string, req: ExecListInput): JobList;
  /** One of the agent's adapter runs (NOT_FOUND otherwise); absent: no adapters here. */
  adapterRun?(agent: string, runId: string): AdapterRunView;
}

export interface EvidenceChecksOptions {
  runtime: EvidenceRuntime;
  store: Pick<Store, "missions" | "jobs" | "approvals">;
  clock: Clock;
}

/** The ids of every session attempt of a mission, closed ones included. */
export function missionSessionIds(store: Pick<Store, "missions">, missionId: string): Set<string> {
  return new Set(store.missions.sessions(missionId).map((s) => s.session_id));
}

export class EvidenceChecks {
  readonly #runtime: EvidenceRuntime;
  readonly #store: Pick<Store, "missions" | "jobs" | "approvals">;
  readonly #clock: Clock;

  constructor(options: EvidenceChecksOptions) {
    this.#runtime = options.runtime;
    this.#store = options.store;
    this.#clock = options.clock;
  }

  /**
   * The runtime's check of a job offered as evidence; the snapshot kept with the step. With
   * `mustPass` the job must have exited with code 0.
   */
  snapshot(m: MissionRow, jobId: string, options: { mustPass: boolean }): JobEvidence {
    let job: Job;
    try {
      job = this.#runtime.job(m.owner, jobId);
    } catch (err) {
      if (err instanceof TermadaError && err.code === "NOT_FOUND") {
        throw new TermadaError("NOT_FOUND", `No job "${jobId}" of yours`, {
          hint: "Pass the job_id an exec_run/exec_start result gave you in this mission's session",
        });
      }
      throw err;
    }
    const sessions = missionSessionIds(this.#store, m.id);
    if (!sessions.has(job.sessionId)) {
      throw invalidArgument(
        `Job ${jobId} ran in ${
          job.sessionId === "background" ? "no session" : `session ${job.sessionId}`
        }, not in a session of mission ${m.id}`,
        `Run the step's command with exec_run {session: "${
          m.session_id ?? [...sessions].pop()
        }"} and pass that job`,
      );
    }
    if (options.mustPass) {
      if (!job.final) {
        throw new TermadaError(
          "INVALID_ARGUMENT",
          `Job ${jobId} is still ${job.status}: a step passes only on a job that ended`,
          { retriable: true, hint: `Wait for it: exec_wait {job_id: "${jobId}"}` },
        );
      }
      if (job.status !== "exited") {
        throw invalidArgument(
          `Job ${jobId} ended ${job.status}${
            job.reason ? ` (${job.reason})` : ""
          }: a step passes only on a job that exited with code 0`,
        );
      }
      if (job.exitCode !== 0) {
        throw invalidArgument(
          `Job ${jobId} exited with code ${job.exitCode}: a step passes only on exit code 0`,
          "Mark the step failed with this job, or fix the problem and run the check again",
        );
      }
    }
    const row = this.#store.jobs.get(jobId);
    const approval = this.#store.approvals.ofJob(jobId);
    const ev: JobEvidence = {
      job_id: job.id,
      session_id: job.sessionId,
      command: [...job.command],
      status: job.status,
      started_at: iso(job.startedAt),
      duration_ms: job.durationMs,
      output_bytes: row?.output_bytes ?? job.buffer.totalBytes,
      output_sha256: row?.output_sha256 ?? null,
      checked_at: iso(this.#clock.now()),
    };
    if (job.exitCode !== undefined) ev.exit_code = job.exitCode;
    if (job.exitSource !== undefined) ev.exit_source = job.exitSource;
    if (job.signal !== undefined) ev.signal = job.signal;
    if (job.cwd !== undefined) ev.cwd = job.cwd;
    if (job.endedAt !== undefined) ev.ended_at = iso(job.endedAt);
    if (approval) {
      ev.approval = {
        approval_id: approval.id,
        status: approval.status,
        decided_by: approval.decided_by,
        decided_at: approval.decided_at === null ? null : iso(approval.decided_at),
        rule: approval.rule,
      };
    }
    return ev;
  }

  /**
   * The runtime's check of an adapter run offered as evidence. With `mustPass` the run must be
   * `verified` (its effect observed after it was executed); it must have been made for this
   * mission (started after the mission was created, by its owner).
   */
  adapterSnapshot(m: MissionRow, runId: string, options: { mustPass: boolean }): AdapterEvidence {
    if (!this.#runtime.adapterRun) {
      throw new TermadaError("NOT_SUPPORTED", "This server runs no adapters");
    }
    const run = this.#runtime.adapterRun(m.owner, runId);
    if (Date.parse(run.created_at) < m.created_at) {
      throw invalidArgument(
        `Adapter run ${runId} was made before mission ${m.id}: a step passes only on work done for it`,
        "Run the adapter again for this mission and pass that run",
      );
    }
    if (options.mustPass && run.phase !== "verified") {
      throw invalidArgument(
        `Adapter run ${runId} is ${run.phase}: a step passes only on a verified run`,
        run.phase === "outcome_unknown"
          ? "An operator must settle what happened; mark the step failed or run it again"
          : "Mark the step failed with this run, or fix the problem and run it again",
      );
    }
    const receipt = run.receipt === undefined ? null : JSON.stringify(run.receipt);
    return {
      kind: "adapter",
      run_id: run.run_id,
      adapter: run.adapter,
      phase: run.phase,
      resource: run.resource,
      summary: run.summary,
      receipt_sha256: receipt === null ? null : createHash("sha256").update(receipt).digest("hex"),
      created_at: run.created_at,
      updated_at: run.updated_at,
      checked_at: iso(this.#clock.now()),
    };
  }

  /**
   * Throws unless the mission can succeed with these steps: every one passed or skipped, at
   * least one passed, and no job active in any of its sessions.
   */
  checkSuccess(m: MissionRow, steps: readonly Pick<StepRow, "idx" | "status">[]): void {
    const open = steps.filter((s) => s.status !== "passed" && s.status !== "skipped");
    if (open.length > 0) {
      throw invalidArgument(
        `Mission ${m.id} cannot succeed: ${
          open.map((s) => `${stepId(s.idx)} is ${s.status}`).join(", ")
        }`,
        "Every step must be passed (with its job) or skipped",
      );
    }
    if (!steps.some((s) => s.status === "passed")) {
      throw invalidArgument(
        `Mission ${m.id} cannot succeed: no step passed with runtime evidence`,
      );
    }
    const sessions = missionSessionIds(this.#store, m.id);
    const active = this.#runtime.listJobs(m.owner, { filter: "active", limit: 200 }).jobs
      .filter((j) => sessions.has(j.session_id) && isActiveStatus(j.status));
    if (active.length > 0) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Mission ${m.id} cannot succeed while ${
          active.map((j) => `${j.job_id} is ${j.status}`).join(", ")
        }`,
        { retriable: true, hint: "Wait for the job to end or kill it, then try again" },
      );
    }
  }
}
