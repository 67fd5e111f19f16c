import assert from "node:assert/strict";
import { Store } from "./db.ts";
import { isCode, session, withDb } from "./_testing.ts";

Deno.test("sessions round-trip, update by patch and list newest first with filters", () => {
  withDb((path) => {
    using store = Store.open(path);
    const sessions = store.sessions;
    sessions.insert(session("ses_1", "alice", 10));
    sessions.insert({ ...session("ses_2", "alice", 20), workspace: "/w" });
    sessions.insert(session("ses_3", "bob", 30));
    sessions.insert(session("ses_4", "alice", 20)); // same time as ses_2: insertion order

    assert.deepEqual(sessions.get("ses_2"), {
      ...session("ses_2", "alice", 20),
      workspace: "/w",
      state: "open",
      closed_at: null,
      close_reason: null,
    });
    assert.equal(sessions.get("ses_none"), undefined);

    sessions.update("ses_2", { cwd: "/srv", cols: 80 });
    sessions.update("ses_1", { state: "closed", closed_at: 99, close_reason: "shell exited" });
    const s2 = sessions.get("ses_2")!;
    assert.deepEqual([s2.cwd, s2.cols, s2.rows, s2.state], ["/srv", 80, 40, "open"]);
    const s1 = sessions.get("ses_1")!;
    assert.deepEqual([s1.state, s1.closed_at, s1.close_reason], ["closed", 99, "shell exited"]);
    sessions.update("ses_1", { close_reason: null, cwd: undefined });
    assert.equal(sessions.get("ses_1")!.close_reason, null, "null clears, undefined keeps");
    assert.equal(sessions.get("ses_1")!.cwd, "/tmp");

    const ids = (rows: { id: string }[]) => rows.map((r) => r.id);
    assert.deepEqual(ids(sessions.list()), ["ses_3", "ses_4", "ses_2", "ses_1"]);
    assert.deepEqual(ids(sessions.list({ owner: "alice" })), ["ses_4", "ses_2", "ses_1"]);
    assert.deepEqual(ids(sessions.list({ state: "closed" })), ["ses_1"]);
    assert.deepEqual(ids(sessions.list({ owner: "alice", state: "open", limit: 1 })), ["ses_4"]);

    assert.throws(() => sessions.update("ses_none", { cols: 1 }), isCode("NOT_FOUND"));
    assert.throws(() => sessions.insert(session("ses_1", "x", 1)), isCode("INTERNAL"));
  });
});

Deno.test("sessions beyond their bounds are INVALID_ARGUMENT and write nothing", () => {
  withDb((path) => {
    using store = Store.open(path);
    const bad = isCode("INVALID_ARGUMENT");
    assert.throws(() => store.sessions.insert(session("s".repeat(65), "alice", 1)), bad);
    assert.throws(() => store.sessions.insert({ ...session("s", "a", 1), cols: 0 }), bad);
    assert.throws(() => store.sessions.insert({ ...session("s", "a", 1), rows: 65536 }), bad);
    assert.throws(
      () => store.sessions.insert({ ...session("s", "a", 1), cwd: "/".repeat(5000) }),
      bad,
    );
    assert.throws(() => store.sessions.update("s", { state: "gone" as "open" }), bad);
    assert.throws(() => store.sessions.list({ limit: 1e9 }), bad);
    assert.deepEqual(store.sessions.list(), []);
  });
});
