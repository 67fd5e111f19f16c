import assert from "node:assert/strict";
import { Store } from "./db.ts";
import { fakeClock, isCode, withDb } from "./_testing.ts";
import type { NewApproval } from "./approvals.ts";

const BASE: Omit<NewApproval, "id"> = {
  job_id: "job_aaaaaaaaaaaa",
  owner: "alice",
  session_id: "ses_x",
  command: ["rm", "-rf", "build"],
  rule: "rm *",
  reason: "confirm rule",
  requested_at: 1,
  expires_at: 2,
};

Deno.test("approvals are recorded, decided once, and expire at recovery", () => {
  withDb((path) => {
    const clock = fakeClock(700);
    using store = Store.open(path, { clock });
    const approvals = store.approvals;
    approvals.insert({ id: "apr_1", ...BASE });
    approvals.insert({ id: "apr_2", ...BASE, job_id: "job_bbbbbbbbbbbb", requested_at: 3 });
    assert.deepEqual(approvals.list({ pending: true, limit: 10 }).map((a) => a.id), [
      "apr_1",
      "apr_2",
    ]);
    assert.equal(
      approvals.decide("apr_1", {
        status: "approved",
        decided_by: "operator:cli",
        decision_reason: "ok",
      }),
      true,
    );
    assert.equal(
      approvals.decide("apr_1", {
        status: "denied",
        decided_by: "operator:cli",
        decision_reason: null,
      }),
      false,
      "decided once",
    );
    assert.equal(
      approvals.decide("apr_none", { status: "denied", decided_by: "x", decision_reason: null }),
      false,
    );
    const a = approvals.get("apr_1")!;
    assert.deepEqual([a.status, a.decided_by, a.decision_reason, a.decided_at], [
      "approved",
      "operator:cli",
      "ok",
      700,
    ]);
    assert.deepEqual(a.command, BASE.command);
    assert.deepEqual(approvals.list({ limit: 10 }).map((r) => r.id), ["apr_2", "apr_1"]);
    assert.deepEqual(store.recover("restart").expiredApprovals, ["apr_2"]);
    assert.equal(approvals.get("apr_2")!.status, "expired");
    assert.equal(approvals.get("apr_none"), undefined);
  });
});

Deno.test("approvals.ofJob is the latest approval of a job", () => {
  withDb((path) => {
    using store = Store.open(path);
    store.approvals.insert({ id: "apr_1", ...BASE, requested_at: 1 });
    store.approvals.insert({ id: "apr_2", ...BASE, requested_at: 5 });
    assert.equal(store.approvals.ofJob(BASE.job_id)?.id, "apr_2");
    assert.equal(store.approvals.ofJob("job_none"), undefined);
  });
});

Deno.test("approvals.decide refuses a status that is not a decision", () => {
  withDb((path) => {
    using store = Store.open(path);
    store.approvals.insert({ id: "apr_1", ...BASE });
    assert.throws(
      () =>
        store.approvals.decide("apr_1", {
          status: "pending" as "denied",
          decided_by: "x",
          decision_reason: null,
        }),
      isCode("INVALID_ARGUMENT"),
    );
    assert.equal(store.approvals.get("apr_1")?.status, "pending");
  });
});
