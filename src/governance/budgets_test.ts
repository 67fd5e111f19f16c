import assert from "node:assert/strict";
import { type Clock, TermadaError } from "../shared/mod.ts";
import { Store } from "../store/mod.ts";
import {
  type BudgetExceededDetails,
  BudgetLedger,
  type BudgetRule,
  type BudgetSubject,
} from "./budgets.ts";

const HOUR = 3_600_000;
/** 2026-01-01T00:00:00Z, an hour and a day boundary. */
const T0 = Date.UTC(2026, 0, 1);

function fakeClock(start = T0 + 1000): Clock & { set(t: number): void } {
  let t = start;
  return { now: () => t, mono: () => t, set: (v) => (t = v) };
}

/** A fresh store (and its directory), removed when disposed. */
function tempStore(clock: Clock): Store & { path: string; dir: string } {
  const dir = Deno.makeTempDirSync({ prefix: "termada-budgets-" });
  const path = `${dir}/state/termada.db`;
  const store = Store.open(path, { clock });
  const close = store.close.bind(store);
  return Object.assign(store, {
    path,
    dir,
    close: () => {
      close();
      Deno.removeSync(dir, { recursive: true });
    },
  });
}

let seq = 0;
function subject(over: Partial<BudgetSubject> = {}): BudgetSubject {
  return {
    actionId: `act_${String(++seq).padStart(12, "0")}`,
    kind: "exec",
    principal: "alice",
    recipient: "local",
    production: false,
    readOnly: false,
    ...over,
  };
}

const ACTION = { owner: "agt_a", summary: ["make deploy"] };

function rule(over: Partial<BudgetRule> = {}): BudgetRule {
  return {
    policy: "default",
    name: "ops",
    scope: "global",
    metric: "operations",
    limit: 2,
    windowMs: HOUR,
    ...over,
  };
}

function exceeded(check?: (d: BudgetExceededDetails, e: TermadaError) => void) {
  return (e: unknown): boolean => {
    assert.ok(e instanceof TermadaError, String(e));
    assert.equal(e.code, "BUDGET_EXCEEDED");
    check?.(e.details as unknown as BudgetExceededDetails, e);
    return true;
  };
}

/** Admits `n` actions of `over`; returns their ids. */
function admitN(
  ledger: BudgetLedger,
  rules: BudgetRule[],
  n: number,
  over: Partial<BudgetSubject> = {},
): string[] {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const s = subject(over);
    ledger.admit(rules, s, ACTION);
    ids.push(s.actionId);
  }
  return ids;
}

Deno.test("an operations budget refuses the action past its limit and writes nothing for it", () => {
  const clock = fakeClock();
  using store = tempStore(clock);
  const ledger = new BudgetLedger(store, { clock });
  const rules = [rule()];
  const [a] = admitN(ledger, rules, 2);
  const refused = subject();
  assert.throws(
    () => ledger.admit(rules, refused, ACTION),
    exceeded((d, e) => {
      assert.deepEqual(d, {
        budget: "default/ops",
        scope: "global",
        scope_key: "global",
        metric: "operations",
        limit: 2,
        used: 0,
        reserved: 2,
        reset_at: new Date(T0 + HOUR).toISOString(),
      });
      assert.equal(e.retriable, true);
      assert.match(e.message, /budget "default\/ops" \(global\) is exhausted/);
      assert.match(e.hint ?? "", /resets at 2026-01-01T01:00:00.000Z/);
    }),
  );
  assert.equal(store.actions.get(refused.actionId), undefined, "no row for a refusal");
  assert.deepEqual(store.budgets.reservationsOf(refused.actionId), []);
  const row = store.actions.get(a!)!;
  assert.deepEqual([row.state, row.kind, row.owner, row.summary, row.admitted_at], [
    "admitted",
    "exec",
    "agt_a",
    ["make deploy"],
    clock.now(),
  ]);
});

Deno.test("each scope counts its own key; kinds, match and an absent tenant narrow a rule", async (t) => {
  await t.step("principal, tenant and recipient scopes count per value", () => {
    const clock = fakeClock();
    using store = tempStore(clock);
    const ledger = new BudgetLedger(store, { clock });
    for (const scope of ["principal", "tenant", "recipient"] as const) {
      const rules = [rule({ name: scope, scope, limit: 1 })];
      const base = { principal: "p1", tenant: "t1", recipient: "r1" };
      const other = { principal: "p2", tenant: "t2", recipient: "r2" };
      admitN(ledger, rules, 1, base);
      admitN(ledger, rules, 1, other);
      assert.throws(
        () => ledger.admit(rules, subject(base), ACTION),
        exceeded((d) => {
          assert.equal(d.scope, scope);
          assert.equal(d.scope_key, `${scope}:${base[scope]}`);
        }),
      );
    }
  });

  await t.step("a rule with kinds counts only those kinds", () => {
    const clock = fakeClock();
    using store = tempStore(clock);
    const ledger = new BudgetLedger(store, { clock });
    const rules = [rule({ limit: 1, kinds: ["fleet"] })];
    admitN(ledger, rules, 3, { kind: "exec" });
    admitN(ledger, rules, 1, { kind: "fleet" });
    assert.throws(() => ledger.admit(rules, subject({ kind: "fleet" }), ACTION), exceeded());
  });

  await t.step("a rule with match applies to that value only", () => {
    const clock = fakeClock();
    using store = tempStore(clock);
    const ledger = new BudgetLedger(store, { clock });
    const rules = [rule({ scope: "tenant", match: "acme", limit: 1 })];
    admitN(ledger, rules, 3, { tenant: "beta" });
    admitN(ledger, rules, 1, { tenant: "acme" });
    assert.throws(() => ledger.admit(rules, subject({ tenant: "acme" }), ACTION), exceeded());
  });

  await t.step("a tenant budget does not apply to an action without a tenant", () => {
    const clock = fakeClock();
    using store = tempStore(clock);
    const ledger = new BudgetLedger(store, { clock });
    const rules = [rule({ scope: "tenant", limit: 0 })];
    const [id] = admitN(ledger, rules, 3);
    assert.deepEqual(store.budgets.reservationsOf(id!), []);
    assert.throws(() => ledger.admit(rules, subject({ tenant: "acme" }), ACTION), exceeded());
  });

  await t.step("every rule must fit: the first exhausted one is reported", () => {
    const clock = fakeClock();
    using store = tempStore(clock);
    const ledger = new BudgetLedger(store, { clock });
    const rules = [
      rule({ name: "wide", limit: 10 }),
      rule({ name: "narrow", scope: "principal", limit: 1 }),
    ];
    admitN(ledger, rules, 1);
    const s = subject();
    assert.throws(
      () => ledger.admit(rules, s, ACTION),
      exceeded((d) => {
        assert.equal(d.budget, "default/narrow");
      }),
    );
    assert.equal(store.budgets.reserved("default/wide", "global", T0), 1, "nothing of s held");
  });
});

Deno.test("prod_changes counts only production changes that are not read-only", () => {
  const clock = fakeClock();
  using store = tempStore(clock);
  const ledger = new BudgetLedger(store, { clock });
  const rules = [rule({ metric: "prod_changes", limit: 1 })];
  admitN(ledger, rules, 3, { production: false });
  admitN(ledger, rules, 3, { production: true, readOnly: true });
  const [change] = admitN(ledger, rules, 1, { production: true });
  assert.throws(() => ledger.admit(rules, subject({ production: true }), ACTION), exceeded());
  admitN(ledger, rules, 1, { production: true, readOnly: true });
  ledger.settle(change!, { ok: true });
  assert.equal(store.budgets.used("default/ops", "global", T0), 1);
  assert.throws(
    () => ledger.admit(rules, subject({ production: true }), ACTION),
    exceeded((d) => assert.deepEqual([d.used, d.reserved], [1, 0])),
  );
});

Deno.test("cost and runtime budgets reserve the estimate and count the actual value", async (t) => {
  for (const metric of ["cost", "runtime_s"] as const) {
    await t.step(metric, () => {
      const clock = fakeClock();
      using store = tempStore(clock);
      const ledger = new BudgetLedger(store, { clock });
      const rules = [rule({ metric, limit: 1 })];
      const a = subject();
      ledger.admit(rules, a, ACTION, { [metric]: 0.1 });
      const b = subject();
      ledger.admit(rules, b, ACTION, { [metric]: 0.2 });
      assert.equal(store.budgets.reserved("default/ops", "global", T0), 0.1 + 0.2);
      // 0.1 + 0.2 + 0.7 is 1.0000000000000002 in floats: it still fits exactly.
      const c = subject();
      ledger.admit(rules, c, ACTION, { [metric]: 0.7 });
      assert.throws(() => ledger.admit(rules, subject(), ACTION, { [metric]: 0.01 }), exceeded());
      ledger.settle(a.actionId, { ok: true, [metric]: 0.05 }); // the actual value
      ledger.settle(b.actionId, { ok: false }); // no actual value: the estimate
      ledger.release(c.actionId, "approval denied");
      assert.equal(store.budgets.used("default/ops", "global", T0), 0.05 + 0.2);
      assert.equal(store.budgets.reserved("default/ops", "global", T0), 0);
      // An unknown estimate reserves nothing but needs something left.
      const d = subject();
      ledger.admit(rules, d, ACTION);
      ledger.settle(d.actionId, { ok: true, [metric]: 0.75 });
      assert.equal(store.budgets.used("default/ops", "global", T0), 1);
      assert.throws(
        () => ledger.admit(rules, subject(), ACTION),
        exceeded((det) => assert.deepEqual([det.metric, det.used, det.limit], [metric, 1, 1])),
      );
    });
  }
});

Deno.test("a failures budget refuses once failures reach it; successes do not count", () => {
  const clock = fakeClock();
  using store = tempStore(clock);
  const ledger = new BudgetLedger(store, { clock });
  const rules = [rule({ metric: "failures", scope: "principal", limit: 2 })];
  // Nothing is held: any number may run at once while fewer than 2 failed.
  const ids = admitN(ledger, rules, 5);
  ledger.settle(ids[0]!, { ok: true });
  ledger.settle(ids[1]!, { ok: false });
  admitN(ledger, rules, 1);
  ledger.settle(ids[2]!, { ok: false });
  assert.throws(
    () => ledger.admit(rules, subject(), ACTION),
    exceeded((d) => {
      assert.deepEqual([d.scope_key, d.used, d.reserved, d.limit], ["principal:alice", 2, 0, 2]);
    }),
  );
  admitN(ledger, rules, 1, { principal: "bob" });
  // The ones admitted before still end normally.
  ledger.settle(ids[3]!, { ok: false });
  assert.equal(store.budgets.used("default/ops", "principal:alice", T0), 3);
});

Deno.test("windows are aligned to the epoch: capacity returns in the next one, reset_at is its end", () => {
  const clock = fakeClock(T0 + 59 * 60_000); // 00:59
  using store = tempStore(clock);
  const ledger = new BudgetLedger(store, { clock });
  const rules = [rule({ limit: 1 })];
  const [first] = admitN(ledger, rules, 1);
  assert.throws(
    () => ledger.admit(rules, subject(), ACTION),
    exceeded((d) => {
      assert.equal(d.reset_at, "2026-01-01T01:00:00.000Z");
    }),
  );
  clock.set(T0 + HOUR); // 01:00, a new window
  const [second] = admitN(ledger, rules, 1);
  assert.throws(
    () => ledger.admit(rules, subject(), ACTION),
    exceeded((d) => {
      assert.equal(d.reset_at, "2026-01-01T02:00:00.000Z");
      assert.deepEqual([d.used, d.reserved], [0, 1]);
    }),
  );
  // The first settles late: it counts in the window it was admitted in.
  ledger.settle(first!, { ok: true });
  ledger.settle(second!, { ok: true });
  assert.equal(store.budgets.used("default/ops", "global", T0), 1);
  assert.equal(store.budgets.used("default/ops", "global", T0 + HOUR), 1);
  assert.deepEqual(ledger.usage(rules), [{
    budget: "default/ops",
    scope_key: "global",
    metric: "operations",
    used: 1,
    reserved: 0,
    limit: 1,
    reset_at: "2026-01-01T02:00:00.000Z",
  }]);

  // A daily window starts at midnight UTC whatever the hour.
  const daily = [rule({ name: "daily", windowMs: 24 * HOUR, limit: 0 })];
  clock.set(T0 + 23 * HOUR);
  assert.throws(
    () => ledger.admit(daily, subject(), ACTION),
    exceeded((d) => {
      assert.equal(d.reset_at, "2026-01-02T00:00:00.000Z");
    }),
  );

  // A budget that never resets is not retriable.
  const forever = [rule({ name: "forever", windowMs: null, limit: 1 })];
  const [f] = admitN(ledger, forever, 1);
  ledger.settle(f!, { ok: true });
  clock.set(T0 + 1000 * HOUR);
  assert.throws(
    () => ledger.admit(forever, subject(), ACTION),
    exceeded((d, e) => {
      assert.equal(d.reset_at, null);
      assert.equal(e.retriable, false);
      assert.match(e.hint ?? "", /never resets/);
    }),
  );
});

Deno.test("50 concurrent admissions against an operations limit of 20 never overspend", async () => {
  const clock = fakeClock();
  using store = tempStore(clock);
  const ledger = new BudgetLedger(store, { clock });
  const rules = [rule({ limit: 20, scope: "tenant" })];
  const results = await Promise.all(
    Array.from({ length: 50 }, async (_, i) => {
      // Interleave: half wait a microtask, half a timer.
      if (i % 2 === 0) await Promise.resolve();
      else await new Promise((resolve) => setTimeout(resolve, i % 5));
      const s = subject({ tenant: "acme" });
      try {
        ledger.admit(rules, s, ACTION);
        await Promise.resolve();
        return s.actionId;
      } catch (e) {
        assert.ok(exceeded()(e));
        return undefined;
      }
    }),
  );
  const admitted = results.filter((id): id is string => id !== undefined);
  assert.equal(admitted.length, 20);
  assert.equal(results.length - admitted.length, 30);
  await Promise.all(admitted.map(async (id, i) => {
    await new Promise((resolve) => setTimeout(resolve, i % 3));
    ledger.settle(id, { ok: i % 2 === 0 });
  }));
  assert.equal(store.budgets.used("default/ops", "tenant:acme", T0), 20);
  assert.equal(store.budgets.reserved("default/ops", "tenant:acme", T0), 0);
  assert.equal(store.actions.list({ limit: 100 }).length, 20);
});

Deno.test("release gives the capacity back; an action is settled or released only once", () => {
  const clock = fakeClock();
  using store = tempStore(clock);
  const ledger = new BudgetLedger(store, { clock });
  const rules = [rule({ limit: 1 })];
  const [a] = admitN(ledger, rules, 1);
  assert.throws(() => ledger.admit(rules, subject(), ACTION), exceeded());
  ledger.release(a!, "approval expired");
  const row = store.actions.get(a!)!;
  assert.deepEqual([row.state, row.outcome], ["released", { reason: "approval expired" }]);
  const [b] = admitN(ledger, rules, 1);
  ledger.settle(b!, { ok: true, facts: { exit_code: 0 } });
  assert.deepEqual(store.actions.get(b!)?.outcome, { exit_code: 0 });
  const once = (state: string) => (e: unknown) =>
    e instanceof TermadaError && e.code === "INVALID_ARGUMENT" && e.details?.state === state;
  assert.throws(() => ledger.settle(b!, { ok: true }), once("succeeded"));
  assert.throws(() => ledger.release(b!, "late"), once("succeeded"));
  assert.throws(() => ledger.settle(a!, { ok: false }), once("released"));
  assert.throws(
    () => ledger.settle("act_none", { ok: true }),
    (e: unknown) => e instanceof TermadaError && e.code === "NOT_FOUND",
  );
  assert.equal(store.budgets.used("default/ops", "global", T0), 1, "counted once");
});

Deno.test("after a restart admitted actions are outcome_unknown, hold their budget, and reconcile settles them", () => {
  const clock = fakeClock();
  const dir = Deno.makeTempDirSync({ prefix: "termada-budgets-" });
  const path = `${dir}/state/termada.db`;
  try {
    const rules = [
      rule({ limit: 3, windowMs: null }),
      rule({ name: "fails", metric: "failures", limit: 1, windowMs: null }),
    ];
    let ids: string[];
    {
      using store = Store.open(path, { clock });
      const ledger = new BudgetLedger(store, { clock });
      ids = admitN(ledger, rules, 3);
      ledger.settle(ids[2]!, { ok: true });
      // The daemon dies here: nothing settles the first two.
    }
    clock.set(T0 + 5000);
    using store = Store.open(path, { clock });
    const ledger = new BudgetLedger(store, { clock });
    assert.deepEqual(store.recover("restart").unknownActions.sort(), ids.slice(0, 2).sort());
    const lost = store.actions.get(ids[0]!)!;
    assert.deepEqual([lost.state, lost.ended_at], ["outcome_unknown", T0 + 5000]);
    assert.throws(() => ledger.settle(ids[0]!, { ok: true }), /outcome unknown/);
    // Still held: the budget stays full until an operator says what happened.
    assert.throws(
      () => ledger.admit(rules, subject(), ACTION),
      exceeded((d) => {
        assert.deepEqual([d.used, d.reserved], [1, 2]);
      }),
    );

    clock.set(T0 + 6000);
    ledger.reconcile(ids[0]!, "succeeded", "op:ann", "the deploy went out");
    ledger.reconcile(ids[1]!, "failed", "op:ann", "it never finished");
    const settled = store.actions.get(ids[1]!)!;
    assert.deepEqual(
      [settled.state, settled.reconciled_by, settled.reconciled_at, settled.reconcile_note],
      ["failed", "op:ann", T0 + 6000, "it never finished"],
    );
    assert.equal(store.budgets.used("default/ops", "global", 0), 3);
    assert.equal(store.budgets.reserved("default/ops", "global", 0), 0);
    assert.equal(store.budgets.used("default/fails", "global", 0), 1, "the failure counts");
    assert.throws(
      () => ledger.reconcile(ids[0]!, "failed", "op:ann", "again"),
      (e: unknown) => e instanceof TermadaError && e.code === "INVALID_ARGUMENT",
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("usage lists every key of a scoped budget and the one key of a global or matched one", () => {
  const clock = fakeClock();
  using store = tempStore(clock);
  const ledger = new BudgetLedger(store, { clock });
  const perTenant = rule({ name: "t", scope: "tenant", limit: 5 });
  const acme = rule({ name: "acme", scope: "tenant", match: "acme", limit: 9, windowMs: null });
  const global = rule({ name: "g", limit: 100 });
  const rules = [perTenant, acme, global];
  const [x] = admitN(ledger, rules, 2, { tenant: "acme" });
  admitN(ledger, rules, 1, { tenant: "beta" });
  ledger.settle(x!, { ok: true });
  const reset = new Date(T0 + HOUR).toISOString();
  assert.deepEqual(ledger.usage(rules), [
    {
      budget: "default/t",
      scope_key: "tenant:acme",
      metric: "operations",
      used: 1,
      reserved: 1,
      limit: 5,
      reset_at: reset,
    },
    {
      budget: "default/t",
      scope_key: "tenant:beta",
      metric: "operations",
      used: 0,
      reserved: 1,
      limit: 5,
      reset_at: reset,
    },
    {
      budget: "default/acme",
      scope_key: "tenant:acme",
      metric: "operations",
      used: 1,
      reserved: 1,
      limit: 9,
      reset_at: null,
    },
    {
      budget: "default/g",
      scope_key: "global",
      metric: "operations",
      used: 1,
      reserved: 2,
      limit: 100,
      reset_at: reset,
    },
  ]);
  assert.deepEqual(ledger.usage([rule({ name: "unused" })]).map((u) => [u.used, u.reserved]), [
    [0, 0],
  ]);
});

Deno.test("malformed rules and amounts are programmer mistakes (RangeError)", () => {
  const clock = fakeClock();
  using store = tempStore(clock);
  const ledger = new BudgetLedger(store, { clock });
  const many = Array.from({ length: 65 }, (_, i) => rule({ name: `b${i}` }));
  assert.throws(() => ledger.admit(many, subject(), ACTION), RangeError);
  ledger.admit(many.slice(0, 64), subject(), ACTION); // 64 is fine
  const bad: BudgetRule[] = [
    rule({ limit: -1 }),
    rule({ limit: Number.NaN }),
    rule({ windowMs: 0 }),
    rule({ windowMs: 1.5 }),
    rule({ metric: "bytes" as "cost" }),
    rule({ scope: "team" as "tenant" }),
    rule({ name: "" }),
  ];
  for (const r of bad) assert.throws(() => ledger.admit([r], subject(), ACTION), RangeError);
  assert.throws(() => ledger.admit([rule(), rule()], subject(), ACTION), RangeError, "twice");
  for (const cost of [-1, Infinity, Number.NaN]) {
    assert.throws(() => ledger.admit([rule()], subject(), ACTION, { cost }), RangeError);
  }
  assert.throws(() => ledger.admit([], subject({ kind: "teleport" }), ACTION), RangeError);
  const s = subject();
  ledger.admit([], s, ACTION);
  assert.throws(() => ledger.settle(s.actionId, { ok: true, cost: -2 }), RangeError);
  assert.equal(store.actions.get(s.actionId)?.state, "admitted");
  // Bounds the store enforces reach the caller as INVALID_ARGUMENT, and write nothing.
  const long = subject({ principal: "p".repeat(300) });
  assert.throws(
    () => ledger.admit([rule({ scope: "principal" })], long, ACTION),
    (e: unknown) => e instanceof TermadaError && e.code === "INVALID_ARGUMENT",
  );
  assert.equal(store.actions.get(long.actionId), undefined);
});

Deno.test("prune bounds the governance tables: ended actions, expired grants, old windows", async () => {
  const dir = await Deno.makeTempDir();
  let now = Date.UTC(2026, 0, 1);
  const clock: Clock = { now: () => now, mono: () => now };
  const store = Store.open(`${dir}/t.db`, { clock });
  try {
    const ledger = new BudgetLedger(store, { clock });
    const rule: BudgetRule = {
      policy: "p",
      name: "h",
      scope: "global",
      metric: "operations",
      limit: 100,
      windowMs: 3_600_000,
    };
    const forever: BudgetRule = { ...rule, name: "all", windowMs: null };
    const subject = (id: string) => ({
      actionId: id,
      kind: "exec",
      principal: "p",
      recipient: "local",
      production: false,
      readOnly: false,
    });
    ledger.admit([rule, forever], subject("job_old"), { owner: "a", summary: ["x"] });
    ledger.settle("job_old", { ok: true });
    ledger.admit([rule], subject("job_open"), { owner: "a", summary: ["y"] });
    store.grants.issue({
      approval_id: "apr_x",
      action_id: "job_old",
      action_hash: "0".repeat(64),
      expires_at: now + 60_000,
    });
    now += 401 * 86_400_000;
    const pruned = ledger.prune();
    assert.deepEqual(pruned, { actions: 1, grants: 1, usage: 1 });
    assert.equal(store.actions.get("job_old"), undefined);
    assert.equal(store.actions.get("job_open")?.state, "admitted", "an unsettled action stays");
    assert.equal(store.budgets.used("p/all", "global", 0), 1, "a never-resetting budget stays");
  } finally {
    store.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("an action no budget applies to ends with one update, once, with the usual errors", () => {
  const clock = fakeClock();
  using store = tempStore(clock);
  const ledger = new BudgetLedger(store, { clock });
  const other = new BudgetLedger(store, { clock });
  const elsewhere = [rule({ kinds: ["fleet"] })];
  const once = (state: string) => (e: unknown) =>
    e instanceof TermadaError && e.code === "INVALID_ARGUMENT" && e.details?.state === state;
  const [a, b, c, d] = [
    ...admitN(ledger, [], 2),
    ...admitN(ledger, elsewhere, 2),
  ];
  for (const id of [a, b, c, d]) assert.equal(store.actions.get(id!)?.state, "admitted");
  assert.deepEqual(store.budgets.reservationsOf(c!), []);
  ledger.settle(a!, { ok: false, facts: { exit_code: 2 } });
  assert.deepEqual(
    [store.actions.get(a!)?.state, store.actions.get(a!)?.outcome],
    ["failed", { exit_code: 2 }],
  );
  assert.throws(() => ledger.settle(a!, { ok: true }), once("failed"));
  ledger.release(b!, "could not start");
  assert.throws(() => ledger.unknown(b!, {}), once("released"));
  ledger.unknown(c!, { status: "orphaned" });
  assert.equal(store.actions.get(c!)?.state, "outcome_unknown");
  // Ended by another ledger on the same store: this one finds it no longer admitted.
  other.settle(d!, { ok: true });
  assert.throws(() => ledger.settle(d!, { ok: true }), once("succeeded"));
  assert.equal(store.budgets.used("default/ops", "global", T0), 0, "nothing counted");
});
