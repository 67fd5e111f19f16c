import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { type Clock, TermadaError } from "../shared/mod.ts";
import { type JobRow, MAX_COMMAND_JSON_BYTES, SCHEMA_VERSION, Store } from "./db.ts";

/** A clock the test moves by hand. */
function fakeClock(start = 1_700_000_000_000): Clock & { set(t: number): void } {
  let t = start;
  return { now: () => t, mono: () => t, set: (v) => (t = v) };
}

function withDb(fn: (path: string, dir: string) => void): void {
  const dir = Deno.makeTempDirSync({ prefix: "termada-store-" });
  try {
    fn(`${dir}/state/termada.db`, dir);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

async function withDbAsync(fn: (path: string) => Promise<void>): Promise<void> {
  const dir = Deno.makeTempDirSync({ prefix: "termada-store-" });
  try {
    await fn(`${dir}/state/termada.db`);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

const isCode = (code: string) => (e: unknown): boolean =>
  e instanceof TermadaError && e.code === code;

const mode = (path: string): number => Deno.statSync(path).mode! & 0o777;

function pragma(path: string, name: string): unknown {
  const db = new DatabaseSync(path);
  try {
    return (db.prepare(`PRAGMA ${name}`).get() as Record<string, unknown>)[name];
  } finally {
    db.close();
  }
}

function session(id: string, owner: string, createdAt: number) {
  return {
    id,
    owner,
    shell: "bash",
    target: "local",
    cwd: "/tmp",
    workspace: null,
    cols: 120,
    rows: 40,
    created_at: createdAt,
  };
}

function job(
  id: string,
  owner: string,
  startedAt: number,
  status = "running",
): Omit<JobRow, "exit_code" | "signal" | "reason" | "ended_at" | "output_bytes" | "output_sha256"> {
  return {
    id,
    owner,
    session_id: "ses_a",
    command: ["echo", id],
    mode: "foreground",
    status,
    cwd: "/tmp",
    started_at: startedAt,
  };
}

Deno.test("Store.open creates a 0600 WAL database at the current schema and reopens it as is", () => {
  withDb((path, dir) => {
    const store = Store.open(path);
    try {
      store.upsertAgent({ id: "agt_1", via: "stdio" });
      assert.equal(mode(path), 0o600);
      assert.equal(mode(`${path}-wal`), 0o600, "SQLite gives the WAL the database's mode");
      assert.equal(mode(`${dir}/state`), 0o700);
    } finally {
      store.close();
    }
    assert.equal(pragma(path, "user_version"), SCHEMA_VERSION);
    assert.equal(pragma(path, "journal_mode"), "wal");

    using again = Store.open(path);
    assert.equal(again.listAgents().length, 1, "reopening keeps the data");
    assert.equal(pragma(path, "user_version"), SCHEMA_VERSION);
  });
});

Deno.test("Store.open creates the indexes for job listing and recovery", () => {
  withDb((path) => {
    Store.open(path).close();
    const db = new DatabaseSync(path);
    try {
      const names = db.prepare("SELECT name FROM sqlite_master WHERE type = 'index'").all()
        .map((r) => r.name);
      assert.ok(names.includes("jobs_owner_started"));
      assert.ok(names.includes("jobs_status"));
      const plan = db.prepare(
        `EXPLAIN QUERY PLAN SELECT id FROM jobs WHERE owner = 'a' AND started_at > 0
         ORDER BY started_at DESC, rowid DESC LIMIT 10`,
      ).all().map((r) => String(r.detail)).join("\n");
      assert.match(plan, /jobs_owner_started/);
      assert.doesNotMatch(plan, /TEMP B-TREE/, "the index gives the order");
    } finally {
      db.close();
    }
  });
});

Deno.test("Store.open refuses a database written by a newer schema, with a hint", () => {
  withDb((path) => {
    Store.open(path).close();
    const db = new DatabaseSync(path);
    db.exec(`PRAGMA user_version = ${SCHEMA_VERSION + 1}`);
    db.close();
    for (let attempt = 0; attempt < 2; attempt++) {
      assert.throws(() => Store.open(path), (e: unknown) => {
        assert.ok(e instanceof TermadaError);
        assert.equal(e.code, "INTERNAL");
        assert.match(e.message, /schema version \d+ is newer/);
        assert.match(e.hint ?? "", /newer Termada/);
        return true;
      });
    }
    assert.equal(pragma(path, "user_version"), SCHEMA_VERSION + 1, "left untouched");
  });
});

Deno.test("Store.open tightens a readable database to 0600 and refuses a link or garbage", () => {
  withDb((path, dir) => {
    Store.open(path).close();
    Deno.chmodSync(path, 0o644);
    Store.open(path).close();
    assert.equal(mode(path), 0o600);

    Deno.symlinkSync(path, `${dir}/link.db`);
    assert.throws(() => Store.open(`${dir}/link.db`), isCode("INTERNAL"));

    Deno.writeTextFileSync(`${dir}/junk.db`, "this is not a database, just some text ".repeat(200));
    assert.throws(() => Store.open(`${dir}/junk.db`), (e: unknown) => {
      assert.ok(isCode("INTERNAL")(e));
      assert.match((e as TermadaError).hint ?? "", /move a damaged file aside/);
      return true;
    });
  });
});

Deno.test("close is idempotent and a closed store refuses work", () => {
  withDb((path) => {
    const store = Store.open(path);
    store.close();
    store.close();
    assert.throws(() => store.listAgents(), isCode("INTERNAL"));
    assert.throws(() => store.upsertAgent({ id: "a", via: "x" }), /the store is closed/);
  });
});

Deno.test("upsertAgent keeps first_seen and the name, updates last_seen and via", () => {
  withDb((path) => {
    const clock = fakeClock(1000);
    using store = Store.open(path, { clock });
    store.upsertAgent({ id: "agt_a", name: "claude", via: "stdio" });
    clock.set(2000);
    store.upsertAgent({ id: "agt_b", via: "http" });
    clock.set(3000);
    store.upsertAgent({ id: "agt_a", via: "http" });
    assert.deepEqual(store.listAgents(), [
      { id: "agt_a", name: "claude", via: "http", first_seen: 1000, last_seen: 3000 },
      { id: "agt_b", name: null, via: "http", first_seen: 2000, last_seen: 2000 },
    ]);
  });
});

Deno.test("sessions round-trip, update by patch and list newest first with filters", () => {
  withDb((path) => {
    using store = Store.open(path);
    store.insertSession(session("ses_1", "alice", 10));
    store.insertSession({ ...session("ses_2", "alice", 20), workspace: "/w" });
    store.insertSession(session("ses_3", "bob", 30));
    store.insertSession(session("ses_4", "alice", 20)); // same time as ses_2: insertion order

    assert.deepEqual(store.getSession("ses_2"), {
      ...session("ses_2", "alice", 20),
      workspace: "/w",
      state: "open",
      closed_at: null,
      close_reason: null,
    });
    assert.equal(store.getSession("ses_none"), undefined);

    store.updateSession("ses_2", { cwd: "/srv", cols: 80 });
    store.updateSession("ses_1", { state: "closed", closed_at: 99, close_reason: "shell exited" });
    const s2 = store.getSession("ses_2")!;
    assert.deepEqual([s2.cwd, s2.cols, s2.rows, s2.state], ["/srv", 80, 40, "open"]);
    const s1 = store.getSession("ses_1")!;
    assert.deepEqual([s1.state, s1.closed_at, s1.close_reason], ["closed", 99, "shell exited"]);
    store.updateSession("ses_1", { close_reason: null, cwd: undefined });
    assert.equal(store.getSession("ses_1")!.close_reason, null, "null clears, undefined keeps");
    assert.equal(store.getSession("ses_1")!.cwd, "/tmp");

    const ids = (rows: { id: string }[]) => rows.map((r) => r.id);
    assert.deepEqual(ids(store.listSessions()), ["ses_3", "ses_4", "ses_2", "ses_1"]);
    assert.deepEqual(ids(store.listSessions({ owner: "alice" })), ["ses_4", "ses_2", "ses_1"]);
    assert.deepEqual(ids(store.listSessions({ state: "closed" })), ["ses_1"]);
    assert.deepEqual(ids(store.listSessions({ owner: "alice", state: "open", limit: 1 })), [
      "ses_4",
    ]);

    assert.throws(() => store.updateSession("ses_none", { cols: 1 }), isCode("NOT_FOUND"));
    assert.throws(() => store.insertSession(session("ses_1", "x", 1)), isCode("INTERNAL"));
  });
});

Deno.test("jobs round-trip their command and update only the patched fields", () => {
  withDb((path) => {
    using store = Store.open(path);
    const command = ["printf", "%s\\n", "héllo wörld 😀", "", "a\nb", '"quoted"'];
    store.insertJob({ ...job("job_1", "alice", 5), command, mode: "background", cwd: null });
    assert.deepEqual(store.getJob("job_1"), {
      ...job("job_1", "alice", 5),
      command,
      mode: "background",
      cwd: null,
      exit_code: null,
      signal: null,
      reason: null,
      ended_at: null,
      output_bytes: 0,
      output_sha256: null,
    });

    store.updateJob("job_1", { output_bytes: 1234 });
    store.updateJob("job_1", { status: "killed", exit_code: 130, signal: "INT", ended_at: 9 });
    store.updateJob("job_1", { cwd: "/home" });
    const j = store.getJob("job_1")!;
    assert.deepEqual(
      [j.status, j.exit_code, j.signal, j.ended_at, j.output_bytes, j.cwd, j.reason],
      ["killed", 130, "INT", 9, 1234, "/home", null],
    );
    store.updateJob("job_1", { signal: null });
    assert.equal(store.getJob("job_1")!.signal, null);

    assert.equal(store.getJob("job_none"), undefined);
    assert.throws(() => store.updateJob("job_none", { status: "exited" }), isCode("NOT_FOUND"));
    assert.throws(() => store.insertJob(job("job_1", "alice", 6)), isCode("INTERNAL"));
  });
});

Deno.test("listJobs is per owner, newest first, with active, startedAfter and limit", () => {
  withDb((path) => {
    using store = Store.open(path);
    store.insertJob(job("job_a1", "alice", 100, "exited"));
    store.insertJob(job("job_a2", "alice", 200, "running"));
    store.insertJob(job("job_a3", "alice", 300, "awaiting_input"));
    store.insertJob(job("job_a4", "alice", 300, "failed"));
    store.insertJob(job("job_a5", "alice", 400, "pending_approval"));
    store.insertJob(job("job_b1", "bob", 500, "running"));

    const ids = (filter: Parameters<Store["listJobs"]>[0]) =>
      store.listJobs(filter).map((j) => j.id);
    assert.deepEqual(ids({ owner: "alice", limit: 10 }), [
      "job_a5",
      "job_a4",
      "job_a3",
      "job_a2",
      "job_a1",
    ]);
    assert.deepEqual(ids({ owner: "alice", active: true, limit: 10 }), [
      "job_a5",
      "job_a3",
      "job_a2",
    ]);
    assert.deepEqual(ids({ owner: "alice", active: false, limit: 10 }), ["job_a4", "job_a1"]);
    assert.deepEqual(ids({ owner: "alice", startedAfter: 200, limit: 10 }), [
      "job_a5",
      "job_a4",
      "job_a3",
    ]);
    assert.deepEqual(ids({ owner: "alice", limit: 2 }), ["job_a5", "job_a4"]);
    assert.deepEqual(ids({ owner: "carol", limit: 2 }), []);
    assert.throws(() => store.listJobs({ owner: "alice", limit: 0 }), isCode("INVALID_ARGUMENT"));
  });
});

Deno.test("inputs beyond their bounds are INVALID_ARGUMENT and write nothing", async (t) => {
  await withDbAsync(async (path) => {
    using store = Store.open(path);
    const bad = isCode("INVALID_ARGUMENT");
    await t.step("ids longer than 64 characters", () => {
      const long = "j".repeat(65);
      assert.throws(() => store.insertJob(job(long, "alice", 1)), bad);
      assert.throws(() => store.insertJob(job("job_1", long, 1)), bad);
      assert.throws(() => store.insertSession(session(long, "alice", 1)), bad);
      assert.throws(() => store.upsertAgent({ id: long, via: "stdio" }), bad);
      assert.throws(() => store.getJob(long), bad);
      assert.throws(() => store.pruneJobs(long, 1), bad);
      store.insertJob(job("j".repeat(64), "alice", 1));
    });
    await t.step("commands larger than 1 MiB as JSON", () => {
      // ASCII: the JSON is the words plus quotes, commas and brackets.
      const fits = ["x".repeat(MAX_COMMAND_JSON_BYTES - 4)];
      const over = ["x".repeat(MAX_COMMAND_JSON_BYTES - 3)];
      store.insertJob({ ...job("job_big", "alice", 1), command: fits });
      assert.equal(store.getJob("job_big")!.command[0]!.length, MAX_COMMAND_JSON_BYTES - 4);
      assert.throws(() => store.insertJob({ ...job("job_over", "alice", 1), command: over }), bad);
      // Multi-byte: under 1 Mi characters but over 1 MiB of UTF-8.
      const wide = ["€".repeat(400_000)];
      assert.throws(() => store.insertJob({ ...job("job_wide", "alice", 1), command: wide }), bad);
      assert.throws(
        () =>
          store.insertJob({
            ...job("job_nums", "alice", 1),
            command: [1, 2] as unknown as string[],
          }),
        bad,
      );
    });
    await t.step("other fields", () => {
      const j = job("job_2", "alice", 1);
      assert.throws(() => store.insertJob({ ...j, mode: "later" as "foreground" }), bad);
      assert.throws(() => store.insertJob({ ...j, status: "Running; DROP TABLE jobs" }), bad);
      assert.throws(() => store.insertJob({ ...j, started_at: 1.5 }), bad);
      assert.throws(() => store.insertJob({ ...j, cwd: "/".repeat(5000) }), bad);
      assert.throws(() => store.insertSession({ ...session("s", "a", 1), cols: 0 }), bad);
      assert.throws(() => store.updateJob("job_big", { output_bytes: -1 }), bad);
      assert.throws(
        () => store.updateSession("s", { state: "gone" as "open" }),
        bad,
      );
      assert.throws(() => store.listSessions({ limit: 1e9 }), bad);
    });
    const ids = store.listJobs({ owner: "alice", limit: 100 }).map((r) => r.id).sort();
    assert.deepEqual(ids, ["j".repeat(64), "job_big"]);
  });
});

Deno.test("recover orphans unfinished jobs and closes open sessions in one go", () => {
  withDb((path) => {
    const clock = fakeClock(1000);
    {
      using store = Store.open(path, { clock });
      store.insertSession(session("ses_open", "alice", 1));
      store.insertSession(session("ses_closed", "alice", 2));
      store.updateSession("ses_closed", { state: "closed", closed_at: 3, close_reason: "bye" });
      store.insertJob(job("job_run", "alice", 10, "running"));
      store.insertJob(job("job_wait", "alice", 11, "awaiting_input"));
      store.insertJob(job("job_appr", "bob", 12, "pending_approval"));
      store.insertJob(job("job_done", "alice", 13, "running"));
      store.updateJob("job_done", { status: "exited", exit_code: 0, ended_at: 20 });
      // The daemon dies here: nothing ends these jobs or sessions.
    }
    clock.set(5000);
    using store = Store.open(path, { clock });
    const result = store.recover("daemon restarted");
    assert.deepEqual(result.orphanedJobs.sort(), ["job_run", "job_wait"]);
    // A job parked for approval never ran: it is denied, not orphaned.
    assert.deepEqual(result.deniedJobs, ["job_appr"]);
    assert.equal(store.getJob("job_appr")!.status, "denied");
    assert.deepEqual(result.closedSessions, ["ses_open"]);
    for (const id of result.orphanedJobs) {
      const j = store.getJob(id)!;
      assert.deepEqual([j.status, j.reason, j.ended_at], ["orphaned", "daemon restarted", 5000]);
    }
    const done = store.getJob("job_done")!;
    assert.deepEqual([done.status, done.reason, done.ended_at], ["exited", null, 20]);
    const open = store.getSession("ses_open")!;
    assert.deepEqual([open.state, open.closed_at, open.close_reason], [
      "closed",
      5000,
      "daemon restarted",
    ]);
    assert.equal(store.getSession("ses_closed")!.close_reason, "bye");
    assert.deepEqual(store.recover("again"), {
      orphanedJobs: [],
      closedSessions: [],
      expiredApprovals: [],
      deniedJobs: [],
    });
  });
});

Deno.test("pruneJobs keeps the newest finished jobs and never deletes active ones", () => {
  withDb((path) => {
    using store = Store.open(path);
    const statuses = ["exited", "running", "killed", "awaiting_input", "failed", "exited"];
    statuses.forEach((s, i) => store.insertJob(job(`job_${i}`, "alice", i * 10, s)));
    store.insertJob(job("job_bob", "bob", 0, "exited"));

    assert.deepEqual(store.pruneJobs("alice", 2).sort(), ["job_0", "job_2"]);
    assert.deepEqual(store.listJobs({ owner: "alice", limit: 100 }).map((j) => j.id), [
      "job_5",
      "job_4",
      "job_3",
      "job_1",
    ]);
    assert.deepEqual(store.pruneJobs("alice", 2), []);
    assert.deepEqual(store.pruneJobs("alice", 0).sort(), ["job_4", "job_5"]);
    assert.deepEqual(store.listJobs({ owner: "alice", limit: 100 }).map((j) => j.status), [
      "awaiting_input",
      "running",
    ]);
    assert.equal(store.getJob("job_bob")?.status, "exited", "other owners untouched");
  });
});

Deno.test("approvals are recorded, decided once, and expire at recovery", () => {
  const dir = Deno.makeTempDirSync();
  try {
    using store = Store.open(`${dir}/t.db`);
    const base = {
      job_id: "job_aaaaaaaaaaaa",
      owner: "alice",
      session_id: "ses_x",
      command: ["rm", "-rf", "build"],
      rule: "rm *",
      reason: "confirm rule",
      requested_at: 1,
      expires_at: 2,
    };
    store.insertApproval({ id: "apr_1", ...base });
    store.insertApproval({ id: "apr_2", ...base, job_id: "job_bbbbbbbbbbbb" });
    assert.deepEqual(store.listApprovals({ pending: true, limit: 10 }).map((a) => a.id), [
      "apr_1",
      "apr_2",
    ]);
    assert.equal(
      store.decideApproval("apr_1", {
        status: "approved",
        decided_by: "operator:cli",
        decision_reason: "ok",
      }),
      true,
    );
    assert.equal(
      store.decideApproval("apr_1", {
        status: "denied",
        decided_by: "operator:cli",
        decision_reason: null,
      }),
      false,
      "decided once",
    );
    const a = store.getApproval("apr_1")!;
    assert.deepEqual([a.status, a.decided_by, a.decision_reason], [
      "approved",
      "operator:cli",
      "ok",
    ]);
    assert.deepEqual(store.recover("restart").expiredApprovals, ["apr_2"]);
    assert.equal(store.getApproval("apr_2")!.status, "expired");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
