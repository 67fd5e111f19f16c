import assert from "node:assert/strict";
import { Store } from "./db.ts";
import { fakeClock, isCode, withDb } from "./_testing.ts";
import { MAX_VOTES, type NewApproval } from "./approvals.ts";
import type { TermadaError } from "../shared/mod.ts";

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

Deno.test("approvals keep requirements and take votes, in order, only while pending", () => {
  withDb((path) => {
    using store = Store.open(path);
    const requirements = { quorum: 2, roles: ["sre"], mfa: true, exclude_requester: true };
    store.approvals.insert({ id: "apr_1", ...BASE, requirements });
    store.approvals.insert({ id: "apr_2", ...BASE });
    assert.deepEqual(store.approvals.get("apr_1")?.requirements, requirements);
    assert.deepEqual(store.approvals.get("apr_2")?.requirements, null);
    assert.deepEqual(store.approvals.get("apr_2")?.votes, []);

    const first = { by: "op:ann", principal: "ann", roles: ["sre"], amr: ["pwd", "otp"], at: 5 };
    const yes = { ...first, approve: true, reason: "looks right" };
    const no = { ...first, by: "op:bob", principal: "bob", approve: false, at: 6 };
    assert.deepEqual(store.approvals.addVote("apr_1", yes), [yes]);
    assert.deepEqual(store.approvals.addVote("apr_1", no), [yes, no]);
    assert.deepEqual(store.approvals.get("apr_1")?.votes, [yes, no]);

    // Only the known fields are stored.
    const extra = { ...no, at: 7, secret: "x" } as typeof no;
    assert.deepEqual(store.approvals.addVote("apr_2", extra).at(-1), { ...no, at: 7 });

    store.approvals.decide("apr_1", { status: "approved", decided_by: "x", decision_reason: null });
    assert.throws(() => store.approvals.addVote("apr_1", yes), (e: unknown) => {
      assert.ok(isCode("INVALID_ARGUMENT")(e));
      assert.match((e as Error).message, /already approved/);
      return true;
    });
    assert.throws(() => store.approvals.addVote("apr_none", yes), isCode("NOT_FOUND"));
    assert.throws(
      () => store.approvals.addVote("apr_2", { ...yes, roles: "sre" as unknown as string[] }),
      isCode("INVALID_ARGUMENT"),
    );
    assert.throws(
      () =>
        store.approvals.insert({
          id: "apr_3",
          ...BASE,
          requirements: { ...requirements, quorum: 0 },
        }),
      isCode("INVALID_ARGUMENT"),
    );
    assert.equal(store.approvals.get("apr_1")?.votes.length, 2, "nothing written");
  });
});

Deno.test("an approval holds at most MAX_VOTES votes", () => {
  withDb((path) => {
    using store = Store.open(path);
    store.approvals.insert({ id: "apr_1", ...BASE });
    const vote = (i: number) => ({
      by: `op:${i}`,
      principal: `p${i}`,
      roles: [],
      amr: [],
      approve: false,
      at: i,
    });
    for (let i = 1; i <= MAX_VOTES; i++) {
      assert.equal(store.approvals.addVote("apr_1", vote(i)).length, i);
    }
    assert.throws(() => store.approvals.addVote("apr_1", vote(99)), (e: unknown) => {
      assert.ok(isCode("QUOTA_EXCEEDED")(e));
      assert.equal((e as TermadaError).retriable, false);
      return true;
    });
    assert.equal(store.approvals.get("apr_1")?.votes.length, MAX_VOTES);
  });
});
