import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { TermadaError } from "../shared/mod.ts";
import { MIGRATIONS, PAGE_BYTES, SCHEMA_VERSION, Store } from "./db.ts";
import { fakeClock, isCode, job, pragma, session, withDb } from "./_testing.ts";
import type { JobFinal } from "./jobs.ts";

const mode = (path: string): number => Deno.statSync(path).mode! & 0o777;

const FINAL: JobFinal = {
  status: "exited",
  exit_code: 0,
  signal: null,
  reason: null,
  cwd: "/srv",
  ended_at: 50,
  output_bytes: 0,
  output_sha256: null,
  output: null,
};

Deno.test("Store.open creates a 0600 WAL database at the current schema and reopens it as is", () => {
  withDb((path, dir) => {
    const store = Store.open(path);
    try {
      store.agents.upsert({ id: "agt_1", via: "stdio" });
      assert.equal(mode(path), 0o600);
      assert.equal(mode(`${path}-wal`), 0o600, "SQLite gives the WAL the database's mode");
      assert.equal(mode(`${dir}/state`), 0o700);
    } finally {
      store.close();
    }
    assert.equal(pragma(path, "user_version"), SCHEMA_VERSION);
    assert.equal(SCHEMA_VERSION, 6);
    assert.equal(pragma(path, "journal_mode"), "wal");

    const again = Store.open(path);
    try {
      assert.equal(again.agents.list().length, 1, "reopening keeps the data");
      // Exclusive: while the daemon holds it, no other connection reads or writes the file.
      assert.throws(() => pragma(path, "user_version"), /database is locked/);
      const other = new DatabaseSync(path);
      try {
        other.exec("PRAGMA busy_timeout = 0");
        assert.throws(() => other.exec("UPDATE agents SET name = 'x'"), /database is locked/);
      } finally {
        other.close();
      }
    } finally {
      again.close();
    }
    assert.equal(pragma(path, "user_version"), SCHEMA_VERSION);
  });
});

Deno.test("a new database has 1 KiB pages; one written with 4 KiB pages keeps them and its rows", () => {
  withDb((path) => {
    const s = Store.open(path);
    s.close();
    const db = new DatabaseSync(path);
    try {
      assert.equal(db.prepare("PRAGMA page_size").get()?.page_size, PAGE_BYTES);
    } finally {
      db.close();
    }
  });
  withDb((path, dir) => {
    // An older daemon's database: 4 KiB pages, WAL, a row in it.
    Deno.mkdirSync(`${dir}/state`, { mode: 0o700 });
    const old = new DatabaseSync(path);
    old.exec("PRAGMA page_size = 4096");
    old.exec("PRAGMA journal_mode = WAL");
    old.exec("CREATE TABLE probe (x INTEGER)");
    old.exec("INSERT INTO probe VALUES (42)");
    old.close();
    Store.open(path).close();
    const db = new DatabaseSync(path);
    try {
      assert.equal(db.prepare("PRAGMA page_size").get()?.page_size, 4096);
      assert.equal(db.prepare("SELECT x FROM probe").get()?.x, 42);
    } finally {
      db.close();
    }
  });
});

Deno.test("Store.open creates the index for job listing (and none on status)", () => {
  withDb((path) => {
    Store.open(path).close();
    const db = new DatabaseSync(path);
    try {
      const names = db.prepare("SELECT name FROM sqlite_master WHERE type = 'index'").all()
        .map((r) => r.name);
      assert.ok(names.includes("jobs_owner_started"));
      // v5 dropped it: every job's start and end paid for an index only recovery read.
      assert.ok(!names.includes("jobs_status"));
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

Deno.test("Store.open migrates a v3 database to the current schema: jobs keep their rows, output is null", () => {
  withDb((path, dir) => {
    Deno.mkdirSync(`${dir}/state`);
    const v3 = new DatabaseSync(path);
    try {
      for (const sql of MIGRATIONS.slice(0, 3)) v3.exec(sql);
      v3.exec("PRAGMA user_version = 3");
      v3.prepare(
        `INSERT INTO jobs (id, owner, session_id, command, mode, status, exit_code, cwd,
           started_at, ended_at, output_bytes, output_sha256)
         VALUES ('job_old', 'alice', 'ses_a', '["make","test"]', 'foreground', 'exited', 2,
           '/src', 10, 20, 300, :sha)`,
      ).run({ sha: "ab".repeat(32) });
      v3.prepare(
        `INSERT INTO sessions (id, owner, shell, target, cwd, cols, rows, state, created_at)
         VALUES ('ses_a', 'alice', 'bash', 'local', '/src', 80, 24, 'open', 5)`,
      ).run();
    } finally {
      v3.close();
    }

    const store = Store.open(path);
    assert.deepEqual(store.jobs.get("job_old"), {
      id: "job_old",
      owner: "alice",
      session_id: "ses_a",
      command: ["make", "test"],
      mode: "foreground",
      status: "exited",
      exit_code: 2,
      signal: null,
      reason: null,
      cwd: "/src",
      started_at: 10,
      ended_at: 20,
      output_bytes: 300,
      output_sha256: "ab".repeat(32),
      output: null,
    });
    assert.equal(store.sessions.get("ses_a")?.cwd, "/src");
    // The migrated row takes the new column like any other.
    store.jobs.finish("job_old", { ...FINAL, output_bytes: 2, output: new Uint8Array([1, 2]) });
    assert.deepEqual(store.jobs.get("job_old")?.output, new Uint8Array([1, 2]));
    store.close();
    assert.equal(pragma(path, "user_version"), SCHEMA_VERSION);
    const db = new DatabaseSync(path);
    try {
      const column = db.prepare("SELECT type FROM pragma_table_info('jobs') WHERE name = 'output'")
        .get();
      assert.equal(column?.type, "BLOB");
    } finally {
      db.close();
    }
  });
});

Deno.test("Store.open migrates a v5 database to v6: approvals keep their rows, with no votes and no requirements", () => {
  withDb((path, dir) => {
    Deno.mkdirSync(`${dir}/state`);
    const v5 = new DatabaseSync(path);
    try {
      for (const sql of MIGRATIONS.slice(0, 5)) v5.exec(sql);
      v5.exec("PRAGMA user_version = 5");
      v5.prepare(
        `INSERT INTO approvals (id, job_id, owner, session_id, command, rule, reason, status,
           requested_at, expires_at, decided_by, decision_reason, decided_at)
         VALUES ('apr_old', 'job_old', 'alice', 'ses_a', '["rm","-rf","x"]', 'rm *', 'confirm',
           'approved', 10, 20, 'operator:cli', 'ok', 15),
           ('apr_wait', 'job_wait', 'alice', 'ses_a', '["ls"]', NULL, NULL, 'pending', 30, 90,
           NULL, NULL, NULL)`,
      ).run();
    } finally {
      v5.close();
    }
    using store = Store.open(path);
    assert.deepEqual(store.approvals.get("apr_old"), {
      id: "apr_old",
      job_id: "job_old",
      owner: "alice",
      session_id: "ses_a",
      command: ["rm", "-rf", "x"],
      rule: "rm *",
      reason: "confirm",
      status: "approved",
      requested_at: 10,
      expires_at: 20,
      decided_by: "operator:cli",
      decision_reason: "ok",
      decided_at: 15,
      votes: [],
      requirements: null,
    });
    // The migrated pending row takes votes like a new one; the new tables are there and empty.
    const vote = { by: "op", principal: "op", roles: [], amr: [], approve: true, at: 40 };
    assert.deepEqual(store.approvals.addVote("apr_wait", vote), [vote]);
    assert.deepEqual(store.actions.list({ limit: 10 }), []);
    assert.deepEqual(store.grants.forAction("job_wait"), []);
    assert.equal(store.budgets.used("p/b", "global", 0), 0);
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

Deno.test("close is idempotent and a closed store refuses work in every repository", () => {
  withDb((path) => {
    const store = Store.open(path);
    store.close();
    store.close();
    assert.throws(() => store.agents.list(), isCode("INTERNAL"));
    assert.throws(() => store.agents.upsert({ id: "a", via: "x" }), /the store is closed/);
    assert.throws(() => store.sessions.list(), /the store is closed/);
    assert.throws(() => store.jobs.get("job_1"), /the store is closed/);
    assert.throws(() => store.jobs.finish("job_1", FINAL, { id: "s", cwd: "/" }), /closed/);
    assert.throws(() => store.approvals.list({ limit: 1 }), /the store is closed/);
    assert.throws(() => store.missions.list({ limit: 1 }), /the store is closed/);
    assert.throws(() => store.actions.list({ limit: 1 }), /the store is closed/);
    assert.throws(() => store.budgets.used("p/b", "global", 0), /the store is closed/);
    assert.throws(() => store.grants.consume("grt_1", "act_1", "h", 1), /the store is closed/);
    assert.throws(() => store.transaction(() => 1), /the store is closed/);
    assert.throws(() => store.recover("restart"), /the store is closed/);
  });
});

Deno.test("transaction commits writes of several repositories together", async (t) => {
  await t.step("a returning function commits and gives its value", () => {
    withDb((path) => {
      using store = Store.open(path);
      const result = store.transaction(() => {
        store.sessions.insert(session("ses_a", "alice", 1));
        store.jobs.insert(job("job_1", "alice", 2));
        return 42;
      });
      assert.equal(result, 42);
      assert.ok(store.sessions.get("ses_a"));
      assert.ok(store.jobs.get("job_1"));
    });
  });

  await t.step("a throwing function rolls everything back; its error passes as thrown", () => {
    withDb((path) => {
      using store = Store.open(path);
      const boom = new RangeError("caller's own mistake");
      assert.throws(
        () =>
          store.transaction(() => {
            store.sessions.insert(session("ses_a", "alice", 1));
            store.jobs.insert(job("job_1", "alice", 2));
            throw boom;
          }),
        (e: unknown) => e === boom,
      );
      assert.throws(
        () =>
          store.transaction(() => {
            store.jobs.insert(job("job_2", "alice", 2));
            store.sessions.update("ses_none", { cols: 1 });
          }),
        isCode("NOT_FOUND"),
      );
      assert.equal(store.sessions.get("ses_a"), undefined);
      assert.equal(store.jobs.get("job_1"), undefined);
      assert.equal(store.jobs.get("job_2"), undefined);
      store.jobs.insert(job("job_3", "alice", 3)); // not left inside a transaction
      assert.ok(store.jobs.get("job_3"));
    });
  });

  await t.step("a repository's own transaction inside is all or nothing on its own", () => {
    withDb((path) => {
      using store = Store.open(path);
      store.jobs.insert(job("job_1", "alice", 1));
      store.transaction(() => {
        store.sessions.insert(session("ses_a", "alice", 1));
        // finish writes the job, then fails on the unknown session: its savepoint undoes it.
        assert.throws(
          () => store.jobs.finish("job_1", FINAL, { id: "ses_none", cwd: "/x" }),
          isCode("NOT_FOUND"),
        );
        assert.equal(store.jobs.get("job_1")?.status, "running", "undone inside the transaction");
        store.jobs.finish("job_1", { ...FINAL, exit_code: 3 }, { id: "ses_a", cwd: "/srv" });
      });
      const j = store.jobs.get("job_1")!;
      assert.deepEqual([j.status, j.exit_code], ["exited", 3]);
      assert.equal(store.sessions.get("ses_a")?.cwd, "/srv");
    });
  });

  await t.step("an async function is refused and writes nothing", () => {
    withDb((path) => {
      using store = Store.open(path);
      assert.throws(
        () =>
          store.transaction(() => {
            store.jobs.insert(job("job_1", "alice", 1));
            return Promise.resolve();
          }),
        TypeError,
      );
      assert.equal(store.jobs.get("job_1"), undefined);
    });
  });
});

Deno.test("recover orphans unfinished jobs, denies parked ones and closes open sessions", () => {
  withDb((path) => {
    const clock = fakeClock(1000);
    {
      using store = Store.open(path, { clock });
      store.sessions.insert(session("ses_open", "alice", 1));
      store.sessions.insert(session("ses_closed", "alice", 2));
      store.sessions.update("ses_closed", { state: "closed", closed_at: 3, close_reason: "bye" });
      store.jobs.insert(job("job_run", "alice", 10, "running"));
      store.jobs.insert(job("job_wait", "alice", 11, "awaiting_input"));
      store.jobs.insert(job("job_appr", "bob", 12, "pending_approval"));
      store.jobs.insert(job("job_done", "alice", 13, "running"));
      store.jobs.update("job_done", { status: "exited", exit_code: 0, ended_at: 20 });
      // The daemon dies here: nothing ends these jobs or sessions.
    }
    clock.set(5000);
    using store = Store.open(path, { clock });
    const result = store.recover("daemon restarted");
    assert.deepEqual(Object.keys(result), [
      "expiredApprovals",
      "deniedJobs",
      "orphanedJobs",
      "closedSessions",
      "unknownActions",
    ]);
    assert.deepEqual(result.orphanedJobs.sort(), ["job_run", "job_wait"]);
    // A job parked for approval never ran: it is denied, not orphaned.
    assert.deepEqual(result.deniedJobs, ["job_appr"]);
    const parked = store.jobs.get("job_appr")!;
    assert.deepEqual([parked.status, parked.ended_at], ["denied", 5000]);
    assert.match(parked.reason ?? "", /approval expired/);
    assert.deepEqual(result.closedSessions, ["ses_open"]);
    for (const id of result.orphanedJobs) {
      const j = store.jobs.get(id)!;
      assert.deepEqual([j.status, j.reason, j.ended_at], ["orphaned", "daemon restarted", 5000]);
    }
    const done = store.jobs.get("job_done")!;
    assert.deepEqual([done.status, done.reason, done.ended_at], ["exited", null, 20]);
    const open = store.sessions.get("ses_open")!;
    assert.deepEqual([open.state, open.closed_at, open.close_reason], [
      "closed",
      5000,
      "daemon restarted",
    ]);
    assert.equal(store.sessions.get("ses_closed")!.close_reason, "bye");
    assert.deepEqual(store.recover("again"), {
      orphanedJobs: [],
      closedSessions: [],
      expiredApprovals: [],
      deniedJobs: [],
      unknownActions: [],
    });
  });
});
