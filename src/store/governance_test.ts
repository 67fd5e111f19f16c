import assert from "node:assert/strict";
import { Store } from "./db.ts";
import { fakeClock, isCode, withDb } from "./_testing.ts";
import type { NewAction } from "./governance.ts";

const action = (id: string, admittedAt: number, over: Partial<NewAction> = {}): NewAction => ({
  id,
  kind: "exec",
  owner: "agt_a",
  principal: "alice",
  tenant: null,
  recipient: "local",
  summary: ["make test"],
  admitted_at: admittedAt,
  ...over,
});

Deno.test("actions are admitted, finished once and listed newest first by state and owner", () => {
  withDb((path) => {
    const clock = fakeClock(500);
    using store = Store.open(path, { clock });
    const actions = store.actions;
    actions.insert(action("act_1", 1, { tenant: "acme", recipient: "web1", kind: "fleet" }));
    actions.insert(action("act_2", 2));
    actions.insert(action("job_3", 3, { owner: "agt_b" }));
    assert.deepEqual(actions.get("act_1"), {
      id: "act_1",
      kind: "fleet",
      owner: "agt_a",
      principal: "alice",
      tenant: "acme",
      recipient: "web1",
      summary: ["make test"],
      state: "admitted",
      admitted_at: 1,
      ended_at: null,
      outcome: null,
      reconciled_by: null,
      reconciled_at: null,
      reconcile_note: null,
    });
    assert.equal(actions.finish("act_1", { state: "succeeded", outcome: { exit_code: 0 } }), true);
    assert.equal(actions.finish("act_1", { state: "failed" }), false, "finished once");
    assert.equal(actions.finish("act_none", { state: "failed" }), false);
    const done = actions.get("act_1")!;
    assert.deepEqual([done.state, done.ended_at, done.outcome], ["succeeded", 500, {
      exit_code: 0,
    }]);
    assert.deepEqual(actions.list({ limit: 10 }).map((a) => a.id), ["job_3", "act_2", "act_1"]);
    assert.deepEqual(actions.list({ state: "admitted", limit: 10 }).map((a) => a.id), [
      "job_3",
      "act_2",
    ]);
    assert.deepEqual(actions.list({ owner: "agt_a", limit: 10 }).map((a) => a.id), [
      "act_2",
      "act_1",
    ]);
    assert.deepEqual(
      actions.list({ owner: "agt_a", state: "admitted", limit: 1 }).map((a) => a.id),
      ["act_2"],
    );
    // Reconcile only settles an action whose outcome was lost.
    assert.equal(actions.reconcile("act_2", { state: "failed", by: "op", note: "n" }), false);
  });
});

Deno.test("actions beyond their bounds are INVALID_ARGUMENT and write nothing", async (t) => {
  const cases: Array<[string, Partial<NewAction>]> = [
    ["an unknown kind", { kind: "rm" as NewAction["kind"] }],
    ["a long id", { id: "act_" + "x".repeat(64) }],
    ["an empty principal", { principal: "" }],
    ["a long recipient", { recipient: "r".repeat(257) }],
    ["a summary that is not lines", { summary: "ls" as unknown as string[] }],
    ["too many summary lines", { summary: Array(65).fill("x") }],
    ["a summary over 16 KiB", { summary: Array(9).fill("é".repeat(1000)) }],
    ["a negative time", { admitted_at: -1 }],
  ];
  for (const [name, over] of cases) {
    await t.step(name, () => {
      withDb((path) => {
        using store = Store.open(path);
        assert.throws(
          () => store.actions.insert(action("act_1", 1, over)),
          isCode("INVALID_ARGUMENT"),
        );
        assert.deepEqual(store.actions.list({ limit: 10 }), []);
      });
    });
  }
  await t.step("an outcome that is not an object or is too large", () => {
    withDb((path) => {
      using store = Store.open(path);
      store.actions.insert(action("act_1", 1));
      const huge = { text: "x".repeat(70_000) };
      for (const outcome of [huge, [1] as unknown as Record<string, unknown>]) {
        assert.throws(
          () => store.actions.finish("act_1", { state: "succeeded", outcome }),
          isCode("INVALID_ARGUMENT"),
        );
      }
      assert.equal(store.actions.get("act_1")?.state, "admitted");
    });
  });
});

Deno.test("recover marks admitted actions outcome_unknown and keeps their reservations", () => {
  withDb((path) => {
    const clock = fakeClock(100);
    {
      using store = Store.open(path, { clock });
      store.actions.insert(action("act_run", 1));
      store.actions.insert(action("act_done", 2));
      store.actions.finish("act_done", { state: "succeeded" });
      store.budgets.reserve({
        action_id: "act_run",
        budget: "p/ops",
        scope_key: "global",
        window_start: 0,
        metric: "operations",
        amount: 1,
      });
    }
    clock.set(900);
    using store = Store.open(path, { clock });
    assert.deepEqual(store.recover("restart").unknownActions, ["act_run"]);
    const lost = store.actions.get("act_run")!;
    assert.deepEqual([lost.state, lost.ended_at], ["outcome_unknown", 900]);
    assert.equal(store.actions.get("act_done")?.state, "succeeded");
    assert.equal(store.budgets.reserved("p/ops", "global", 0), 1, "still held");

    clock.set(950);
    assert.equal(
      store.actions.reconcile("act_run", { state: "failed", by: "op:ann", note: "it crashed" }),
      true,
    );
    assert.equal(
      store.actions.reconcile("act_run", { state: "succeeded", by: "op:ann", note: "" }),
      false,
      "once",
    );
    const settled = store.actions.get("act_run")!;
    assert.deepEqual(
      [settled.state, settled.ended_at, settled.reconciled_by, settled.reconciled_at],
      ["failed", 900, "op:ann", 950],
    );
    assert.equal(settled.reconcile_note, "it crashed");
  });
});

Deno.test("budget usage adds up per key and window; reservations are summed and dropped per action", () => {
  withDb((path) => {
    using store = Store.open(path);
    const b = store.budgets;
    b.addUsage("p/cost", "tenant:acme", 0, 1.5);
    b.addUsage("p/cost", "tenant:acme", 0, 2);
    b.addUsage("p/cost", "tenant:acme", 3600, 7);
    b.addUsage("p/cost", "tenant:beta", 0, 1);
    assert.equal(b.used("p/cost", "tenant:acme", 0), 3.5);
    assert.equal(b.used("p/cost", "tenant:acme", 3600), 7);
    assert.equal(b.used("p/cost", "tenant:none", 0), 0);
    const r = {
      budget: "p/cost",
      scope_key: "tenant:acme",
      window_start: 0,
      metric: "cost" as const,
    };
    b.reserve({ ...r, action_id: "act_1", amount: 0.25 });
    b.reserve({ ...r, action_id: "act_2", amount: 0.5 });
    b.reserve({ ...r, action_id: "act_2", scope_key: "tenant:gamma", amount: 1 });
    assert.equal(b.reserved("p/cost", "tenant:acme", 0), 0.75);
    assert.equal(b.reserved("p/cost", "tenant:acme", 3600), 0);
    assert.deepEqual(b.reservationsOf("act_2").map((x) => x.scope_key), [
      "tenant:acme",
      "tenant:gamma",
    ]);
    assert.deepEqual(b.window("p/cost", 0, 100), [
      { scope_key: "tenant:acme", used: 3.5, reserved: 0.75 },
      { scope_key: "tenant:beta", used: 1, reserved: 0 },
      { scope_key: "tenant:gamma", used: 0, reserved: 1 },
    ]);
    assert.equal(b.dropReservations("act_2"), 2);
    assert.equal(b.dropReservations("act_2"), 0);
    assert.equal(b.reserved("p/cost", "tenant:acme", 0), 0.25);
    for (const amount of [-1, Number.NaN, Infinity]) {
      assert.throws(() => b.addUsage("p/cost", "global", 0, amount), isCode("INVALID_ARGUMENT"));
      assert.throws(
        () => b.reserve({ ...r, action_id: "act_3", amount }),
        isCode("INVALID_ARGUMENT"),
      );
    }
    assert.throws(
      () => b.reserve({ ...r, action_id: "act_3", metric: "bytes" as "cost", amount: 1 }),
      isCode("INVALID_ARGUMENT"),
    );
    assert.deepEqual(b.reservationsOf("act_3"), []);
  });
});

Deno.test("a grant is consumed once, for its action and hash, before it expires", () => {
  withDb((path) => {
    const clock = fakeClock(1000);
    using store = Store.open(path, { clock });
    const g = store.grants;
    const issue = (expires: number) =>
      g.issue({
        approval_id: "apr_1",
        action_id: "act_1",
        action_hash: "h".repeat(64),
        expires_at: expires,
      });
    const id = issue(2000);
    assert.match(id, /^grt_[0-9a-z]{12}$/);
    assert.deepEqual(g.get(id), {
      id,
      approval_id: "apr_1",
      action_id: "act_1",
      action_hash: "h".repeat(64),
      created_at: 1000,
      expires_at: 2000,
      consumed_at: null,
    });
    assert.equal(g.consume(id, "act_1", "other", 1500), "mismatch");
    assert.equal(g.consume(id, "act_2", "h".repeat(64), 1500), "mismatch");
    assert.equal(g.consume(id, "act_1", "h".repeat(64), 1500), "ok");
    assert.equal(g.consume(id, "act_1", "h".repeat(64), 1500), "replayed");
    assert.equal(g.get(id)?.consumed_at, 1500);

    const late = issue(2000);
    assert.equal(g.consume(late, "act_1", "h".repeat(64), 2000), "expired", "expires_at excluded");
    assert.equal(g.get(late)?.consumed_at, null);
    assert.equal(g.consume("grt_none", "act_1", "h", 1), "unknown");
    assert.equal(g.consume("x".repeat(100), "act_1", "h", 1), "unknown");
    assert.equal(g.consume(late, "act_1", "h".repeat(200), 1500), "mismatch");
    assert.deepEqual(g.forAction("act_1").map((r) => r.id).sort(), [id, late].sort());
    assert.deepEqual(g.forAction("act_2"), []);
    assert.throws(() => issue(-1), isCode("INVALID_ARGUMENT"));
  });
});
