import assert from "node:assert/strict";
import { ADAPTER_STORE_LIMITS, type NewAdapterRun } from "./store.ts";
import { isCode, isReason, openStore, tempDir } from "./_test_util.ts";

const RUN: NewAdapterRun = {
  adapter: "file.patch",
  agent: "agent-1",
  resource: "file:/tmp/x",
  input: { patch: "…" },
  plan: { files: [] },
  summary: "1 file, +1 −0",
  risk: "medium",
  reversible: true,
  idempotency_key: "idem_1",
};

Deno.test("adapter_runs: insert, then compare-and-set phase changes", async () => {
  await using dir = await tempDir();
  using s = openStore(`${dir.path}/t.db`);
  s.store.ensureSchema(); // twice is fine
  const row = s.store.insert(RUN);
  assert.match(row.id, /^run_[0-9a-z]{12}$/);
  assert.equal(row.phase, "prepared");
  assert.equal(row.version, 1);
  assert.equal(row.reversible, true);
  assert.deepEqual(row.plan, { files: [] });

  const admitted = s.store.transition(row.id, row, "admitted");
  assert.equal(admitted?.phase, "admitted");
  // A second writer with the stale version loses.
  assert.equal(s.store.transition(row.id, row, "refused"), undefined);
  const done = s.store.transition(row.id, admitted!, "executed", { receipt: { ok: 1 } });
  assert.deepEqual(done?.receipt, { ok: 1 });
  assert.equal(done?.version, 3);
  const kept = s.store.transition(row.id, done!, "verified", { verification: { holds: true } });
  assert.deepEqual(kept?.receipt, { ok: 1 }, "absent patch keys keep the stored value");
});

Deno.test("adapter_runs refuses JSON columns over 1 MiB", async () => {
  await using dir = await tempDir();
  using s = openStore(`${dir.path}/t.db`);
  const big = "x".repeat(ADAPTER_STORE_LIMITS.jsonBytes);
  assert.throws(() => s.store.insert({ ...RUN, plan: { big } }), isReason("TOO_LARGE"));
  const row = s.store.insert(RUN);
  assert.throws(
    () => s.store.transition(row.id, row, "executed", { receipt: big }),
    isReason("TOO_LARGE"),
  );
  assert.equal(s.store.get(row.id)?.phase, "prepared");
});

Deno.test("adapter_runs lists by phase and agent, bounded", async () => {
  await using dir = await tempDir();
  using s = openStore(`${dir.path}/t.db`);
  const a = s.store.insert(RUN);
  s.store.insert({ ...RUN, agent: "agent-2", idempotency_key: "idem_2" });
  s.store.transition(a.id, a, "admitted");
  assert.equal(s.store.list().length, 2);
  assert.equal(s.store.list({ agent: "agent-2" }).length, 1);
  assert.deepEqual(s.store.list({ phases: ["admitted"] }).map((r) => r.id), [a.id]);
  assert.throws(
    () => s.store.list({ limit: ADAPTER_STORE_LIMITS.listMax + 1 }),
    isCode("INVALID_ARGUMENT"),
  );
  assert.throws(() => s.store.insert({ ...RUN, idempotency_key: "idem_2" }), isCode("INTERNAL"));
});
