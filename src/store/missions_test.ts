import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { type Clock, TermadaError } from "../shared/mod.ts";
import { MIGRATIONS, SCHEMA_VERSION, Store } from "./db.ts";
import { MISSION_OF_SESSION_CACHE } from "./missions.ts";
import { pragma } from "./_testing.ts";

function clock(start = 1_700_000_000_000): Clock & { tick(ms: number): void } {
  let t = start;
  return { now: () => t, mono: () => t, tick: (ms) => (t += ms) };
}

function withStore(fn: (store: Store, c: ReturnType<typeof clock>, path: string) => void): void {
  const dir = Deno.makeTempDirSync({ prefix: "termada-missions-" });
  const c = clock();
  const store = Store.open(`${dir}/termada.db`, { clock: c });
  try {
    fn(store, c, `${dir}/termada.db`);
  } finally {
    store.close();
    Deno.removeSync(dir, { recursive: true });
  }
}

const isCode = (code: string) => (e: unknown): boolean =>
  e instanceof TermadaError && e.code === code;

const M = {
  id: "msn_aaaaaaaaaaaa",
  owner: "dev",
  title: "Fix the service",
  goal: "Make it answer 200",
  target: "local",
  workspace: "demo",
};

Deno.test("a mission is created with its steps and first attempt in one transaction", () => {
  withStore((store, c) => {
    store.missions.create(M, ["probe", "fix", "verify"], "ses_1");
    const m = store.missions.get(M.id)!;
    assert.equal(m.status, "planned");
    assert.equal(m.session_id, "ses_1");
    assert.deepEqual(store.missions.steps(M.id).map((s) => [s.idx, s.text, s.status]), [
      [1, "probe", "pending"],
      [2, "fix", "pending"],
      [3, "verify", "pending"],
    ]);
    assert.deepEqual(store.missions.sessions(M.id).map((s) => [s.session_id, s.attempt]), [
      ["ses_1", 1],
    ]);
    assert.equal(store.missions.sessionRow("ses_1")?.mission_id, M.id);
    assert.equal(store.missions.countActive("dev"), 1);

    // A bad step leaves nothing behind (the whole create is refused before it writes).
    assert.throws(
      () => store.missions.create({ ...M, id: "msn_bbbbbbbbbbbb" }, ["ok", "x".repeat(301)], "s2"),
      isCode("INVALID_ARGUMENT"),
    );
    assert.throws(
      () => store.missions.create({ ...M, id: "msn_bbbbbbbbbbbb" }, [], "s2"),
      isCode("INVALID_ARGUMENT"),
    );
    // A duplicate session id fails inside the transaction: the mission row is rolled back.
    assert.throws(
      () => store.missions.create({ ...M, id: "msn_cccccccccccc" }, ["a"], "ses_1"),
      isCode("INTERNAL"),
    );
    assert.equal(store.missions.get("msn_cccccccccccc"), undefined);
    assert.deepEqual(store.missions.steps("msn_cccccccccccc"), []);

    c.tick(5);
    store.missions.updateStep(M.id, 2, {
      status: "passed",
      job_id: "job_x",
      evidence: { exit_code: 0 },
      note: "done",
    });
    const s2 = store.missions.steps(M.id)[1]!;
    assert.deepEqual([s2.status, s2.job_id, s2.evidence, s2.note], [
      "passed",
      "job_x",
      { exit_code: 0 },
      "done",
    ]);
    assert.equal(store.missions.get(M.id)!.updated_at, s2.updated_at);
    assert.throws(
      () => store.missions.updateStep(M.id, 9, { status: "passed" }),
      isCode("NOT_FOUND"),
    );
    assert.throws(
      () => store.missions.updateStep(M.id, 1, { status: "done" as "passed" }),
      isCode("INVALID_ARGUMENT"),
    );
    assert.throws(
      () => store.missions.update("msn_zzzzzzzzzzzz", { status: "running" }),
      isCode("NOT_FOUND"),
    );
  });
});

Deno.test("the mission of a session is remembered, misses too, and a new attempt is seen at once", () => {
  withStore((store) => {
    // Asked before the session belongs to any mission (every audit record asks): a miss.
    assert.equal(store.missions.missionOfSession("ses_1"), undefined);
    assert.equal(store.missions.missionOfSession("ses_2"), undefined);
    store.missions.create(M, ["probe"], "ses_1");
    assert.equal(store.missions.missionOfSession("ses_1"), M.id, "create forgets the miss");
    store.missions.update(M.id, { status: "interrupted" });
    store.missions.addSession(M.id, "ses_2");
    assert.equal(store.missions.missionOfSession("ses_2"), M.id, "addSession forgets the miss");
    assert.equal(store.missions.missionOfSession("ses_3"), undefined);
    // Bounded: far more sessions than the memo holds still answer correctly.
    for (let i = 0; i < MISSION_OF_SESSION_CACHE + 10; i++) {
      assert.equal(store.missions.missionOfSession(`ses_x${i}`), undefined);
    }
    assert.equal(store.missions.missionOfSession("ses_1"), M.id);
  });
});

Deno.test("records keep anchors and a timeline up to their bounds and count the rest", () => {
  withStore((store) => {
    store.missions.create(M, ["a"], "ses_1");
    const rec = (seq: number, timeline: boolean) => ({
      mission_id: M.id,
      seq,
      hash: "h".repeat(64),
      event: timeline ? "job.finished" : "mission.updated",
      at: 1000 + seq,
      actor: { kind: "agent", id: "dev" },
      data: { seq },
      timeline,
    });
    const caps = { timeline: 3, anchors: 5 };
    for (let i = 1; i <= 4; i++) store.missions.addRecord(rec(i, true), caps);
    store.missions.addRecord(rec(4, true), caps); // the same record twice is kept once
    store.missions.addRecord(rec(5, false), caps);
    store.missions.addRecord(rec(6, true), caps); // over the anchor bound
    store.missions.addRecord(rec(7, false), caps);
    const m = store.missions.get(M.id)!;
    assert.deepEqual(
      [m.anchor_count, m.anchors_dropped, m.timeline_count, m.timeline_dropped],
      [5, 2, 3, 2],
    );
    assert.deepEqual(store.missions.records(M.id).map((r) => r.seq), [1, 2, 3, 4, 5]);
    assert.deepEqual(store.missions.timeline(M.id, 2).map((r) => r.seq), [2, 3]);
    assert.deepEqual(store.missions.records(M.id)[0]!.data, { seq: 1 });
    // Oversized data is kept as a note of its size, never as a failed insert.
    store.missions.create({ ...M, id: "msn_dddddddddddd" }, ["a"], "ses_2");
    store.missions.addRecord({
      ...rec(9, true),
      mission_id: "msn_dddddddddddd",
      data: { big: "x".repeat(20_000) },
    }, caps);
    assert.equal(store.missions.records("msn_dddddddddddd")[0]!.data.truncated, true);
    // A record for an unknown mission is ignored.
    store.missions.addRecord({ ...rec(10, true), mission_id: "msn_eeeeeeeeeeee" }, caps);
  });
});

Deno.test("interruptAll turns live missions interrupted and ends their open attempts; terminal ones stay", () => {
  withStore((store) => {
    store.missions.create(M, ["a"], "ses_1");
    store.missions.create({ ...M, id: "msn_bbbbbbbbbbbb" }, ["a"], "ses_2");
    store.missions.create({ ...M, id: "msn_cccccccccccc" }, ["a"], "ses_3");
    store.missions.update("msn_bbbbbbbbbbbb", { status: "needs_attention" });
    store.missions.update("msn_cccccccccccc", { status: "succeeded", ended_at: 5 });
    const changed = store.missions.interruptAll("restart");
    assert.deepEqual(changed.sort((a, b) => a.id.localeCompare(b.id)), [
      { id: M.id, from: "planned" },
      { id: "msn_bbbbbbbbbbbb", from: "needs_attention" },
    ]);
    assert.equal(store.missions.get(M.id)!.status, "interrupted");
    assert.equal(store.missions.get(M.id)!.session_id, null);
    assert.equal(store.missions.get("msn_cccccccccccc")!.status, "succeeded");
    assert.equal(store.missions.sessions(M.id)[0]!.end_reason, "restart");
    assert.deepEqual(store.missions.interruptAll("again"), []);
    // A new attempt becomes the current session with the next attempt number.
    assert.equal(store.missions.addSession(M.id, "ses_4"), 2);
    assert.equal(store.missions.get(M.id)!.session_id, "ses_4");
    assert.equal(store.missions.endSession("ses_4", "closed"), M.id);
    assert.equal(store.missions.endSession("ses_4", "closed"), undefined, "ends once");
    assert.equal(store.missions.endSession("ses_nope", "closed"), undefined);
    assert.deepEqual(
      store.missions.list({ owner: "dev", status: "interrupted", limit: 10 }).map((m) => m.id)
        .sort(),
      [M.id, "msn_bbbbbbbbbbbb"],
    );
    assert.equal(store.missions.countActive("dev"), 2);
  });
});

Deno.test("a database of schema 2 migrates to missions keeping its jobs", () => {
  const dir = Deno.makeTempDirSync({ prefix: "termada-missions-" });
  try {
    const path = `${dir}/termada.db`;
    // Build a version-2 database with the released migrations.
    const db = new DatabaseSync(path);
    for (const sql of MIGRATIONS.slice(0, 2)) db.exec(sql);
    db.exec(`INSERT INTO jobs (id, owner, session_id, command, mode, status, started_at)
      VALUES ('job_aaaaaaaaaaaa', 'dev', 'ses_1', '["true"]', 'foreground', 'exited', 1);
      PRAGMA user_version = 2;`);
    db.close();
    const again = Store.open(path);
    try {
      assert.equal(again.jobs.get("job_aaaaaaaaaaaa")?.output_sha256, null);
      again.jobs.update("job_aaaaaaaaaaaa", { output_sha256: "a".repeat(64) });
      assert.equal(again.jobs.get("job_aaaaaaaaaaaa")?.output_sha256, "a".repeat(64));
      assert.throws(
        () => again.jobs.update("job_aaaaaaaaaaaa", { output_sha256: "xyz" }),
        isCode("INVALID_ARGUMENT"),
      );
      assert.deepEqual(again.missions.list({ limit: 5 }), []);
    } finally {
      again.close();
    }
    assert.equal(pragma(path, "user_version"), SCHEMA_VERSION);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
