import assert from "node:assert/strict";
import { httpRequestAdapter } from "./http_request.ts";
import { AdapterRunner } from "./runner.ts";
import {
  allow,
  isCode,
  isReason,
  openStore,
  SECRET,
  tempDir,
  ticketOptions,
  ticketServer,
} from "./_test_util.ts";

const ctx = { agent: "a1", signal: new AbortController().signal };

Deno.test("http.request creates, verifies and compensates with an Idempotency-Key", async () => {
  await using server = ticketServer();
  await using dir = await tempDir();
  const file = `${dir.path}/t.db`;
  {
    using s = openStore(file);
    const runner = new AdapterRunner(s.store, {
      adapters: [httpRequestAdapter(ticketOptions(server.url))],
    });
    const body = { title: "disk full on web-1" };
    const run = await runner.run("http.request", { method: "POST", path: "/tickets", body }, {
      agent: "a1",
      admit: allow,
    });
    assert.equal(run.phase, "verified");
    assert.equal(run.summary, `POST /tickets (${JSON.stringify(body).length} bytes)`);
    assert.equal(run.risk, "medium");
    assert.equal(run.reversible, true);
    const receipt = run.receipt as { status: number; id: string; location: string };
    assert.equal(receipt.status, 201);
    assert.equal(receipt.id, "t1");
    assert.equal(receipt.location, "/tickets/t1");
    assert.equal(server.creations(), 1);
    assert.match(server.keys[0]!, /^idem_[0-9a-f]{32}$/);

    const undone = await runner.compensate(run.id);
    assert.equal(undone.phase, "compensated");
    assert.equal(server.tickets.size, 0);
  }
  const raw = await Deno.readFile(file);
  assert.ok(!new TextDecoder().decode(raw).includes("s3cret"), "no auth header is stored");
});

Deno.test("http.request: a 4xx fails the run with its status", async () => {
  await using server = ticketServer();
  await using dir = await tempDir();
  using s = openStore(`${dir.path}/t.db`);
  const runner = new AdapterRunner(s.store, {
    adapters: [httpRequestAdapter(ticketOptions(server.url))],
  });
  const run = await runner.run("http.request", { method: "PUT", path: "/tickets/t9", body: {} }, {
    agent: "a1",
    admit: allow,
  });
  assert.equal(run.phase, "failed");
  assert.equal(run.error?.reason, "UPSTREAM_STATUS");
  assert.equal(run.error?.status, 422);
});

Deno.test("http.request: a DELETE is high risk and verifies the resource is gone", async () => {
  await using server = ticketServer();
  const adapter = httpRequestAdapter({ baseUrl: server.url, headers: { Authorization: SECRET } });
  server.tickets.set("t7", { id: "t7" });
  const p = await adapter.prepare({ method: "DELETE", path: "/tickets/t7" }, ctx);
  assert.equal(p.risk, "high");
  assert.equal(p.reversible, false);
  assert.equal(p.summary, "DELETE /tickets/t7 (no body)");
  const key = { idempotencyKey: "k1", signal: ctx.signal };
  assert.equal((await adapter.reconcile!(p.plan, key)).status, "not_applied");
  const receipt = await adapter.execute(p.plan, key);
  assert.equal(receipt.status, 204);
  assert.equal((await adapter.verify(p.plan, receipt, key)).holds, true);
  assert.equal((await adapter.reconcile!(p.plan, key)).status, "applied");
});

Deno.test("http.request refuses to leave its origin", async (t) => {
  await using server = ticketServer();
  await using dir = await tempDir();
  using s = openStore(`${dir.path}/t.db`);
  const adapter = httpRequestAdapter(ticketOptions(server.url));
  const runner = new AdapterRunner(s.store, { adapters: [adapter] });
  for (const path of ["//evil.example/x", "https://evil.example/x", "tickets", "/a\\b", "/a b"]) {
    await t.step(`input path ${JSON.stringify(path)}`, async () => {
      await assert.rejects(
        runner.run("http.request", { method: "POST", path }, { agent: "a1", admit: allow }),
        isCode("INVALID_ARGUMENT"),
      );
    });
    await t.step(`prepare given ${JSON.stringify(path)} directly`, async () => {
      await assert.rejects(
        adapter.prepare({ method: "POST", path }, ctx),
        isReason("ORIGIN_ESCAPE"),
      );
    });
  }
  await t.step("dot segments stay on the origin", async () => {
    const p = await adapter.prepare({ method: "POST", path: "/a/../../tickets?x=1" }, ctx);
    assert.equal(p.plan.path, "/tickets?x=1");
    assert.equal(p.resource, `POST ${server.url}/tickets`);
  });
  await t.step("a base URL with a path is a configuration error", () => {
    assert.throws(() => httpRequestAdapter({ baseUrl: `${server.url}/api` }), TypeError);
  });
  assert.equal(server.creations(), 0);
});
