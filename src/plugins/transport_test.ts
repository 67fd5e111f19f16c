import assert from "node:assert/strict";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { StdioPluginTransport } from "./transport.ts";

/** A child that runs `script` in a fresh Deno (no permissions). */
function deno(script: string, options: { maxMessageBytes?: number } = {}): StdioPluginTransport {
  return new StdioPluginTransport(Deno.execPath(), {
    args: ["eval", "--quiet", script],
    env: { PATH: Deno.env.get("PATH") ?? "", HOME: Deno.env.get("HOME") ?? "" },
    label: "t",
    ...options,
  });
}

/** Collects what the transport reports, and resolves `closed` on onclose. */
function watch(t: StdioPluginTransport) {
  const messages: JSONRPCMessage[] = [];
  const errors: Error[] = [];
  let closes = 0;
  let onClosed!: () => void;
  const closed = new Promise<void>((r) => onClosed = r);
  t.onmessage = (m) => messages.push(m);
  t.onerror = (e) => errors.push(e);
  t.onclose = () => {
    closes++;
    onClosed();
  };
  return { messages, errors, closed, closes: () => closes };
}

Deno.test("transport delivers newline-delimited JSON-RPC both ways", async () => {
  // The child echoes each line back.
  await using t = deno(`
    const d = new TextDecoder(); let b = "";
    for await (const c of Deno.stdin.readable) {
      b += d.decode(c);
      let i; while ((i = b.indexOf("\\n")) >= 0) { console.log(b.slice(0, i)); b = b.slice(i + 1); }
    }`);
  const w = watch(t);
  await t.start();
  assert.ok(t.pid !== undefined);
  await t.send({ jsonrpc: "2.0", id: 1, method: "ping" });
  await t.send({ jsonrpc: "2.0", method: "notifications/x" });
  const deadline = Date.now() + 10_000;
  while (w.messages.length < 2 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.deepEqual(w.messages, [
    { jsonrpc: "2.0", id: 1, method: "ping" },
    { jsonrpc: "2.0", method: "notifications/x" },
  ]);
  await t.close();
  assert.equal(w.closes(), 1);
  assert.equal(t.pid, undefined);
  assert.ok(t.exitStatus !== undefined);
  await t.close(); // idempotent
  assert.equal(w.closes(), 1);
  await assert.rejects(t.send({ jsonrpc: "2.0", method: "x" }), /connection is closed/);
});

Deno.test("transport closes with an error on a line that is not JSON", async () => {
  await using t = deno(
    `console.log("hello {"); await new Promise(() => setInterval(() => {}, 1000));`,
  );
  const w = watch(t);
  await t.start();
  await w.closed;
  await t.finished;
  assert.match(
    w.errors[0]?.message ?? "",
    /Plugin "t" broke the protocol: a line on stdout is not JSON/,
  );
  assert.ok(t.exitStatus !== undefined && !t.exitStatus.success, "the child was killed");
});

Deno.test("transport closes with an error on JSON that is not JSON-RPC", async () => {
  await using t = deno(
    `console.log(JSON.stringify({ hello: 1 })); await new Promise(() => setInterval(() => {}, 1000));`,
  );
  const w = watch(t);
  await t.start();
  await w.closed;
  assert.match(w.errors[0]?.message ?? "", /not a JSON-RPC message/);
});

Deno.test("transport refuses a line over its bound before it ends, and kills the child", async () => {
  // 3 MB without a newline, then the child waits: the bound must trip on the partial line.
  await using t = deno(
    `await Deno.stdout.write(new TextEncoder().encode("[" + "1,".repeat(1.5e6))); await new Promise(() => setInterval(() => {}, 1000));`,
    { maxMessageBytes: 1024 * 1024 },
  );
  const w = watch(t);
  await t.start();
  await w.closed;
  await t.finished;
  assert.match(w.errors[0]?.message ?? "", /longer than 1048576 bytes/);
  assert.equal(t.exitStatus?.signal, "SIGTERM");
});

Deno.test("transport keeps only the last bytes of stderr", async () => {
  await using t = deno(`
    const e = new TextEncoder();
    for (let i = 0; i < 100; i++) await Deno.stderr.write(e.encode("line " + i + " " + "x".repeat(500) + "\\n"));
    await Deno.stderr.write(e.encode("the end\\n"));`);
  const w = watch(t);
  await t.start();
  await w.closed;
  await t.finished;
  assert.ok(t.stderr.length <= 16 * 1024);
  assert.ok(t.stderr.endsWith("the end\n"));
  assert.equal(t.exitStatus?.code, 0);
});

Deno.test("transport SIGKILLs a child that ignores SIGTERM", async () => {
  await using t = deno(
    `Deno.addSignalListener("SIGTERM", () => {}); console.log(JSON.stringify({ jsonrpc: "2.0", method: "up" })); await new Promise(() => setInterval(() => {}, 1000));`,
  );
  const w = watch(t);
  await t.start();
  const deadline = Date.now() + 10_000;
  while (w.messages.length < 1 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 10));
  }
  const t0 = performance.now();
  await t.close();
  assert.equal(t.exitStatus?.signal, "SIGKILL");
  assert.ok(performance.now() - t0 >= 1900, "waited the grace period first");
});

Deno.test("transport start fails for a missing command", async () => {
  await using t = new StdioPluginTransport("/nonexistent/plugin-binary", { label: "t" });
  assert.throws(() => t.start(), Deno.errors.NotFound);
});
