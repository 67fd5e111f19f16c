import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { seededRandom } from "../shared/mod.ts";
import { MAX_COMMAND_JSON_BYTES, MAX_INLINE_OUTPUT_BYTES } from "./_checks.ts";
import { Store } from "./db.ts";
import type { JobFilter, JobFinal } from "./jobs.ts";
import { isCode, job, session, withDb, withDbAsync } from "./_testing.ts";

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

function bytes(n: number, seed = 1): Uint8Array {
  const random = seededRandom(seed);
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.floor(random() * 256);
  return out;
}

Deno.test("jobs round-trip their command and update only the patched fields", () => {
  withDb((path) => {
    using store = Store.open(path);
    const jobs = store.jobs;
    const command = ["printf", "%s\\n", "héllo wörld 😀", "", "a\nb", '"quoted"'];
    jobs.insert({ ...job("job_1", "alice", 5), command, mode: "background", cwd: null });
    assert.deepEqual(jobs.get("job_1"), {
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
      output: null,
    });

    jobs.update("job_1", { output_bytes: 1234 });
    jobs.update("job_1", { status: "killed", exit_code: 130, signal: "INT", ended_at: 9 });
    jobs.update("job_1", { cwd: "/home" });
    const j = jobs.get("job_1")!;
    assert.deepEqual(
      [j.status, j.exit_code, j.signal, j.ended_at, j.output_bytes, j.cwd, j.reason],
      ["killed", 130, "INT", 9, 1234, "/home", null],
    );
    jobs.update("job_1", { signal: null });
    assert.equal(jobs.get("job_1")!.signal, null);

    assert.equal(jobs.get("job_none"), undefined);
    assert.throws(() => jobs.update("job_none", { status: "exited" }), isCode("NOT_FOUND"));
    assert.throws(() => jobs.insert(job("job_1", "alice", 6)), isCode("INTERNAL"));
  });
});

Deno.test("jobs.list is per owner, newest first, with active, startedAfter and limit", () => {
  withDb((path) => {
    using store = Store.open(path);
    store.jobs.insert(job("job_a1", "alice", 100, "exited"));
    store.jobs.insert(job("job_a2", "alice", 200, "running"));
    store.jobs.insert(job("job_a3", "alice", 300, "awaiting_input"));
    store.jobs.insert(job("job_a4", "alice", 300, "failed"));
    store.jobs.insert(job("job_a5", "alice", 400, "pending_approval"));
    store.jobs.insert(job("job_b1", "bob", 500, "running"));

    const ids = (filter: JobFilter) => store.jobs.list(filter).map((j) => j.id);
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
    assert.throws(() => store.jobs.list({ owner: "alice", limit: 0 }), isCode("INVALID_ARGUMENT"));
  });
});

Deno.test("jobs beyond their bounds are INVALID_ARGUMENT and write nothing", async (t) => {
  await withDbAsync(async (path) => {
    using store = Store.open(path);
    const jobs = store.jobs;
    const bad = isCode("INVALID_ARGUMENT");
    await t.step("ids longer than 64 characters", () => {
      const long = "j".repeat(65);
      assert.throws(() => jobs.insert(job(long, "alice", 1)), bad);
      assert.throws(() => jobs.insert(job("job_1", long, 1)), bad);
      assert.throws(() => jobs.get(long), bad);
      assert.throws(() => jobs.prune(long, 1), bad);
      assert.throws(() => jobs.finish(long, FINAL), bad);
      jobs.insert(job("j".repeat(64), "alice", 1));
    });
    await t.step("commands larger than 1 MiB as JSON", () => {
      // ASCII: the JSON is the words plus quotes, commas and brackets.
      const fits = ["x".repeat(MAX_COMMAND_JSON_BYTES - 4)];
      const over = ["x".repeat(MAX_COMMAND_JSON_BYTES - 3)];
      jobs.insert({ ...job("job_big", "alice", 1), command: fits });
      assert.equal(jobs.get("job_big")!.command[0]!.length, MAX_COMMAND_JSON_BYTES - 4);
      assert.throws(() => jobs.insert({ ...job("job_over", "alice", 1), command: over }), bad);
      // Multi-byte: under 1 Mi characters but over 1 MiB of UTF-8.
      const wide = ["€".repeat(400_000)];
      assert.throws(() => jobs.insert({ ...job("job_wide", "alice", 1), command: wide }), bad);
      assert.throws(
        () =>
          jobs.insert({ ...job("job_nums", "alice", 1), command: [1, 2] as unknown as string[] }),
        bad,
      );
    });
    await t.step("other fields", () => {
      const j = job("job_2", "alice", 1);
      assert.throws(() => jobs.insert({ ...j, mode: "later" as "foreground" }), bad);
      assert.throws(
        () => jobs.insert({ ...j, status: "Running; DROP TABLE jobs" as "running" }),
        bad,
      );
      assert.throws(
        () => jobs.insert({ ...j, status: "finished" as "running" }),
        bad,
        "not a job status",
      );
      assert.throws(() => jobs.insert({ ...j, started_at: 1.5 }), bad);
      assert.throws(() => jobs.insert({ ...j, cwd: "/".repeat(5000) }), bad);
      assert.throws(() => jobs.update("job_big", { output_bytes: -1 }), bad);
      assert.throws(() => jobs.update("job_big", { status: "done" as "exited" }), bad);
    });
    const ids = jobs.list({ owner: "alice", limit: 100 }).map((r) => r.id).sort();
    assert.deepEqual(ids, ["j".repeat(64), "job_big"]);
  });
});

Deno.test("jobs.prune keeps the newest finished jobs and never deletes active ones", () => {
  withDb((path) => {
    using store = Store.open(path);
    const statuses = ["exited", "running", "killed", "awaiting_input", "failed", "exited"] as const;
    statuses.forEach((s, i) => store.jobs.insert(job(`job_${i}`, "alice", i * 10, s)));
    store.jobs.insert(job("job_bob", "bob", 0, "exited"));

    const ids = (r: { id: string }[]) => r.map((j) => j.id).sort();
    assert.deepEqual(ids(store.jobs.prune("alice", 2)), ["job_0", "job_2"]);
    assert.deepEqual(store.jobs.list({ owner: "alice", limit: 100 }).map((j) => j.id), [
      "job_5",
      "job_4",
      "job_3",
      "job_1",
    ]);
    assert.deepEqual(store.jobs.prune("alice", 2), []);
    assert.deepEqual(ids(store.jobs.prune("alice", 0)), ["job_4", "job_5"]);
    assert.deepEqual(store.jobs.list({ owner: "alice", limit: 100 }).map((j) => j.status), [
      "awaiting_input",
      "running",
    ]);
    assert.equal(store.jobs.get("job_bob")?.status, "exited", "other owners untouched");
    // Inline output went with its row; a job with output and none inline had a spool.
    store.jobs.insert(job("job_in", "carol", 1, "running"));
    store.jobs.insert(job("job_sp", "carol", 2, "running"));
    const done = (output: Uint8Array | null) => ({
      status: "exited" as const,
      exit_code: 0,
      signal: null,
      reason: null,
      cwd: null,
      ended_at: 3,
      output_bytes: 2,
      output_sha256: null,
      output,
    });
    store.jobs.finish("job_in", done(new Uint8Array([104, 105])));
    store.jobs.finish("job_sp", done(null));
    assert.deepEqual(
      store.jobs.prune("carol", 0).sort((a, b) => a.id.localeCompare(b.id)),
      [{ id: "job_in", spooled: false }, { id: "job_sp", spooled: true }],
    );
  });
});

Deno.test("jobs.finish sets every final field and the session cwd in one transaction", () => {
  withDb((path) => {
    using store = Store.open(path);
    store.sessions.insert(session("ses_a", "alice", 1));
    store.jobs.insert(job("job_1", "alice", 10));
    store.jobs.update("job_1", { reason: "was set", output_sha256: "00".repeat(32) });
    const output = new TextEncoder().encode("hello\nwörld\n");
    const final: JobFinal = {
      status: "killed",
      exit_code: 137,
      signal: "KILL",
      reason: "timed out after 5 s",
      cwd: "/srv/app",
      ended_at: 99,
      output_bytes: output.byteLength,
      output_sha256: "ab".repeat(32),
      output,
    };
    store.jobs.finish("job_1", final, { id: "ses_a", cwd: "/srv/app" });
    assert.deepEqual(store.jobs.get("job_1"), { ...job("job_1", "alice", 10), ...final });
    assert.equal(store.sessions.get("ses_a")?.cwd, "/srv/app");

    // Every field is set: null clears, and no session leaves the sessions alone.
    store.jobs.finish("job_1", FINAL);
    const j = store.jobs.get("job_1")!;
    assert.deepEqual(
      [j.status, j.exit_code, j.signal, j.reason, j.cwd, j.output_sha256, j.output],
      ["exited", 0, null, null, "/srv", null, null],
    );
    assert.equal(store.sessions.get("ses_a")?.cwd, "/srv/app");
  });
});

Deno.test("jobs.finish of an unknown job is NOT_FOUND and writes nothing", () => {
  withDb((path) => {
    using store = Store.open(path);
    store.sessions.insert(session("ses_a", "alice", 1));
    store.jobs.insert(job("job_1", "alice", 10));
    assert.throws(
      () => store.jobs.finish("job_none", FINAL, { id: "ses_a", cwd: "/elsewhere" }),
      isCode("NOT_FOUND"),
    );
    assert.equal(store.sessions.get("ses_a")?.cwd, "/tmp", "the session cwd is unchanged");
    assert.throws(() => store.jobs.finish("job_none", FINAL), isCode("NOT_FOUND"));
    // An unknown session undoes the job's update too.
    assert.throws(
      () => store.jobs.finish("job_1", FINAL, { id: "ses_none", cwd: "/elsewhere" }),
      (e: unknown) => isCode("NOT_FOUND")(e) && /ses_none/.test((e as Error).message),
    );
    const j = store.jobs.get("job_1")!;
    assert.deepEqual([j.status, j.ended_at, j.cwd], ["running", null, "/tmp"]);
  });
});

Deno.test("jobs.finish refuses what is not a final state, before writing anything", () => {
  withDb((path) => {
    using store = Store.open(path);
    store.sessions.insert(session("ses_a", "alice", 1));
    store.jobs.insert(job("job_1", "alice", 10));
    const bad = isCode("INVALID_ARGUMENT");
    const s = { id: "ses_a", cwd: "/x" };
    assert.throws(() => store.jobs.finish("job_1", { ...FINAL, status: "running" }, s), bad);
    assert.throws(() => store.jobs.finish("job_1", { ...FINAL, status: "nope" as "exited" }), bad);
    assert.throws(() => store.jobs.finish("job_1", { ...FINAL, ended_at: -1 }), bad);
    assert.throws(() => store.jobs.finish("job_1", { ...FINAL, output_sha256: "xyz" }), bad);
    assert.throws(
      () => store.jobs.finish("job_1", FINAL, { id: "ses_a", cwd: "/".repeat(5000) }),
      bad,
    );
    // The inline output is the whole output: its length is output_bytes.
    assert.throws(
      () => store.jobs.finish("job_1", { ...FINAL, output_bytes: 5, output: bytes(4) }),
      bad,
    );
    assert.throws(
      () => store.jobs.finish("job_1", { ...FINAL, output: "text" as unknown as Uint8Array }),
      bad,
    );
    const j = store.jobs.get("job_1")!;
    assert.deepEqual([j.status, j.ended_at], ["running", null]);
    assert.equal(store.sessions.get("ses_a")?.cwd, "/tmp");
  });
});

Deno.test("the inline output round-trips byte for byte up to its 64 KiB cap", async (t) => {
  await withDbAsync(async (path) => {
    using store = Store.open(path);
    store.jobs.insert(job("job_1", "alice", 10));
    const finish = (output: Uint8Array | null) =>
      store.jobs.finish("job_1", {
        ...FINAL,
        output_bytes: output?.byteLength ?? 0,
        output,
      });

    await t.step("any bytes, at the cap exactly", () => {
      assert.equal(MAX_INLINE_OUTPUT_BYTES, 64 * 1024);
      const all = bytes(MAX_INLINE_OUTPUT_BYTES, 7);
      all.set([0, 0xff, 0xc3], 0); // NUL and bytes that are not UTF-8
      finish(all);
      const back = store.jobs.get("job_1")!.output!;
      assert.ok(back instanceof Uint8Array);
      assert.deepEqual(back, all);
    });
    await t.step("one byte over the cap is refused and the stored output kept", () => {
      const before = store.jobs.get("job_1")!.output;
      assert.throws(() => finish(bytes(MAX_INLINE_OUTPUT_BYTES + 1)), (e: unknown) => {
        assert.ok(isCode("INVALID_ARGUMENT")(e));
        assert.match((e as Error).message, /65537 bytes, over 65536/);
        return true;
      });
      assert.deepEqual(store.jobs.get("job_1")!.output, before);
    });
    await t.step("empty output is empty bytes, not null", () => {
      finish(new Uint8Array(0));
      assert.deepEqual(store.jobs.get("job_1")!.output, new Uint8Array(0));
    });
    await t.step("a view stores only its own bytes", () => {
      const whole = bytes(100, 3);
      finish(whole.subarray(10, 20));
      assert.deepEqual(store.jobs.get("job_1")!.output, whole.slice(10, 20));
    });
    await t.step("null keeps no output", () => {
      finish(null);
      assert.equal(store.jobs.get("job_1")!.output, null);
    });
  });
});

Deno.test("jobs.list does not read the output blobs", () => {
  withDb((path) => {
    const store = Store.open(path);
    for (let i = 0; i < 3; i++) {
      const id = `job_${i}`;
      store.jobs.insert(job(id, "alice", i));
      const output = bytes(1000 + i, i);
      store.jobs.finish(id, { ...FINAL, output_bytes: output.byteLength, output });
    }
    const rows = store.jobs.list({ owner: "alice", limit: 10 });
    assert.deepEqual(rows.map((r) => [r.id, r.output_bytes, r.output]), [
      ["job_2", 1002, null],
      ["job_1", 1001, null],
      ["job_0", 1000, null],
    ]);
    assert.equal(store.jobs.get("job_1")!.output?.byteLength, 1001, "get reads it");
    store.close();
    // The stored rows do carry the blobs: list leaves them on disk.
    const db = new DatabaseSync(path);
    try {
      const n = db.prepare("SELECT count(*) AS n FROM jobs WHERE length(output) > 0").get();
      assert.equal(n?.n, 3);
    } finally {
      db.close();
    }
  });
});
