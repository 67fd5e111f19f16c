/**
 * Black-box tests of the HTTP app: requests go through `app.fetch(request, { listener })`, the
 * way both listeners call it, against a real engine. MCP runs through the real SDK client whose
 * `fetch` is routed into the app, so the guards, session table and tools are all exercised.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js";
import { type AgentApi, type TestRuntime, testRuntime } from "../control/_test_util.ts";
import { type AgentDirectory, createApp, type Listener, type TermadaApp } from "./mod.ts";
import { testDirectory } from "./_test_app.ts";
import { TOOLS } from "../mcp/mod.ts";

const PORT = 47_123;
const HOST = `127.0.0.1:${PORT}`;
const MCP_URL = `http://${HOST}/mcp`;
const CI_TOKEN = "0123456789abcdef0123456789abcdef";
const VERSION = "9.9.9-test";
const OPERATOR_TOKEN = "fedcba9876543210fedcba9876543210";

/** One configured agent, `ci`, with a 32-character token. */
/** The socket key a real shim reads beside the socket (sent by `request` unless overridden). */
const SOCKET_KEY = "5".repeat(64);

function directory(devMode: boolean): AgentDirectory {
  return testDirectory({
    devMode,
    devKey: (key) => key === SOCKET_KEY,
    tokens: new Map([[CI_TOKEN, "ci"]]),
  });
}

interface TestApp extends AsyncDisposable {
  app: TermadaApp;
  engine: AgentApi;
  control: TestRuntime["control"];
  agents: [string, string][];
  /** One request through the app as `listener` delivers it. The caller consumes the body. */
  request(listener: Listener, path: string, init?: RequestInit): Promise<Response>;
}

async function testApp(
  options: { devMode?: boolean; maxMcpSessions?: number } = {},
): Promise<TestApp> {
  const te = await testRuntime();
  const agents: [string, string][] = [];
  const app = createApp({
    control: te.control,
    version: VERSION,
    agents: directory(options.devMode ?? true),
    port: PORT,
    onAgent: (id, via) => agents.push([id, via]),
    operatorToken: OPERATOR_TOKEN,
    maxMcpSessions: options.maxMcpSessions,
  });
  return {
    app,
    engine: te.engine,
    control: te.control,
    agents,
    async request(listener, path, init) {
      const headers = new Headers(init?.headers);
      if (!headers.has("x-termada-key")) headers.set("x-termada-key", SOCKET_KEY);
      else if (headers.get("x-termada-key") === "") headers.delete("x-termada-key");
      return await app.app.fetch(new Request(`http://${HOST}${path}`, { ...init, headers }), {
        listener,
      });
    },
    async [Symbol.asyncDispose]() {
      try {
        await app.close();
      } finally {
        await te[Symbol.asyncDispose]();
      }
    },
  };
}

/**
 * A fetch for the SDK client that calls the app in process. Like a real fetch, aborting the
 * request's signal (client.close()) ends a response body still being read, which cancels the
 * server's SSE stream and its keep-alive timer.
 */
function routeTo(
  t: TestApp,
  listener: Listener,
  headers: Record<string, string>,
  onGet: () => void,
): FetchLike {
  return async (url: string | URL, init?: RequestInit): Promise<Response> => {
    const h = new Headers(init?.headers);
    for (const [k, v] of Object.entries(headers)) h.set(k, v);
    const res = await t.request(listener, new URL(url).pathname, { ...init, headers: h });
    if (init?.method === "GET") onGet();
    if (!res.body || !init?.signal) return res;
    const body = res.body.pipeThrough(new TransformStream(), { signal: init.signal });
    return new Response(body, { status: res.status, headers: res.headers });
  };
}

interface McpConnection extends AsyncDisposable {
  client: Client;
  transport: StreamableHTTPClientTransport;
}

async function connect(
  t: TestApp,
  listener: Listener,
  options: { name?: string; headers?: Record<string, string> } = {},
): Promise<McpConnection> {
  const headers = { ...(listener === "tcp" ? { host: HOST } : {}), ...options.headers };
  const sse = Promise.withResolvers<void>();
  const transport = new StreamableHTTPClientTransport(new URL(MCP_URL), {
    fetch: routeTo(t, listener, headers, sse.resolve),
    // No reconnection: a reconnect timer would outlive the test.
    reconnectionOptions: {
      maxRetries: 0,
      initialReconnectionDelay: 1000,
      maxReconnectionDelay: 1000,
      reconnectionDelayGrowFactor: 1,
    },
  });
  const client = new Client({ name: options.name ?? "test-client", version: "1" });
  try {
    await client.connect(transport);
    // After initialize the client opens its SSE stream (a GET) in the background: wait for it
    // so that later requests are ordered after it.
    await sse.promise;
  } catch (err) {
    await client.close();
    throw err;
  }
  return {
    client,
    transport,
    async [Symbol.asyncDispose]() {
      await client.close();
    },
  };
}

const JSON_HEADERS = {
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
};

function initializeBody(name = "raw-client"): string {
  return JSON.stringify({
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name, version: "1" },
    },
  });
}

const LIST_TOOLS = JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list", params: {} });

/** Matches the SDK client's error for an HTTP status. */
function httpError(status: number): (err: unknown) => boolean {
  return (err) => err instanceof StreamableHTTPError && (err as { code?: number }).code === status;
}

async function errorCode(res: Response): Promise<string> {
  const body = await res.json() as { error: { code: string } };
  return body.error.code;
}

async function runEcho(c: Client, word: string): Promise<{ job_id: string; output: string }> {
  const r = await c.callTool({ name: "exec_run", arguments: { command: ["echo", word] } });
  assert.equal(r.isError, undefined);
  return r.structuredContent as { job_id: string; output: string };
}

Deno.test("healthz answers ok, version and pid on both listeners", async () => {
  await using t = await testApp();
  for (const listener of ["tcp", "unix"] as const) {
    const res = await t.request(listener, "/healthz", { headers: { host: HOST } });
    assert.equal(res.status, 200, listener);
    assert.deepEqual(await res.json(), { ok: true, version: VERSION, pid: Deno.pid });
  }
});

Deno.test("unknown routes answer 404 with a typed error", async () => {
  await using t = await testApp();
  const res = await t.request("unix", "/nope");
  assert.equal(res.status, 404);
  assert.equal(await errorCode(res), "NOT_FOUND");
});

Deno.test("TCP accepts only loopback Host and Origin headers", async (t) => {
  await using a = await testApp();
  const get = (headers: Record<string, string>) => a.request("tcp", "/healthz", { headers });

  await t.step("a foreign Host is refused", async () => {
    const res = await get({ host: `evil.example:${PORT}` });
    assert.equal(res.status, 403);
    assert.equal(await errorCode(res), "FORBIDDEN");
  });
  await t.step("a missing Host is refused", async () => {
    const res = await get({});
    assert.equal(res.status, 403);
    await res.body?.cancel();
  });
  await t.step("a loopback Host on another port is refused", async () => {
    const res = await get({ host: `127.0.0.1:${PORT + 1}` });
    assert.equal(res.status, 403);
    await res.body?.cancel();
  });
  await t.step("a foreign Origin is refused", async () => {
    const res = await get({ host: HOST, origin: "http://evil.example" });
    assert.equal(res.status, 403);
    assert.equal(await errorCode(res), "FORBIDDEN");
  });
  for (const host of [`127.0.0.1:${PORT}`, `localhost:${PORT}`, `[::1]:${PORT}`]) {
    await t.step(`Host ${host} passes`, async () => {
      const res = await get({ host });
      assert.equal(res.status, 200);
      await res.body?.cancel();
    });
  }
  await t.step("a loopback Origin passes", async () => {
    const res = await get({ host: HOST, origin: `http://localhost:${PORT}` });
    assert.equal(res.status, 200);
    await res.body?.cancel();
  });
  await t.step("the Unix socket does not check Host", async () => {
    const res = await a.request("unix", "/healthz", { headers: { host: "evil.example" } });
    assert.equal(res.status, 200);
    await res.body?.cancel();
  });
});

Deno.test("MCP on TCP needs a valid agent token", async (t) => {
  await using a = await testApp();
  const post = (headers: Record<string, string>) =>
    a.request("tcp", "/mcp", {
      method: "POST",
      headers: { host: HOST, ...JSON_HEADERS, ...headers },
      body: initializeBody(),
    });

  await t.step("no token is 401 UNAUTHORIZED", async () => {
    const res = await post({});
    assert.equal(res.status, 401);
    const body = await res.json() as { error: { code: string; hint?: string } };
    assert.equal(body.error.code, "UNAUTHORIZED");
    assert.match(body.error.hint ?? "", /Bearer/);
  });
  await t.step("a wrong token is 401", async () => {
    const res = await post({ authorization: `Bearer ${"f".repeat(32)}` });
    assert.equal(res.status, 401);
    assert.equal(await errorCode(res), "UNAUTHORIZED");
  });
  await t.step("a non-Bearer authorization is 401", async () => {
    const res = await post({ authorization: `Basic ${CI_TOKEN}` });
    assert.equal(res.status, 401);
    assert.equal(await errorCode(res), "UNAUTHORIZED");
  });
  await t.step("dev mode does not apply on TCP", async () => {
    const res = await post({ "x-termada-agent": "alice" });
    assert.equal(res.status, 401);
    assert.equal(await errorCode(res), "UNAUTHORIZED");
  });
  assert.equal(a.app.mcpSessions, 0);
});

Deno.test("MCP over TCP with a token: initialize, list every tool, exec_run", async () => {
  await using t = await testApp();
  await using c = await connect(t, "tcp", { headers: { authorization: `Bearer ${CI_TOKEN}` } });
  assert.equal(c.client.getServerVersion()?.name, "termada");
  assert.equal(c.client.getServerVersion()?.version, VERSION);
  const { tools } = await c.client.listTools();
  assert.equal(tools.length, TOOLS.length);
  const r = await runEcho(c.client, "hi");
  assert.equal(r.output, "hi\n");
  assert.equal(t.engine.listJobs("ci").jobs[0]?.job_id, r.job_id);
  assert.deepEqual(t.agents, [["ci", "token"]]);
  assert.equal(t.app.mcpSessions, 1);
});

Deno.test("dev mode without the socket key names nobody (a process inside a session)", async () => {
  await using t = await testApp();
  for (const key of ["", "0".repeat(64)]) {
    const res = await t.request("unix", "/mcp", {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "x-termada-agent": "alice",
        "x-termada-key": key,
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    assert.equal(res.status, 401);
    assert.match(
      ((await res.json()) as { error: { message: string } }).error.message,
      /socket key/,
    );
  }
  assert.deepEqual(t.agents, []);
});

Deno.test("dev mode on the Unix socket takes the agent from the shim header", async () => {
  await using t = await testApp();
  await using c = await connect(t, "unix", { headers: { "x-termada-agent": "alice" } });
  const r = await runEcho(c.client, "hi");
  assert.equal(r.output, "hi\n");
  assert.deepEqual(t.engine.listJobs("alice").jobs.map((j) => j.job_id), [r.job_id]);
  assert.deepEqual(t.agents, [["alice", "dev"]]);
});

Deno.test("dev mode without a header takes the agent id from the MCP client name", async () => {
  await using t = await testApp();
  await using c = await connect(t, "unix", { name: "My Agent" });
  const r = await runEcho(c.client, "named");
  assert.deepEqual(t.engine.listJobs("my-agent").jobs.map((j) => j.job_id), [r.job_id]);
  assert.deepEqual(t.engine.listJobs("agent").jobs, []);
  assert.deepEqual(t.agents, [["my-agent", "dev"]]);
});

Deno.test("dev mode cannot claim a configured agent without its token", async (t) => {
  await using a = await testApp();
  const post = (headers: Record<string, string>, name?: string) =>
    a.request("unix", "/mcp", {
      method: "POST",
      headers: { ...JSON_HEADERS, ...headers },
      body: initializeBody(name),
    });

  await t.step("by header", async () => {
    const res = await post({ "x-termada-agent": "ci" });
    assert.equal(res.status, 401);
    assert.equal(await errorCode(res), "UNAUTHORIZED");
  });
  await t.step("by client name", async () => {
    const res = await post({}, "CI");
    assert.equal(res.status, 401);
    assert.equal(await errorCode(res), "UNAUTHORIZED");
  });
  await t.step("a bad agent id is 400", async () => {
    const res = await post({ "x-termada-agent": "!!!" });
    assert.equal(res.status, 400);
    assert.equal(await errorCode(res), "INVALID_ARGUMENT");
  });
  assert.equal(a.app.mcpSessions, 0);
});

Deno.test("the configured agent's token also works on the Unix socket", async () => {
  await using t = await testApp({ devMode: false });
  await using c = await connect(t, "unix", { headers: { authorization: `Bearer ${CI_TOKEN}` } });
  const r = await runEcho(c.client, "sock");
  assert.equal(t.engine.listJobs("ci").jobs[0]?.job_id, r.job_id);
});

Deno.test("without dev mode the Unix socket needs a token too", async () => {
  await using t = await testApp({ devMode: false });
  const res = await t.request("unix", "/mcp", {
    method: "POST",
    headers: { ...JSON_HEADERS, "x-termada-agent": "alice" },
    body: initializeBody(),
  });
  assert.equal(res.status, 401);
  assert.equal(await errorCode(res), "UNAUTHORIZED");
  await assert.rejects(
    connect(t, "unix", { name: "alice" }),
    httpError(401),
  );
  assert.equal(t.app.mcpSessions, 0);
});

Deno.test("POSTs that open no MCP session leave nothing behind", async () => {
  await using a = await testApp();
  const before = a.control.plugins.listeners;
  for (let i = 0; i < 20; i++) {
    const res = await a.request("unix", "/mcp", {
      method: "POST",
      headers: { ...JSON_HEADERS, "x-termada-agent": "alice" },
      body: LIST_TOOLS, // a call before any initialize
    });
    await res.body?.cancel();
    assert.equal(res.status, 400);
  }
  assert.equal(a.app.mcpSessions, 0);
  assert.equal(a.control.plugins.listeners, before);
  // An initialize still opens one, which stays until it is closed.
  await using c = await connect(a, "unix", { headers: { "x-termada-agent": "alice" } });
  assert.equal(a.app.mcpSessions, 1);
  assert.equal(a.control.plugins.listeners, before + 1);
  void c;
});

Deno.test("an MCP session is bound to the agent that opened it", async (t) => {
  await using a = await testApp();
  await using alice = await connect(a, "unix", { headers: { "x-termada-agent": "alice" } });
  const sid = alice.transport.sessionId;
  assert.ok(sid);
  const post = (headers: Record<string, string>) =>
    a.request("unix", "/mcp", {
      method: "POST",
      headers: { ...JSON_HEADERS, "mcp-protocol-version": "2025-06-18", ...headers },
      body: LIST_TOOLS,
    });

  await t.step("another agent naming itself is 403", async () => {
    const res = await post({ "mcp-session-id": sid, "x-termada-agent": "bob" });
    assert.equal(res.status, 403);
    assert.equal(await errorCode(res), "FORBIDDEN");
  });
  await t.step("a token agent is 403 on a dev session", async () => {
    const res = await post({ "mcp-session-id": sid, authorization: `Bearer ${CI_TOKEN}` });
    assert.equal(res.status, 403);
    assert.equal(await errorCode(res), "FORBIDDEN");
  });
  await t.step("an unknown session id is 404", async () => {
    const res = await post({ "mcp-session-id": crypto.randomUUID(), "x-termada-agent": "alice" });
    assert.equal(res.status, 404);
    assert.equal(await errorCode(res), "NOT_FOUND");
  });
  await t.step("a GET without a session id is 400", async () => {
    const res = await a.request("unix", "/mcp", {
      headers: { accept: "text/event-stream", "x-termada-agent": "alice" },
    });
    assert.equal(res.status, 400);
    assert.equal(await errorCode(res), "INVALID_ARGUMENT");
  });
  await t.step("a GET without a session id is 400 on TCP with a token", async () => {
    const res = await a.request("tcp", "/mcp", {
      headers: { host: HOST, accept: "text/event-stream", authorization: `Bearer ${CI_TOKEN}` },
    });
    assert.equal(res.status, 400);
    await res.body?.cancel();
  });
  // The rejected attempts left the session usable by its owner.
  const { tools } = await alice.client.listTools();
  assert.equal(tools.length, TOOLS.length);
});

Deno.test("on TCP an MCP session id without the token is 401", async () => {
  await using t = await testApp();
  await using ci = await connect(t, "tcp", { headers: { authorization: `Bearer ${CI_TOKEN}` } });
  const res = await t.request("tcp", "/mcp", {
    method: "POST",
    headers: { host: HOST, ...JSON_HEADERS, "mcp-session-id": ci.transport.sessionId! },
    body: LIST_TOOLS,
  });
  assert.equal(res.status, 401);
  await res.body?.cancel();
});

Deno.test("agents cannot see each other's jobs through MCP", async () => {
  await using t = await testApp();
  await using alice = await connect(t, "unix", { headers: { "x-termada-agent": "alice" } });
  await using bob = await connect(t, "unix", { headers: { "x-termada-agent": "bob" } });
  const { job_id } = await runEcho(alice.client, "secret");
  const peek = await bob.client.callTool({ name: "exec_poll", arguments: { job_id } });
  assert.equal(peek.isError, true);
  assert.equal((peek.structuredContent as { error: { code: string } }).error.code, "NOT_FOUND");
  const own = await alice.client.callTool({ name: "exec_poll", arguments: { job_id } });
  assert.equal(own.isError, undefined);
  assert.equal((own.structuredContent as { output: string }).output, "secret\n");
});

Deno.test("MCP request bodies are bounded and must be JSON", async (t) => {
  await using a = await testApp();
  const post = (body: BodyInit, headers: Record<string, string> = {}) =>
    a.request("unix", "/mcp", {
      method: "POST",
      headers: { ...JSON_HEADERS, "x-termada-agent": "alice", ...headers },
      body,
    });

  await t.step(
    "a body over 4 MiB is 413 with a JSON-RPC error saying it is too large",
    async () => {
      const res = await post("x".repeat(4 * 1024 * 1024 + 1));
      assert.equal(res.status, 413);
      const body = await res.json();
      assert.equal(body.error.code, -32600);
      assert.match(body.error.message, /too large/);
      assert.equal(body.id, null);
    },
  );
  await t.step("the limit counts bytes, not characters", async () => {
    // 3 Mi two-byte characters: 6 MiB on the wire but fewer than 4 Mi UTF-16 code units.
    const res = await post(JSON.stringify({ pad: "é".repeat(3 * 1024 * 1024) }));
    assert.equal(res.status, 413);
    await res.body?.cancel();
  });
  await t.step("a declared Content-Length over 4 MiB is 413 before reading", async () => {
    const body = new ReadableStream<Uint8Array>({
      pull: (c) => c.enqueue(new Uint8Array(64 * 1024)),
    });
    const res = await post(body, { "content-length": String(5 * 1024 * 1024) });
    assert.equal(res.status, 413);
    await res.body?.cancel();
  });
  await t.step("an endless body is cut off at 4 MiB", async () => {
    const body = new ReadableStream<Uint8Array>({
      pull: (c) => c.enqueue(new Uint8Array(64 * 1024)),
    });
    const res = await post(body);
    assert.equal(res.status, 413);
    await res.body?.cancel();
  });
  await t.step("a body that is not JSON is 400 with a JSON-RPC parse error", async () => {
    const res = await post("{not json");
    assert.equal(res.status, 400);
    assert.equal((await res.json()).error.code, -32700);
  });
  await t.step(
    "a body that is not a JSON-RPC message (or an empty batch) is Invalid Request",
    async () => {
      for (const body of ["[]", '{"foo":1}', "[1]", '"x"']) {
        const res = await post(body);
        assert.equal(res.status, 400, body);
        const json = await res.json();
        assert.equal(json.error.code, -32600, body);
        assert.match(json.error.message, /Invalid Request/, body);
      }
    },
  );
  await t.step("an empty body is 400", async () => {
    const res = await post("");
    assert.equal(res.status, 400);
    await res.body?.cancel();
  });
  assert.equal(a.app.mcpSessions, 0);
});

Deno.test("a third MCP session closes the least recently used one", async () => {
  await using t = await testApp({ maxMcpSessions: 2 });
  const dev = (agent: string) => ({ headers: { "x-termada-agent": agent } });
  await using first = await connect(t, "unix", dev("first"));
  await using second = await connect(t, "unix", dev("second"));
  // Touch the older session: the second one is now the least recently used.
  await first.client.listTools();
  await using third = await connect(t, "unix", dev("third"));
  assert.equal(t.app.mcpSessions, 2);

  await assert.rejects(
    second.client.listTools(),
    httpError(404),
  );
  assert.equal((await first.client.listTools()).tools.length, TOOLS.length);
  assert.equal((await third.client.listTools()).tools.length, TOOLS.length);
});

Deno.test("a request without a session that is not initialize evicts no session", async () => {
  await using t = await testApp({ maxMcpSessions: 2 });
  await using first = await connect(t, "unix", { headers: { "x-termada-agent": "first" } });
  await using second = await connect(t, "unix", { headers: { "x-termada-agent": "second" } });
  const res = await t.request("unix", "/mcp", {
    method: "POST",
    headers: { ...JSON_HEADERS, "x-termada-agent": "third" },
    body: LIST_TOOLS,
  });
  assert.equal(res.status, 400);
  await res.body?.cancel();
  assert.equal(t.app.mcpSessions, 2);
  assert.equal((await first.client.listTools()).tools.length, TOOLS.length);
  assert.equal((await second.client.listTools()).tools.length, TOOLS.length);
});

Deno.test("closing the app ends every MCP session", async () => {
  await using t = await testApp();
  await using c = await connect(t, "unix", { headers: { "x-termada-agent": "alice" } });
  assert.equal(t.app.mcpSessions, 1);
  await t.app.close();
  assert.equal(t.app.mcpSessions, 0);
  await assert.rejects(
    c.client.listTools(),
    httpError(404),
  );
});

Deno.test("DELETE ends an MCP session", async () => {
  await using t = await testApp();
  await using c = await connect(t, "unix", { headers: { "x-termada-agent": "alice" } });
  await c.transport.terminateSession();
  assert.equal(t.app.mcpSessions, 0);
});
