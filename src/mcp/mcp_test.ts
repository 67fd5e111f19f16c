import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { Control } from "../control/mod.ts";
import { testRuntime } from "../control/_test_util.ts";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { callParams, createMcpServer, TOOLS } from "./mod.ts";

async function connect(control: Control, agent: string) {
  const server = createMcpServer({ agents: control.agents, agent, version: "test", limits: {} });
  const [a, b] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: "test-client", version: "1" });
  await Promise.all([server.connect(a), client.connect(b)]);
  return {
    client,
    async [Symbol.asyncDispose]() {
      await client.close();
      await server.close();
    },
  };
}

Deno.test("MCP lists every tool with input and output schemas and instructions", async () => {
  await using te = await testRuntime();
  await using c = await connect(te.control, "a");
  type ListedTool = {
    name: string;
    inputSchema: { type: string; required?: string[] };
    outputSchema?: { type: string };
  };
  const { tools } = (await c.client.listTools()) as unknown as { tools: ListedTool[] };
  assert.deepEqual(tools.map((t: ListedTool) => t.name), TOOLS.map((t) => t.name));
  for (
    const name of [
      "exec_run",
      "exec_start",
      "exec_poll",
      "exec_wait",
      "exec_write",
      "exec_signal",
      "exec_kill",
      "exec_list",
      "session_create",
      "session_list",
      "session_close",
      "session_screen",
      "capabilities",
    ]
  ) {
    const t = tools.find((x: ListedTool) => x.name === name);
    assert.ok(t, name);
    assert.equal(t.inputSchema.type, "object");
    assert.equal(t.outputSchema?.type, "object");
  }
  const run = tools.find((t: ListedTool) => t.name === "exec_run")!;
  assert.deepEqual(run.inputSchema.required, ["command"]);
  assert.match(c.client.getInstructions() ?? "", /exec_wait/);
});

Deno.test("MCP exec_run returns structured content and a readable text", async () => {
  await using te = await testRuntime();
  await using c = await connect(te.control, "a");
  const r = await c.client.callTool({ name: "exec_run", arguments: { command: ["echo", "hi"] } });
  assert.equal(r.isError, undefined);
  const s = r.structuredContent as Record<string, unknown>;
  assert.equal(s.status, "exited");
  assert.equal(s.exit_code, 0);
  assert.equal(s.output, "hi\n");
  const text = (r.content as { type: string; text: string }[])[0]!.text;
  assert.match(text, /^exited 0 · job_\w+ · ses_\w+ · \d+ ms/);
  assert.match(text, /\nhi$/);
});

Deno.test("MCP tool failures are results with a typed error", async () => {
  await using te = await testRuntime();
  await using c = await connect(te.control, "a");
  // Listing the tools arms the SDK client's output-schema validation: error results must
  // still come through as results (the declared output admits the error shape).
  await c.client.listTools();
  const ok = await c.client.callTool({ name: "exec_run", arguments: { command: ["true"] } });
  assert.equal(ok.isError, undefined);
  const none = await c.client.callTool({
    name: "mission_get",
    arguments: { mission_id: "msn_aaaaaaaaaaaa" },
  });
  assert.equal(
    (none.structuredContent as { error: { code: string } }).error.code,
    "NOT_SUPPORTED",
    "an engine-only server has no missions",
  );
  const bad = await c.client.callTool({ name: "exec_run", arguments: { command: [] } });
  assert.equal(bad.isError, true);
  const err = (bad.structuredContent as { error: Record<string, unknown> }).error;
  assert.equal(err.code, "INVALID_ARGUMENT");
  assert.equal(err.retriable, false);
  assert.match(String(err.message), /command/);
  const nf = await c.client.callTool({ name: "exec_poll", arguments: { job_id: "job_nope" } });
  assert.equal((nf.structuredContent as { error: { code: string } }).error.code, "NOT_FOUND");
});

Deno.test("MCP agents are isolated from each other", async () => {
  await using te = await testRuntime();
  await using alice = await connect(te.control, "alice");
  await using bob = await connect(te.control, "bob");
  const r = await alice.client.callTool({
    name: "exec_run",
    arguments: { command: ["echo", "x"] },
  });
  const jobId = (r.structuredContent as { job_id: string }).job_id;
  const peek = await bob.client.callTool({ name: "exec_poll", arguments: { job_id: jobId } });
  assert.equal((peek.structuredContent as { error: { code: string } }).error.code, "NOT_FOUND");
  const list = await bob.client.callTool({ name: "session_list", arguments: {} });
  assert.deepEqual((list.structuredContent as { sessions: unknown[] }).sessions, []);
});

Deno.test("MCP exec_wait sends progress notifications when asked", async () => {
  await using te = await testRuntime();
  await using c = await connect(te.control, "a");
  const started = await c.client.callTool({
    name: "exec_start",
    arguments: { command: ["sleep 1.3; echo done"] },
  });
  const jobId = (started.structuredContent as { job_id: string }).job_id;
  const progress: number[] = [];
  const r = await c.client.callTool(
    { name: "exec_wait", arguments: { job_id: jobId, timeout_ms: 10_000 } },
    undefined,
    { onprogress: (p: { progress: number }) => progress.push(p.progress) },
  );
  assert.equal((r.structuredContent as { matched: string }).matched, "exit");
  assert.ok(progress.length >= 1, `progress notifications: ${progress.length}`);
});

Deno.test("MCP prompt round trip: awaiting_input then exec_write", async () => {
  await using te = await testRuntime();
  await using c = await connect(te.control, "a");
  const r = await c.client.callTool({
    name: "exec_run",
    arguments: { command: ["read -p 'Name? ' n; echo hello $n"], timeout_ms: 5000 },
  });
  const s = r.structuredContent as { job_id: string; status: string; prompt: string };
  assert.equal(s.status, "awaiting_input");
  assert.equal(s.prompt, "Name? ");
  const text = (r.content as { text: string }[])[0]!.text;
  assert.match(text, /waiting for input at prompt "Name\? "/);
  await c.client.callTool({ name: "exec_write", arguments: { job_id: s.job_id, input: "Ada" } });
  const w = await c.client.callTool({ name: "exec_wait", arguments: { job_id: s.job_id } });
  assert.match((w.structuredContent as { output: string }).output, /hello Ada/);
});

Deno.test("tools/call params are checked once: a malformed call is JSON-RPC -32602 naming the part", () => {
  const bad: [unknown, RegExp][] = [
    [undefined, /params must be an object/],
    [[], /params must be an object/],
    [{}, /params.name must be a string/],
    [{ name: 1 }, /params.name must be a string/],
    [{ name: "exec_run", arguments: [1] }, /params.arguments must be an object/],
    [{ name: "exec_run", arguments: "x" }, /params.arguments must be an object/],
    [{ name: "exec_run", _meta: 3 }, /params._meta must be an object/],
    [{ name: "exec_run", _meta: { progressToken: {} } }, /progressToken must be a string/],
  ];
  for (const [params, why] of bad) {
    assert.throws(
      () => callParams(params),
      (e: unknown) =>
        e instanceof McpError && (e as McpError).code === -32602 &&
        why.test((e as McpError).message),
      JSON.stringify(params),
    );
  }
  assert.deepEqual(callParams({ name: "exec_run" }), {
    name: "exec_run",
    arguments: {},
    progressToken: undefined,
  });
  assert.deepEqual(
    callParams({ name: "x", arguments: { a: 1 }, _meta: { progressToken: 7 }, extra: true }),
    { name: "x", arguments: { a: 1 }, progressToken: 7 },
  );
});

Deno.test("MCP an unknown tool is JSON-RPC -32602 naming it and the tools, not a tool result", async () => {
  await using rt = await testRuntime();
  await using c = await connect(rt.control, "agent-a");
  await assert.rejects(
    c.client.callTool({ name: "exec_runn", arguments: {} }),
    (e: unknown) =>
      e instanceof McpError && (e as McpError).code === -32602 &&
      /Unknown tool "exec_runn"/.test((e as McpError).message) &&
      /exec_run, /.test((e as McpError).message),
  );
});
