/**
 * Missions on disk: the mission, its plan steps (with the evidence snapshot of the job that proves
 * each), its session attempts, and the audit records that concern it (anchors; the runtime ones
 * also form its timeline). Every change is one statement or one transaction of the store's
 * database; the caller (src/mission) decides what is allowed.
 */
import type { DatabaseSync, StatementSync } from "node:sqlite";
import type { Clock } from "../shared/mod.ts";
import { notFound } from "../shared/mod.ts";
import { MISSION_TEXT_LIMITS } from "../wire/mod.ts";
import {
  MISSION_STATUSES,
  type MissionStatus,
  STEP_STATUSES,
  type StepStatus,
  TERMINAL_MISSION_STATUSES,
} from "../wire/mod.ts";
import {
  checkId,
  checkInt,
  checkLimit,
  checkNullableSha256,
  checkOneOf,
  checkText,
  checkTime,
  num,
  numOrNull,
  type Params,
  patchParams,
  patchSql,
  type Row,
  type StoreRunner,
  type StoreRunners,
  str,
  strOrNull,
} from "./_checks.ts";

/** Evidence snapshot of one step, as JSON. */
const MAX_EVIDENCE_JSON = 2 * 1024 * 1024;
/** One audit record's data kept with a mission, as JSON (longer data is cut to a summary). */
const MAX_RECORD_DATA_JSON = 16 * 1024;

export const MISSIONS_MIGRATION = `
  ALTER TABLE jobs ADD COLUMN output_sha256 TEXT;
  CREATE INDEX approvals_job ON approvals (job_id);
  CREATE TABLE missions (
    id               TEXT PRIMARY KEY,
    owner            TEXT NOT NULL,
    title            TEXT NOT NULL,
    goal             TEXT NOT NULL,
    target           TEXT NOT NULL,
    workspace        TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('planned', 'running', 'needs_attention',
                       'interrupted', 'succeeded', 'failed', 'cancelled')),
    session_id       TEXT,
    summary          TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    ended_at         INTEGER,
    timeline_count   INTEGER NOT NULL DEFAULT 0,
    timeline_dropped INTEGER NOT NULL DEFAULT 0,
    anchor_count     INTEGER NOT NULL DEFAULT 0,
    anchors_dropped  INTEGER NOT NULL DEFAULT 0,
    report_sha256    TEXT
  ) STRICT;
  CREATE INDEX missions_owner_created ON missions (owner, created_at);
  CREATE INDEX missions_status ON missions (status);
  CREATE TABLE mission_steps (
    mission_id TEXT NOT NULL REFERENCES missions (id) ON DELETE CASCADE,
    idx        INTEGER NOT NULL,
    text       TEXT NOT NULL,
    status     TEXT NOT NULL CHECK (status IN ('pending', 'running', 'passed', 'failed', 'skipped')),
    job_id     TEXT,
    evidence   TEXT CHECK (evidence IS NULL OR json_valid(evidence)),
    note       TEXT,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (mission_id, idx)
  ) STRICT;
  CREATE TABLE mission_sessions (
    session_id TEXT PRIMARY KEY,
    mission_id TEXT NOT NULL REFERENCES missions (id) ON DELETE CASCADE,
    attempt    INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at   INTEGER,
    end_reason TEXT
  ) STRICT;
  CREATE INDEX mission_sessions_mission ON mission_sessions (mission_id, attempt);
  CREATE TABLE mission_records (
    mission_id TEXT NOT NULL REFERENCES missions (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    hash       TEXT NOT NULL,
    event      TEXT NOT NULL,
    at         INTEGER NOT NULL,
    actor      TEXT NOT NULL CHECK (json_valid(actor)),
    data       TEXT NOT NULL CHECK (json_valid(data)),
    timeline   INTEGER NOT NULL CHECK (timeline IN (0, 1)),
    PRIMARY KEY (mission_id, seq)
  ) STRICT;
`;

export interface MissionRow {
  id: string;
  owner: string;
  title: string;
  goal: string;
  target: string;
  workspace: string;
  status: MissionStatus;
  /** The open session of the current attempt; null when none is open. */
  session_id: string | null;
  summary: string | null;
  created_at: number;
  updated_at: number;
  ended_at: number | null;
  timeline_count: number;
  timeline_dropped: number;
  anchor_count: number;
  anchors_dropped: number;
  report_sha256: string | null;
}

export interface StepRow {
  mission_id: string;
  /** 1-based position in the plan. */
  idx: number;
  text: string;
  status: StepStatus;
  job_id: string | null;
  /** What the runtime observed of the job when the step was marked (JSON object). */
  evidence: Record<string, unknown> | null;
  note: string | null;
  updated_at: number;
}

export interface MissionSessionRow {
  session_id: string;
  mission_id: string;
  attempt: number;
  started_at: number;
  ended_at: number | null;
  end_reason: string | null;
}

export interface MissionRecordRow {
  mission_id: string;
  seq: number;
  hash: string;
  event: string;
  at: number;
  actor: { kind: string; id: string };
  data: Record<string, unknown>;
  timeline: boolean;
}

const MISSION_COLUMNS =
  "id, owner, title, goal, target, workspace, status, session_id, summary, created_at, updated_at, ended_at, timeline_count, timeline_dropped, anchor_count, anchors_dropped, report_sha256";
const MISSION_PATCH = [
  "status",
  "session_id",
  "summary",
  "updated_at",
  "ended_at",
  "report_sha256",
] as const;
const STEP_PATCH = ["status", "job_id", "evidence", "note", "updated_at"] as const;
const TERMINAL_SQL = TERMINAL_MISSION_STATUSES.map((s) => `'${s}'`).join(", ");

function toMission(r: Row): MissionRow {
  return {
    id: str(r.id),
    owner: str(r.owner),
    title: str(r.title),
    goal: str(r.goal),
    target: str(r.target),
    workspace: str(r.workspace),
    status: str(r.status) as MissionStatus,
    session_id: strOrNull(r.session_id),
    summary: strOrNull(r.summary),
    created_at: num(r.created_at),
    updated_at: num(r.updated_at),
    ended_at: numOrNull(r.ended_at),
    timeline_count: num(r.timeline_count),
    timeline_dropped: num(r.timeline_dropped),
    anchor_count: num(r.anchor_count),
    anchors_dropped: num(r.anchors_dropped),
    report_sha256: strOrNull(r.report_sha256),
  };
}

function toStep(r: Row): StepRow {
  const ev = strOrNull(r.evidence);
  return {
    mission_id: str(r.mission_id),
    idx: num(r.idx),
    text: str(r.text),
    status: str(r.status) as StepStatus,
    job_id: strOrNull(r.job_id),
    evidence: ev === null ? null : JSON.parse(ev) as Record<string, unknown>,
    note: strOrNull(r.note),
    updated_at: num(r.updated_at),
  };
}

function toSessionRow(r: Row): MissionSessionRow {
  return {
    session_id: str(r.session_id),
    mission_id: str(r.mission_id),
    attempt: num(r.attempt),
    started_at: num(r.started_at),
    ended_at: numOrNull(r.ended_at),
    end_reason: strOrNull(r.end_reason),
  };
}

function toRecord(r: Row): MissionRecordRow {
  return {
    mission_id: str(r.mission_id),
    seq: num(r.seq),
    hash: str(r.hash),
    event: str(r.event),
    at: num(r.at),
    actor: JSON.parse(str(r.actor)) as { kind: string; id: string },
    data: JSON.parse(str(r.data)) as Record<string, unknown>,
    timeline: num(r.timeline) === 1,
  };
}

function nullableText(what: string, v: string | null, max: number): string | null {
  return v === null ? null : checkText(what, v, max);
}

function evidenceJson(v: Record<string, unknown> | null): string | null {
  if (v === null) return null;
  const json = JSON.stringify(v);
  if (json.length > MAX_EVIDENCE_JSON) {
    throw new RangeError(`Cannot store step evidence: over ${MAX_EVIDENCE_JSON} characters`);
  }
  return json;
}

/** Sessions whose mission (or lack of one) MissionStore remembers. */
export const MISSION_OF_SESSION_CACHE = 4096;

/**
 * The mission tables. Built by `Store` over its own database and runners: `run` for a statement,
 * `tx` for a transaction.
 */
export class MissionStore {
  readonly #clock: Clock;
  readonly #run: StoreRunner;
  readonly #tx: StoreRunner;
  readonly #insert: StatementSync;
  readonly #get: StatementSync;
  readonly #list: StatementSync;
  readonly #patch: StatementSync;
  readonly #countActive: StatementSync;
  readonly #insertStep: StatementSync;
  readonly #steps: StatementSync;
  readonly #patchStep: StatementSync;
  readonly #insertSession: StatementSync;
  readonly #endSession: StatementSync;
  readonly #sessions: StatementSync;
  readonly #sessionOwner: StatementSync;
  readonly #counters: StatementSync;
  readonly #insertRecord: StatementSync;
  readonly #bumpRecord: StatementSync;
  readonly #dropRecord: StatementSync;
  readonly #records: StatementSync;
  readonly #timeline: StatementSync;
  readonly #live: StatementSync;
  readonly #interrupt: StatementSync;
  readonly #endOpenSessions: StatementSync;
  /**
   * The mission of a session, memoised (null: none), at most MISSION_OF_SESSION_CACHE entries.
   * Coherent because a session's mission never changes once set and only this repository adds
   * one (create, addSession); the projector asks for every audit record, and most sessions
   * belong to no mission.
   */
  readonly #missionOf = new Map<string, string | null>();

  constructor(db: DatabaseSync, clock: Clock, runners: StoreRunners) {
    this.#clock = clock;
    this.#run = runners.run;
    this.#tx = runners.tx;
    const p = (sql: string) => db.prepare(sql);
    this.#insert = p(
      `INSERT INTO missions (id, owner, title, goal, target, workspace, status, session_id,
         created_at, updated_at)
       VALUES (:id, :owner, :title, :goal, :target, :workspace, 'planned', :session_id, :now, :now)`,
    );
    this.#get = p(`SELECT ${MISSION_COLUMNS} FROM missions WHERE id = ?`);
    this.#list = p(
      `SELECT ${MISSION_COLUMNS} FROM missions
       WHERE (:owner IS NULL OR owner = :owner) AND (:status IS NULL OR status = :status)
       ORDER BY created_at DESC, rowid DESC LIMIT :limit`,
    );
    this.#patch = p(patchSql("missions", MISSION_PATCH));
    this.#countActive = p(
      `SELECT count(*) AS n FROM missions WHERE owner = ? AND status NOT IN (${TERMINAL_SQL})`,
    );
    this.#insertStep = p(
      `INSERT INTO mission_steps (mission_id, idx, text, status, updated_at)
       VALUES (:mission_id, :idx, :text, 'pending', :now)`,
    );
    this.#steps = p(
      `SELECT mission_id, idx, text, status, job_id, evidence, note, updated_at
       FROM mission_steps WHERE mission_id = ? ORDER BY idx`,
    );
    this.#patchStep = p(
      patchSql("mission_steps", STEP_PATCH).replace(
        "WHERE id = :id",
        "WHERE mission_id = :id AND idx = :idx",
      ),
    );
    this.#insertSession = p(
      `INSERT INTO mission_sessions (session_id, mission_id, attempt, started_at)
       VALUES (:session_id, :mission_id,
         (SELECT count(*) + 1 FROM mission_sessions WHERE mission_id = :mission_id), :now)
       RETURNING attempt`,
    );
    this.#endSession = p(
      `UPDATE mission_sessions SET ended_at = :now, end_reason = :reason
       WHERE session_id = :session_id AND ended_at IS NULL RETURNING mission_id`,
    );
    this.#sessions = p(
      `SELECT session_id, mission_id, attempt, started_at, ended_at, end_reason
       FROM mission_sessions WHERE mission_id = ? ORDER BY attempt`,
    );
    this.#sessionOwner = p(
      `SELECT session_id, mission_id, attempt, started_at, ended_at, end_reason
       FROM mission_sessions WHERE session_id = ?`,
    );
    this.#counters = p(
      "SELECT timeline_count, anchor_count FROM missions WHERE id = ?",
    );
    this.#insertRecord = p(
      `INSERT OR IGNORE INTO mission_records (mission_id, seq, hash, event, at, actor, data, timeline)
       VALUES (:mission_id, :seq, :hash, :event, :at, :actor, :data, :timeline)`,
    );
    this.#bumpRecord = p(
      `UPDATE missions SET anchor_count = anchor_count + 1,
         timeline_count = timeline_count + :timeline,
         timeline_dropped = timeline_dropped + :dropped
       WHERE id = :id`,
    );
    this.#dropRecord = p(
      `UPDATE missions SET anchors_dropped = anchors_dropped + 1,
         timeline_dropped = timeline_dropped + :timeline
       WHERE id = :id`,
    );
    this.#records = p(
      `SELECT mission_id, seq, hash, event, at, actor, data, timeline
       FROM mission_records WHERE mission_id = ? ORDER BY seq`,
    );
    this.#timeline = p(
      `SELECT * FROM (SELECT mission_id, seq, hash, event, at, actor, data, timeline
         FROM mission_records WHERE mission_id = :id AND timeline = 1
         ORDER BY seq DESC LIMIT :limit) ORDER BY seq`,
    );
    this.#live = p(
      `SELECT id, status FROM missions WHERE status NOT IN (${TERMINAL_SQL}, 'interrupted')`,
    );
    this.#interrupt = p(
      `UPDATE missions SET status = 'interrupted', session_id = NULL, updated_at = :now
       WHERE status NOT IN (${TERMINAL_SQL}, 'interrupted')`,
    );
    this.#endOpenSessions = p(
      `UPDATE mission_sessions SET ended_at = :now, end_reason = :reason
       WHERE ended_at IS NULL RETURNING session_id`,
    );
  }

  /** A new `planned` mission with its steps and first session attempt, in one transaction. */
  create(
    m: Pick<MissionRow, "id" | "owner" | "title" | "goal" | "target" | "workspace">,
    plan: readonly string[],
    sessionId: string,
  ): void {
    const now = this.#clock.now();
    const params: Params = {
      id: checkId("mission id", m.id),
      owner: checkId("mission owner", m.owner),
      title: checkText("mission title", m.title, MISSION_TEXT_LIMITS.title),
      goal: checkText("mission goal", m.goal, MISSION_TEXT_LIMITS.goal),
      target: checkText("mission target", m.target, 256),
      workspace: checkText("mission workspace", m.workspace, 256),
      session_id: checkId("session id", sessionId),
      now,
    };
    checkInt("plan length", plan.length, 1, 24);
    const steps = plan.map((t, i) => ({
      mission_id: m.id,
      idx: i + 1,
      text: checkText(`step ${i + 1}`, t, MISSION_TEXT_LIMITS.step),
      now,
    }));
    this.#tx(`record mission "${m.id}"`, () => {
      this.#insert.run(params);
      for (const s of steps) this.#insertStep.run(s);
      this.#insertSession.get({ session_id: sessionId, mission_id: m.id, now });
    });
    this.#missionOf.delete(sessionId);
  }

  get(id: string): MissionRow | undefined {
    const row = this.#run(`read mission "${id}"`, () => this.#get.get(checkId("mission id", id)));
    return row === undefined ? undefined : toMission(row as Row);
  }

  /** Missions newest first, optionally of one owner and/or one status. */
  list(filter: { owner?: string; status?: MissionStatus; limit: number }): MissionRow[] {
    const params: Params = {
      owner: filter.owner === undefined ? null : checkId("mission owner", filter.owner),
      status: filter.status === undefined
        ? null
        : checkOneOf("mission status", filter.status, MISSION_STATUSES),
      limit: checkLimit(filter.limit),
    };
    return this.#run("list missions", () => this.#list.all(params).map((r) => toMission(r as Row)));
  }

  /** Missions of `owner` that are not terminal (interrupted ones count). */
  countActive(owner: string): number {
    const row = this.#run("count missions", () => this.#countActive.get(owner)) as Row;
    return num(row.n);
  }

  /** Changes the given fields (updated_at is always set to now). NOT_FOUND if unknown. */
  update(
    id: string,
    patch: Partial<Pick<MissionRow, "status" | "session_id" | "summary" | "ended_at">> & {
      report_sha256?: string;
    },
  ): void {
    const v = {
      status: patch.status === undefined
        ? undefined
        : checkOneOf("mission status", patch.status, MISSION_STATUSES),
      session_id: patch.session_id === undefined
        ? undefined
        : patch.session_id === null
        ? null
        : checkId("session id", patch.session_id),
      summary: patch.summary === undefined
        ? undefined
        : nullableText("mission summary", patch.summary, MISSION_TEXT_LIMITS.summary),
      ended_at: patch.ended_at === undefined
        ? undefined
        : patch.ended_at === null
        ? null
        : checkTime("mission ended_at", patch.ended_at),
      report_sha256: patch.report_sha256 === undefined
        ? undefined
        : checkNullableSha256("report sha256", patch.report_sha256),
      updated_at: this.#clock.now(),
    };
    const params = patchParams(checkId("mission id", id), MISSION_PATCH, v);
    const r = this.#run(`update mission "${id}"`, () => this.#patch.run(params));
    if (Number(r.changes) === 0) throw notFound("mission", id);
  }

  steps(missionId: string): StepRow[] {
    return this.#run(
      `read the plan of "${missionId}"`,
      () => this.#steps.all(missionId).map((r) => toStep(r as Row)),
    );
  }

  /** Changes one step (absent fields kept) and touches the mission, in one transaction. */
  updateStep(
    missionId: string,
    idx: number,
    patch: Partial<Pick<StepRow, "status" | "job_id" | "evidence" | "note">>,
  ): void {
    const v = {
      status: patch.status === undefined
        ? undefined
        : checkOneOf("step status", patch.status, STEP_STATUSES),
      job_id: patch.job_id === undefined
        ? undefined
        : patch.job_id === null
        ? null
        : checkId("job id", patch.job_id),
      evidence: patch.evidence === undefined ? undefined : evidenceJson(patch.evidence),
      note: patch.note === undefined
        ? undefined
        : nullableText("step note", patch.note, MISSION_TEXT_LIMITS.note),
      updated_at: this.#clock.now(),
    };
    const params = { ...patchParams(missionId, STEP_PATCH, v), idx: checkInt("step", idx, 1, 24) };
    this.#tx(`update step ${idx} of "${missionId}"`, () => {
      const r = this.#patchStep.run(params);
      if (Number(r.changes) === 0) throw notFound("step", `s${idx}`);
      this.#patch.run(patchParams(missionId, MISSION_PATCH, { updated_at: v.updated_at }));
    });
  }

  /** A new session attempt of the mission (it becomes the mission's current session). */
  addSession(missionId: string, sessionId: string): number {
    const now = this.#clock.now();
    const attempt = this.#tx(`record a session of "${missionId}"`, () => {
      const row = this.#insertSession.get({
        session_id: checkId("session id", sessionId),
        mission_id: checkId("mission id", missionId),
        now,
      }) as Row;
      this.#patch.run(
        patchParams(missionId, MISSION_PATCH, { session_id: sessionId, updated_at: now }),
      );
      return num(row.attempt);
    });
    this.#missionOf.delete(sessionId);
    return attempt;
  }

  /** Marks a session attempt ended; returns its mission id (undefined if not a mission's). */
  endSession(sessionId: string, reason: string): string | undefined {
    const row = this.#run(`end mission session "${sessionId}"`, () =>
      this.#endSession.get({
        session_id: sessionId,
        reason: checkText("end reason", reason),
        now: this.#clock.now(),
      })) as Row | undefined;
    return row === undefined ? undefined : str(row.mission_id);
  }

  sessions(missionId: string): MissionSessionRow[] {
    return this.#run(
      `read the sessions of "${missionId}"`,
      () => this.#sessions.all(missionId).map((r) => toSessionRow(r as Row)),
    );
  }

  /** The id of the mission a session belongs to, if any (memoised: see #missionOf). */
  missionOfSession(sessionId: string): string | undefined {
    const known = this.#missionOf.get(sessionId);
    if (known !== undefined) return known ?? undefined;
    const id = this.sessionRow(sessionId)?.mission_id ?? null;
    if (this.#missionOf.size >= MISSION_OF_SESSION_CACHE) {
      this.#missionOf.delete(this.#missionOf.keys().next().value!);
    }
    this.#missionOf.set(sessionId, id);
    return id ?? undefined;
  }

  /** The mission a session belongs to, if any. */
  sessionRow(sessionId: string): MissionSessionRow | undefined {
    const row = this.#run("read a mission session", () => this.#sessionOwner.get(sessionId));
    return row === undefined ? undefined : toSessionRow(row as Row);
  }

  /**
   * Keeps an audit record with the mission: always as an anchor while fewer than `caps.anchors`
   * are kept, in the timeline too when `timeline` and fewer than `caps.timeline` are. What does
   * not fit is counted (anchors_dropped, timeline_dropped). A record already kept is ignored.
   */
  addRecord(
    r: Omit<MissionRecordRow, "timeline"> & { timeline: boolean },
    caps: { timeline: number; anchors: number },
  ): void {
    let data = JSON.stringify(r.data);
    if (data.length > MAX_RECORD_DATA_JSON) {
      data = JSON.stringify({ truncated: true, bytes: data.length });
    }
    this.#tx(`record an audit anchor of "${r.mission_id}"`, () => {
      const c = this.#counters.get(r.mission_id) as Row | undefined;
      if (c === undefined) return;
      const tl = r.timeline ? 1 : 0;
      if (num(c.anchor_count) >= caps.anchors) {
        this.#dropRecord.run({ id: r.mission_id, timeline: tl });
        return;
      }
      const inTimeline = tl === 1 && num(c.timeline_count) < caps.timeline ? 1 : 0;
      const ins = this.#insertRecord.run({
        mission_id: r.mission_id,
        seq: checkInt("audit seq", r.seq, 1),
        hash: checkText("audit hash", r.hash, 128),
        event: checkText("audit event", r.event, 128),
        at: checkTime("audit time", r.at),
        actor: JSON.stringify(r.actor),
        data,
        timeline: inTimeline,
      });
      if (Number(ins.changes) === 0) return;
      this.#bumpRecord.run({ id: r.mission_id, timeline: inTimeline, dropped: tl - inTimeline });
    });
  }

  /** Every kept record of the mission, in audit order. */
  records(missionId: string): MissionRecordRow[] {
    return this.#run(
      `read the records of "${missionId}"`,
      () => this.#records.all(missionId).map((r) => toRecord(r as Row)),
    );
  }

  /** The last `limit` timeline entries, in audit order. */
  timeline(missionId: string, limit: number): MissionRecordRow[] {
    return this.#run(
      `read the timeline of "${missionId}"`,
      () =>
        this.#timeline.all({ id: missionId, limit: checkLimit(limit) }).map((r) =>
          toRecord(r as Row)
        ),
    );
  }

  /**
   * At daemon start: every mission that is neither terminal nor interrupted becomes interrupted
   * (its PTY died with the daemon) and every open session attempt ends. One transaction.
   */
  interruptAll(reason: string): { id: string; from: MissionStatus }[] {
    const now = this.#clock.now();
    return this.#tx("interrupt missions", () => {
      // Read the live ones first (RETURNING would give the new status), under the same lock.
      const live = this.#live.all().map((r) => ({
        id: str((r as Row).id),
        from: str((r as Row).status) as MissionStatus,
      }));
      this.#interrupt.run({ now });
      this.#endOpenSessions.run({ now, reason: checkText("reason", reason) });
      return live;
    });
  }
}
