/**
 * Governance in the control layer, on the real gateway, approval book, ledger and store:
 * budgets under concurrent admissions never overspend (exact count), a grant is used once, an
 * approval whose action the policy now denies is refused at consume, and approvers are counted
 * by proven principal (the static token is one, whatever name it gives).
 */
import assert from "node:assert/strict";
import { TermadaError } from "../shared/mod.ts";
import type { BudgetRule } from "../governance/mod.ts";
import type { PolicyPort, PolicyVerdict } from "./gateway.ts";
import type { Actor } from "./recorder.ts";
import { testRuntime } from "./_test_util.ts";

const A = "agent-a";
const OPS: BudgetRule = {
  policy: "p",
  name: "ops",
  scope: "principal",
  metric: "operations",
  limit: 20,
  windowMs: 3_600_000,
};

function port(o: { confirm?: () => PolicyVerdict; budgets?: BudgetRule[] } = {}): PolicyPort {
  return {
    decide: (_a, command) =>
      command[0] === "touch" && o.confirm
        ? o.confirm()
        : { action: "allow", reason: "allowed", rule: { list: "allow", pattern: "*" } },
    decideLine: () => ({ action: "allow", reason: "allowed" }),
    budgetsFor: () => ({ rules: o.budgets ?? [], principal: "dave", production: false }),
  };
}

const windowStart = () => Math.floor(Date.now() / 3_600_000) * 3_600_000;

const operator = (principal: string, roles: string[] = [], amr: string[] = []): Actor => ({
  kind: "operator",
  id: principal,
  auth: { via: "jwt", principal, roles, amr },
});

Deno.test("50 concurrent admissions against a budget of 20: exactly 20 run, 30 are BUDGET_EXCEEDED", async () => {
  await using rt = await testRuntime({ policy: port({ budgets: [OPS] }) });
  // Four agents behind one principal (each within its own 16 background jobs): the budget is
  // the principal's.
  const owners = ["a0", "a1", "a2", "a3"];
  const results = await Promise.allSettled(
    Array.from(
      { length: 50 },
      (_, i) => rt.engine.start(owners[i % 4]!, { command: ["true"], mode: "background" }),
    ),
  );

  const admitted = results.filter((r) => r.status === "fulfilled");
  const refused = results.filter((r) =>
    r.status === "rejected" && r.reason instanceof TermadaError &&
    r.reason.code === "BUDGET_EXCEEDED"
  );
  const other = results.filter((r) => r.status === "rejected" && !refused.includes(r));
  assert.deepEqual(other.map((r) => String((r as PromiseRejectedResult).reason)), []);
  assert.equal(admitted.length, 20);
  assert.equal(refused.length, 30);
  for (const r of admitted) {
    const job = (r as PromiseFulfilledResult<{ job_id: string; owner?: string }>).value;
    const owner = owners.find((o) => {
      try {
        rt.engine.jobOf(o, job.job_id);
        return true;
      } catch {
        return false; // another agent's job
      }
    })!;
    await rt.engine.wait(owner, { job_id: job.job_id });
  }
  // The trail settles each job's budget when its end is stored (just after its reply).
  for (let i = 0; i < 200; i++) {
    if (rt.store.actions.list({ state: "admitted", limit: 100 }).length === 0) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.equal(rt.store.actions.list({ state: "succeeded", limit: 100 }).length, 20);
  assert.equal(rt.store.budgets.used("p/ops", "principal:dave", windowStart()), 20);
  const e = refused[0] as PromiseRejectedResult;
  assert.equal(e.reason.details.scope_key, "principal:dave");
  assert.equal(e.reason.details.limit, 20);
});

Deno.test("an approval: one vote per principal, the static token is one principal, the grant is used once", async () => {
  await using rt = await testRuntime({
    policy: port({
      confirm: () => ({
        action: "confirm",
        reason: "needs two",
        approval: { quorum: 2, roles: [], mfa: false, exclude_requester: false },
      }),
    }),
    confirmTimeoutMs: 60_000,
  });
  const r = await rt.engine.start(A, { command: ["touch", `${rt.dir}/x`], mode: "background" });
  const id = r.approval_id!;
  const first = await rt.ops.approve({ kind: "operator", id: "dash" }, id);
  assert.deepEqual(first, { status: "pending", votes: 1, quorum: 2 });
  // Another name with the same static token is the same principal.
  await assert.rejects(
    rt.ops.approve({ kind: "operator", id: "cli:root" }, id),
    /already approved/,
  );
  const second = await rt.ops.approve(operator("bob"), id);
  assert.equal(second.status, "approved");
  const done = await rt.engine.wait(A, { job_id: r.job_id });
  assert.equal(done.status, "exited");
  // The grant that let it run cannot be used again.
  const grant = rt.store.grants.forAction(r.job_id)[0]!;
  assert.notEqual(grant.consumed_at, null);
  assert.equal(
    rt.store.grants.consume(grant.id, r.job_id, grant.action_hash, Date.now()),
    "replayed",
  );
  assert.equal(rt.store.grants.consume(grant.id, r.job_id, "0".repeat(64), Date.now()), "replayed");
});

Deno.test("approved, but the policy now denies it: refused at consume, nothing runs", async () => {
  let now: PolicyVerdict = { action: "confirm", reason: "needs one" };
  await using rt = await testRuntime({
    policy: port({ confirm: () => now }),
    confirmTimeoutMs: 60_000,
  });
  const file = `${rt.dir}/never`;
  const r = await rt.engine.start(A, { command: ["touch", file], mode: "background" });
  now = { action: "deny", reason: "touch is denied now" };
  await assert.rejects(rt.ops.approve(operator("bob"), r.approval_id!), /now denies it/);
  const done = await rt.engine.wait(A, { job_id: r.job_id });
  assert.equal(done.status, "denied");
  await assert.rejects(Deno.stat(file));
  const refused = rt.records().filter((x) => x.event === "approval.consume_refused");
  assert.equal(refused.length, 1);
});

Deno.test("requirements: roles, MFA and the requester's exclusion are checked per approver", async () => {
  await using rt = await testRuntime({
    policy: {
      ...port({
        confirm: () => ({
          action: "confirm",
          reason: "prod",
          approval: { quorum: 1, roles: ["sre"], mfa: true, exclude_requester: true },
        }),
      }),
    },
    confirmTimeoutMs: 60_000,
  });
  const r = await rt.engine.start(A, { command: ["touch", `${rt.dir}/y`], mode: "background" });
  const id = r.approval_id!;
  await assert.rejects(rt.ops.approve(operator("bob", ["dev"], ["otp"]), id), /role "sre"/);
  await assert.rejects(rt.ops.approve(operator("bob", ["sre"], ["pwd"]), id), /second factor/);
  await assert.rejects(rt.ops.approve({ kind: "operator", id: "dash" }, id), /role "sre"/);
  // Without whoIs the requester is agent:<id>; an operator with that principal is excluded.
  await assert.rejects(
    rt.ops.approve(operator(`agent:${A}`, ["sre"], ["mfa"]), id),
    /excludes the requester/,
  );
  assert.equal((await rt.ops.approve(operator("carol", ["sre"], ["hwk"]), id)).status, "approved");
  assert.equal((await rt.engine.wait(A, { job_id: r.job_id })).status, "exited");
  const votes = rt.store.approvals.get(id)!.votes;
  assert.deepEqual(votes.map((v) => [v.principal, v.amr]), [["carol", ["hwk"]]]);
});
