import assert from "node:assert/strict";
import { filePatchAdapter } from "./file_patch.ts";
import { httpRequestAdapter, type HttpRequestPlan } from "./http_request.ts";
import { AdapterRunner } from "./runner.ts";
import type { AdapterRunRow, AdapterRunStore } from "./store.ts";
import type { AnyAdapter } from "./sdk.ts";
import { allow, isReason, openStore, tempDir, ticketOptions, ticketServer } from "./_test_util.ts";

const signal = new AbortController().signal;

/** What the runner does up to `executing`, by hand: the run's intent is durable. */
async function leaveExecuting(
  store: AdapterRunStore,
  adapter: AnyAdapter,
  input: unknown,
): Promise<AdapterRunRow> {
  const p = await adapter.prepare(input, { agent: "a1", signal });
  const row = store.insert({
    adapter: adapter.name,
    agent: "a1",
    resource: p.resource,
    input,
    plan: p.plan,
    summary: p.summary,
    risk: p.risk,
    reversible: p.reversible,
    idempotency_key: `idem_${crypto.randomUUID().replaceAll("-", "")}`,
  });
  const admitted = store.transition(row.id, row, "admitted")!;
  return store.transition(row.id, admitted, "executing")!;
}

const TICKET = { method: "POST", path: "/tickets", body: { title: "t" } };

Deno.test("crash after execute, before its receipt: resume reconciles, verifies, creates once", async () => {
  await using server = ticketServer();
  await using dir = await tempDir();
  const file = `${dir.path}/t.db`;
  let id: string;
  {
    using s = openStore(file);
    const adapter = httpRequestAdapter(ticketOptions(server.url));
    const row = await leaveExecuting(s.store, adapter, TICKET);
    id = row.id;
    await adapter.execute(row.plan as HttpRequestPlan, {
      idempotencyKey: row.idempotency_key,
      signal,
    });
    // The process "dies" here: the receipt was never recorded.
  }
  using s = openStore(file);
  const runner = new AdapterRunner(s.store, {
    adapters: [httpRequestAdapter(ticketOptions(server.url))],
  });
  const resumed = await runner.resume();
  assert.deepEqual(resumed.map((r) => [r.id, r.phase]), [[id, "verified"]]);
  assert.equal((resumed[0]!.receipt as { source: string; id: string }).source, "reconcile");
  assert.equal((resumed[0]!.receipt as { id: string }).id, "t1");
  assert.equal(server.creations(), 1);
  assert.equal(server.keys.length, 1, "nothing was sent again");
  assert.deepEqual(await runner.resume(), [], "nothing left to resume");
});

Deno.test("crash before execute: resume executes once with the same idempotency key", async () => {
  await using server = ticketServer();
  await using dir = await tempDir();
  const file = `${dir.path}/t.db`;
  let key: string;
  {
    using s = openStore(file);
    key = (await leaveExecuting(s.store, httpRequestAdapter(ticketOptions(server.url)), TICKET))
      .idempotency_key;
  }
  using s = openStore(file);
  const runner = new AdapterRunner(s.store, {
    adapters: [httpRequestAdapter(ticketOptions(server.url))],
  });
  const [run] = await runner.resume();
  assert.equal(run?.phase, "verified");
  assert.equal(server.creations(), 1);
  assert.deepEqual(server.keys, [key]);
});

Deno.test("crash after the receipt: resume verifies", async () => {
  await using server = ticketServer();
  await using dir = await tempDir();
  const file = `${dir.path}/t.db`;
  {
    using s = openStore(file);
    const adapter = httpRequestAdapter(ticketOptions(server.url));
    const row = await leaveExecuting(s.store, adapter, TICKET);
    const receipt = await adapter.execute(row.plan as HttpRequestPlan, {
      idempotencyKey: row.idempotency_key,
      signal,
    });
    s.store.transition(row.id, row, "executed", { receipt });
  }
  using s = openStore(file);
  const runner = new AdapterRunner(s.store, {
    adapters: [httpRequestAdapter(ticketOptions(server.url))],
  });
  const [run] = await runner.resume();
  assert.equal(run?.phase, "verified");
  assert.deepEqual(run?.observed, { path: "/tickets/t1", status: 200, expected: 200 });
  assert.equal(server.creations(), 1);
});

Deno.test("crash mid file.patch: resume finishes it once", async () => {
  await using dir = await tempDir();
  const root = `${dir.path}/root`;
  await Deno.mkdir(root);
  await Deno.writeTextFile(`${root}/a.txt`, "a\n");
  const patch = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n";
  const file = `${dir.path}/t.db`;
  {
    using s = openStore(file);
    await leaveExecuting(s.store, filePatchAdapter({ roots: [root] }), { patch });
  }
  using s = openStore(file);
  const runner = new AdapterRunner(s.store, { adapters: [filePatchAdapter({ roots: [root] })] });
  const [run] = await runner.resume();
  assert.equal(run?.phase, "verified");
  assert.equal(await Deno.readTextFile(`${root}/a.txt`), "b\n");
});

Deno.test("resume: no reconcile means outcome_unknown; prepared runs are refused", async () => {
  await using dir = await tempDir();
  using s = openStore(`${dir.path}/t.db`);
  const root = `${dir.path}`;
  const base = filePatchAdapter({ roots: [root] });
  const blind: AnyAdapter = { ...base, name: "blind.patch", reconcile: undefined };
  await Deno.writeTextFile(`${root}/a.txt`, "a\n");
  const patch = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n";
  const executing = await leaveExecuting(s.store, blind, { patch });
  const prepared = s.store.insert({
    adapter: "blind.patch",
    agent: "a1",
    resource: "file:x",
    input: {},
    plan: {},
    summary: "s",
    risk: "low",
    reversible: false,
    idempotency_key: "idem_p",
  });
  const runner = new AdapterRunner(s.store, { adapters: [blind] });
  const runs = await runner.resume();
  assert.deepEqual(
    runs.map((r) => [r.id, r.phase]).sort(),
    [[executing.id, "outcome_unknown"], [prepared.id, "refused"]].sort(),
  );
  assert.equal(
    await Deno.readTextFile(`${root}/a.txt`),
    "a\n",
    "an unknown outcome is not retried",
  );
});

Deno.test("two live resumers: one records the outcome, the key keeps it to one creation", async () => {
  // resume() is meant for start-up, with no other runner live on the database (the daemon's
  // lock). If two run anyway, the compare-and-set lets only one record each phase, and the
  // idempotency key keeps the side effect single.
  await using server = ticketServer();
  await using dir = await tempDir();
  using s = openStore(`${dir.path}/t.db`);
  const row = await leaveExecuting(s.store, httpRequestAdapter(ticketOptions(server.url)), TICKET);
  using s2 = openStore(`${dir.path}/t.db`);
  const one = new AdapterRunner(s.store, {
    adapters: [httpRequestAdapter(ticketOptions(server.url))],
  });
  const two = new AdapterRunner(s2.store, {
    adapters: [httpRequestAdapter(ticketOptions(server.url))],
  });
  const [a, b] = await Promise.all([one.resume(), two.resume()]);
  assert.equal(a.length + b.length, 1, "only one resumer recorded the run");
  assert.equal(server.creations(), 1);
  assert.deepEqual(new Set(server.keys), new Set([row.idempotency_key]));
  assert.equal(one.get(row.id)?.phase, "verified");
});

Deno.test("a refusal by the gateway hook is recorded and nothing runs", async () => {
  await using server = ticketServer();
  await using dir = await tempDir();
  using s = openStore(`${dir.path}/t.db`);
  const runner = new AdapterRunner(s.store, {
    adapters: [httpRequestAdapter(ticketOptions(server.url))],
  });
  const seen: string[] = [];
  const run = await runner.run("http.request", TICKET, {
    agent: "a1",
    admit: (req) => {
      seen.push(`${req.adapter} ${req.summary} ${req.risk}`);
      return Promise.resolve({
        allowed: false,
        code: "DENIED_BY_POLICY",
        reason: "No tickets today",
      });
    },
  });
  assert.equal(run.phase, "refused");
  assert.deepEqual(run.error, { code: "DENIED_BY_POLICY", message: "No tickets today" });
  assert.deepEqual(seen, ["http.request POST /tickets (13 bytes) medium"]);
  assert.equal(server.creations(), 0);
  await assert.rejects(runner.compensate(run.id), isReason("PHASE_CONFLICT"));
});

Deno.test("the runner refuses unknown adapters and oversized input", async () => {
  await using dir = await tempDir();
  using s = openStore(`${dir.path}/t.db`);
  const runner = new AdapterRunner(s.store, {
    adapters: [httpRequestAdapter({ baseUrl: "http://127.0.0.1:9" })],
  });
  await assert.rejects(
    runner.run("nope", {}, { agent: "a1", admit: allow }),
    isReason("UNKNOWN_ADAPTER"),
  );
  await assert.rejects(
    runner.run("http.request", { method: "POST", path: "/x", body: "x".repeat(300_000) }, {
      agent: "a1",
      admit: allow,
    }),
    isReason("TOO_LARGE"),
  );
});
