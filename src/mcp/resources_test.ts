import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import type { Control } from "../control/mod.ts";
import { testRuntime, until } from "../control/_test_util.ts";
import { createMcpServer } from "./mod.ts";
import {
  jobOutputUri,
  MAX_SUBSCRIPTIONS,
  parseResourceUri,
  RESOURCE_NOT_FOUND,
  resourceLinks,
  sessionRecordingUri,
  sessionScreenUri,
} from "./resources.ts";

async function connect(control: Control, agent: string) {
  const server = createMcpServer({ agents: control.agents, agent, version: "test", limits: {} });
  const [a, b] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: "test-client", version: "1" });
  const updates: { uri: string; at: number }[] = [];
  client.setNotificationHandler(
    ResourceUpdatedNotificationSchema,
    (n: { params: { uri: string } }) => {
      updates.push({ uri: n.params.uri, at: Date.now() });
    },
  );
  await Promise.all([server.connect(a), client.connect(b)]);
  return {
    client,
    updates,
    async [Symbol.asyncDispose]() {
      await client.close();
      await server.close();
    },
  };
}

type S = Record<string, unknown>;
type Template = { uriTemplate: string; mimeType?: string };
type Listed = { uri: string };

/** The JSON-RPC error code a request failed with. */
async function rpcCode(p: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await p;
  } catch (err) {
    return { code: (err as { code: number }).code, message: (err as Error).message };
  }
  throw new Error("expected a JSON-RPC error");
}

Deno.test("resource URIs parse into their three shapes, anything else is -32602", () => {
  assert.deepEqual(parseResourceUri("termada://jobs/job_1/output"), {
    kind: "output",
    jobId: "job_1",
  });
  assert.deepEqual(parseResourceUri("termada://jobs/job_1/output?cursor=c2s"), {
    kind: "output",
    jobId: "job_1",
    cursor: "c2s",
  });
  assert.deepEqual(parseResourceUri("termada://sessions/ses_1/screen"), {
    kind: "screen",
    sessionId: "ses_1",
  });
  assert.deepEqual(parseResourceUri("termada://sessions/ses_1/recording"), {
    kind: "recording",
    sessionId: "ses_1",
  });
  for (
    const bad of [
      "file:///etc/passwd",
      "termada://jobs/job_1/screen",
      "termada://jobs/../output",
      "termada://jobs/job_1/output?cursor=zz",
      "termada://jobs/job_1/output?cursor=c1&x=1",
      "termada://sessions/ses_1/screen?cursor=c1",
    ]
  ) {
    assert.throws(() => parseResourceUri(bad), (e: { code: number }) => e.code === -32602, bad);
  }
});

Deno.test("resourceLinks points job tools at the output and session tools at the screen", () => {
  assert.deepEqual(resourceLinks("exec_wait", { job_id: "job_x", session_id: "ses_y" }), [{
    type: "resource_link",
    uri: "termada://jobs/job_x/output",
    name: "job_x output",
    mimeType: "text/plain",
  }]);
  assert.equal(
    resourceLinks("session_screen", { session_id: "ses_y" })[0]?.uri,
    "termada://sessions/ses_y/screen",
  );
  assert.deepEqual(resourceLinks("exec_list", { jobs: [] }), []);
  assert.deepEqual(resourceLinks("exec_write", { job_id: "job_x" }), []);
});

Deno.test("MCP resources: templates, links, paged output, screen, lists and owner checks", async (t) => {
  await using te = await testRuntime();
  te.control.agents.useRecordings({
    dir: `${te.dir}/recordings`,
    enabled: true,
    sessions: { sessionById: () => undefined },
    store: te.store,
  });
  await using a = await connect(te.control, "a");
  await using b = await connect(te.control, "b");
  await a.client.listTools(); // arms the client's result validation

  await t.step("templates name the three resources", async () => {
    const { resourceTemplates } = await a.client.listResourceTemplates();
    assert.deepEqual(resourceTemplates.map((r: Template) => r.uriTemplate), [
      "termada://jobs/{job_id}/output",
      "termada://sessions/{session_id}/screen",
      "termada://sessions/{session_id}/recording",
    ]);
    assert.deepEqual(resourceTemplates.map((r: Template) => r.mimeType), [
      "text/plain",
      "text/plain",
      "application/x-asciicast",
    ]);
  });

  const created = await a.client.callTool({ name: "session_create", arguments: {} });
  const sessionId = (created.structuredContent as S).session_id as string;

  await t.step(
    "session_create and exec_run results link to the screen and the output",
    async () => {
      const content = created.content as { type: string; uri?: string }[];
      assert.equal(content[0]!.type, "text");
      assert.deepEqual(content[1], {
        type: "resource_link",
        uri: sessionScreenUri(sessionId),
        name: `${sessionId} screen`,
        mimeType: "text/plain",
      });
      const r = await a.client.callTool({
        name: "exec_run",
        arguments: { command: ["echo screen-marker"], session_id: sessionId },
      });
      const jobId = (r.structuredContent as S).job_id as string;
      const items = r.content as { type: string; uri?: string }[];
      assert.deepEqual(items.map((c) => c.type), ["text", "resource_link"]);
      assert.equal(items[1]!.uri, jobOutputUri(jobId));
    },
  );

  await t.step("the screen reads as text rows", async () => {
    const r = await a.client.readResource({ uri: sessionScreenUri(sessionId) });
    const c = r.contents[0] as { text: string };
    assert.match(c.text, /screen-marker/);
    assert.equal((r._meta as S)["termada/cols"], (created.structuredContent as S).cols);
  });

  await t.step(
    "a job's output reads in pages of at most 256 KiB until has_more is false",
    async () => {
      const r = await a.client.callTool({
        name: "exec_run",
        arguments: { command: ["yes 0123456789abcdef | head -c 600000"], session_id: sessionId },
      });
      const jobId = (r.structuredContent as S).job_id as string;
      let uri = jobOutputUri(jobId);
      const pages: string[] = [];
      for (let i = 0; i < 10; i++) {
        const page = await a.client.readResource({ uri });
        const c = page.contents[0] as { uri: string; mimeType: string; text: string };
        assert.equal(c.uri, uri);
        assert.equal(c.mimeType, "text/plain");
        assert.ok(c.text.length <= 256 * 1024, `page ${i} holds ${c.text.length} bytes`);
        pages.push(c.text);
        const meta = page._meta as S;
        assert.equal(meta["termada/status"], "exited");
        assert.equal(meta["termada/exit_code"], 0);
        if (meta["termada/has_more"] === false) break;
        uri = meta["termada/next_uri"] as string;
        assert.equal(uri, jobOutputUri(jobId, meta["termada/next_cursor"] as string));
      }
      assert.equal(pages.length, 3);
      const all = pages.join("");
      assert.equal(all.length, 600000);
      assert.ok(all.startsWith("0123456789abcdef\n0123456789abcdef\n"));
    },
  );

  await t.step("the recording reads as one asciicast v2 cast", async () => {
    const r = await a.client.readResource({ uri: sessionRecordingUri(sessionId) });
    const c = r.contents[0] as { mimeType: string; text: string };
    assert.equal(c.mimeType, "application/x-asciicast");
    const [header, ...events] = c.text.trimEnd().split("\n");
    assert.equal(JSON.parse(header!).version, 2);
    assert.ok(events.some((e) => e.includes("screen-marker")));
  });

  await t.step(
    "resources/list holds the caller's sessions and jobs only, newest first",
    async () => {
      const { resources } = await a.client.listResources();
      const uris = resources.map((r: Listed) => r.uri);
      assert.ok(uris.includes(sessionScreenUri(sessionId)));
      assert.ok(uris.includes(sessionRecordingUri(sessionId)));
      assert.ok(uris.filter((u: string) => u.endsWith("/output")).length >= 2);
      assert.ok(resources.length <= 100);
      const mine = await b.client.listResources();
      assert.deepEqual(mine.resources, []);
    },
  );

  await t.step("another agent's ids and unknown ids are -32002, bad URIs -32602", async () => {
    const { resources } = await a.client.listResources();
    for (const r of resources) {
      const e = await rpcCode(b.client.readResource({ uri: r.uri }));
      assert.equal(e.code, RESOURCE_NOT_FOUND, r.uri);
      assert.match(e.message, /Resource not found: No (job|session) "/);
    }
    const unknown = await rpcCode(a.client.readResource({ uri: jobOutputUri("job_nope") }));
    assert.equal(unknown.code, RESOURCE_NOT_FOUND);
    const bad = await rpcCode(a.client.readResource({ uri: "termada://nothing/here" }));
    assert.equal(bad.code, -32602);
    const job = resources.find((r: Listed) => r.uri.endsWith("/output"))!.uri;
    const cursor = await rpcCode(a.client.readResource({ uri: `${job}?cursor=czzzzzz` }));
    assert.equal(cursor.code, -32602, cursor.message);
    const sub = await rpcCode(b.client.subscribeResource({ uri: job }));
    assert.equal(sub.code, RESOURCE_NOT_FOUND);
  });
});

Deno.test("without recordings the recording template and entries are left out", async () => {
  await using te = await testRuntime({ engine: { record: false } });
  await using a = await connect(te.control, "a");
  const { resourceTemplates } = await a.client.listResourceTemplates();
  assert.equal(resourceTemplates.length, 2);
  const s = await a.client.callTool({ name: "session_create", arguments: {} });
  const id = (s.structuredContent as S).session_id as string;
  const { resources } = await a.client.listResources();
  assert.deepEqual(resources.map((r: Listed) => r.uri), [sessionScreenUri(id)]);
  const e = await rpcCode(a.client.readResource({ uri: sessionRecordingUri(id) }));
  assert.equal(e.code, RESOURCE_NOT_FOUND);
});

Deno.test("a subscription to a job's output is told of growth (throttled) and of its end", async () => {
  await using te = await testRuntime();
  await using a = await connect(te.control, "a");
  const started = await a.client.callTool({
    name: "exec_start",
    arguments: {
      command: ["for i in 1 2 3 4 5 6; do echo line $i; sleep 0.15; done"],
      mode: "background",
    },
  });
  const jobId = (started.structuredContent as S).job_id as string;
  const uri = jobOutputUri(jobId);
  await a.client.subscribeResource({ uri });
  const job = te.control.agents.job("a", jobId);
  await until(() => job.final, 10_000, "the job's end");
  // The end is said at once, after the last growth.
  await until(() => a.updates.some((u) => u.at >= job.endedAt!), 2000, "the end's update");
  const read = await a.client.readResource({ uri });
  assert.equal((read._meta as S)["termada/status"], "exited");
  assert.ok(a.updates.length >= 2, `${a.updates.length} updates`);
  assert.ok(a.updates.length <= 6, `${a.updates.length} updates for 6 lines and an end`);
  assert.ok(a.updates.every((u) => u.uri === uri));
  const gaps = a.updates.slice(1).map((u, i) => u.at - a.updates[i]!.at);
  // Growth is folded into one update per 250 ms; only the end may come sooner.
  assert.ok(gaps.slice(0, -1).every((g) => g >= 240), JSON.stringify(gaps));
  await a.client.unsubscribeResource({ uri });
});

Deno.test("a screen subscription hears output and stops on unsubscribe", async () => {
  await using te = await testRuntime();
  await using a = await connect(te.control, "a");
  const s = await a.client.callTool({ name: "session_create", arguments: {} });
  const id = (s.structuredContent as S).session_id as string;
  const uri = sessionScreenUri(id);
  await a.client.subscribeResource({ uri });
  await a.client.callTool({ name: "exec_run", arguments: { command: ["echo hi"], session: id } });
  await until(() => a.updates.some((u) => u.uri === uri), 3000, "a screen update");
  await a.client.unsubscribeResource({ uri });
  await new Promise((r) => setTimeout(r, SCREEN_WAIT));
  const n = a.updates.length;
  await a.client.callTool({
    name: "exec_run",
    arguments: { command: ["echo again"], session: id },
  });
  await new Promise((r) => setTimeout(r, SCREEN_WAIT));
  assert.equal(a.updates.length, n, "no update after unsubscribe");
});

const SCREEN_WAIT = 600;

Deno.test("subscriptions are bounded per connection and released when it closes", async () => {
  await using te = await testRuntime();
  const a = await connect(te.control, "a");
  try {
    const started = await a.client.callTool({
      name: "exec_start",
      arguments: { command: ["sleep 0.5; echo late"], mode: "background" },
    });
    const jobId = (started.structuredContent as S).job_id as string;
    for (let i = 0; i < MAX_SUBSCRIPTIONS; i++) {
      await a.client.subscribeResource({ uri: jobOutputUri(jobId, `c${i.toString(36)}`) });
    }
    // The same URI again is no new subscription.
    await a.client.subscribeResource({ uri: jobOutputUri(jobId, "c0") });
    const over = await rpcCode(a.client.subscribeResource({ uri: jobOutputUri(jobId) }));
    assert.equal(over.code, -32600);
    assert.match(over.message, /holds 32 subscriptions/);
  } finally {
    await a[Symbol.asyncDispose]();
  }
  // The job still runs and ends after the connection closed: no timer, no send is left behind
  // (the sanitizers check the timers).
  const job = te.control.agents.listJobs("a", {}).jobs[0]!;
  const j = te.control.agents.job("a", job.job_id);
  await until(() => j.final, 5000, "the job's end");
  await new Promise((r) => setTimeout(r, 300));
});
