/**
 * Black-box: MCP resources through the official SDK client over stdio (which validates every
 * result and content item): templates, result links, reads, owner checks and subscriptions.
 */
import assert from "node:assert/strict";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { call, startDaemon, stdioClient, tempHome } from "./_daemon.ts";

type S = Record<string, unknown>;

async function rpcError(p: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await p;
  } catch (err) {
    return { code: (err as { code: number }).code, message: (err as Error).message };
  }
  throw new Error("expected a JSON-RPC error");
}

/** Resolves once `cond` holds, polling with a deadline. */
async function until(cond: () => boolean, ms: number, what: string): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

Deno.test("agents read and follow their own jobs and sessions as MCP resources", async (t) => {
  const home = await tempHome();
  try {
    await using _d = await startDaemon(home);
    await using a = await stdioClient(home, ["--agent", "res-a"]);
    await using b = await stdioClient(home, ["--agent", "res-b"]);
    const updates: string[] = [];
    a.setNotificationHandler(
      ResourceUpdatedNotificationSchema,
      (n: { params: { uri: string } }) => void updates.push(n.params.uri),
    );
    await a.listTools(); // the client then checks each result against its outputSchema

    const { resourceTemplates } = await a.listResourceTemplates();
    const templates = resourceTemplates.map((r: { uriTemplate: string }) => r.uriTemplate);

    await t.step("the templates include job output and session screen", () => {
      assert.ok(templates.includes("termada://jobs/{job_id}/output"), String(templates));
      assert.ok(templates.includes("termada://sessions/{session_id}/screen"));
    });

    const run = await a.callTool({ name: "exec_run", arguments: { command: ["echo res-hello"] } });
    const job = run.structuredContent as S;
    const outputUri = `termada://jobs/${job.job_id}/output`;
    const screenUri = `termada://sessions/${job.session_id}/screen`;

    await t.step("exec_run links to its output, which reads as text", async () => {
      const links = (run.content as { type: string; uri?: string }[]).filter((c) =>
        c.type === "resource_link"
      );
      assert.deepEqual(links.map((l) => l.uri), [outputUri]);
      const r = await a.readResource({ uri: outputUri });
      assert.equal((r.contents[0] as { text: string }).text, "res-hello\n");
      assert.equal((r._meta as S)["termada/has_more"], false);
    });

    await t.step("the screen and the list show the caller's own things", async () => {
      const screen = await a.readResource({ uri: screenUri });
      assert.match((screen.contents[0] as { text: string }).text, /res-hello/);
      const { resources } = await a.listResources();
      const uris = resources.map((r: { uri: string }) => r.uri);
      assert.ok(uris.includes(outputUri) && uris.includes(screenUri), String(uris));
      assert.deepEqual((await b.listResources()).resources, []);
    });

    await t.step("another agent reads nothing of it: -32002 Resource not found", async () => {
      for (const uri of [outputUri, screenUri]) {
        const e = await rpcError(b.readResource({ uri }));
        assert.equal(e.code, -32002, uri);
        assert.match(e.message, /Resource not found/);
      }
      const bad = await rpcError(a.readResource({ uri: "termada://jobs/x/nothing" }));
      assert.equal(bad.code, -32602);
    });

    await t.step("a subscription hears a job grow and end, and stops on unsubscribe", async () => {
      const started = await call(a, "exec_start", {
        command: ["for i in 1 2 3; do echo tick $i; sleep 0.2; done"],
        mode: "background",
      });
      const uri = `termada://jobs/${started.job_id}/output`;
      await a.subscribeResource({ uri });
      const done = await call(a, "exec_wait", { job_id: started.job_id, timeout_ms: 10_000 });
      assert.equal(done.status, "exited");
      await until(() => updates.filter((u) => u === uri).length >= 2, 3000, "updates");
      await a.unsubscribeResource({ uri });
      const r = await a.readResource({ uri });
      assert.match((r.contents[0] as { text: string }).text, /tick 3/);
    });

    await t.step({
      name: "the recording reads as asciicast v2 when the daemon offers it",
      ignore: !templates.includes("termada://sessions/{session_id}/recording"),
      fn: async () => {
        const uri = `termada://sessions/${job.session_id}/recording`;
        const r = await a.readResource({ uri });
        const c = r.contents[0] as { mimeType: string; text: string };
        assert.equal(c.mimeType, "application/x-asciicast");
        assert.equal(JSON.parse(c.text.split("\n")[0]!).version, 2);
        assert.match(c.text, /res-hello/);
        assert.equal((await rpcError(b.readResource({ uri }))).code, -32002);
      },
    });
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
