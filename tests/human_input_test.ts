/**
 * Black-box: a password typed by a person on exec_write {human}'s one-time page reaches the
 * program and is masked everywhere; the agent gets only the URL (clients with URL elicitation
 * are asked to open it); the page is single-use and only for prompts that do not echo.
 */
import assert from "node:assert/strict";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { call, startDaemon, stdioClient, tempHome, termada } from "./_daemon.ts";

async function waitingAtPrompt(c: Awaited<ReturnType<typeof stdioClient>>, command: string) {
  const started = await call(c, "exec_start", { command: [command] });
  const r = await call(c, "exec_wait", {
    job_id: started.job_id,
    until: { prompt: true },
    timeout_ms: 10_000,
  });
  assert.equal(r.status, "awaiting_input", JSON.stringify(r));
  return String(started.job_id);
}

Deno.test("a person types a password on a one-time page; the agent never sees it", async () => {
  const home = await tempHome();
  try {
    await using _d = await startDaemon(home);
    const opened: string[] = [];
    await using c = await stdioClient(home, ["--agent", "ci"], {}, {
      capabilities: { elicitation: { form: {}, url: {} } },
      setup: (cl) =>
        cl.setRequestHandler(
          ElicitRequestSchema,
          ((req: { params: { url?: string } }) => {
            if (req.params.url) opened.push(req.params.url);
            return { action: "accept" };
          }) as never,
        ),
    });
    const job = await waitingAtPrompt(c, `read -s -p "Password: " pw; echo; echo "got: $pw"`);
    const ack = await call(c, "exec_write", { job_id: job, human: { message: "the db password" } });
    const url = String(ack.url);
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/secret\/[0-9a-f]{64}$/);
    for (let i = 0; i < 100 && opened.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.deepEqual(opened, [url], "the client was asked to open the page");

    const form = await fetch(url);
    assert.equal(form.status, 200);
    assert.equal(form.headers.get("referrer-policy"), "no-referrer");
    assert.match(await form.text(), /the db password/);
    const sent = await fetch(url, {
      method: "POST",
      body: new URLSearchParams({ value: "s3cret-from-a-person" }),
    });
    assert.equal(sent.status, 200, await sent.text());
    const again = await fetch(url, {
      method: "POST",
      body: new URLSearchParams({ value: "second-try" }),
    });
    assert.equal(again.status, 404, "single use");
    await again.body?.cancel();

    const done = await call(c, "exec_wait", {
      job_id: job,
      until: { exit: true },
      timeout_ms: 10_000,
    });
    assert.equal(done.exit_code, 0);
    assert.match(String(done.output), /got: /);
    assert.doesNotMatch(String(done.output), /s3cret-from-a-person/, "masked in the output");
    const audit = (await termada(home, ["audit", "-n", "50", "--json"])).stdout;
    assert.match(audit, /\[typed by a person\]/);
    assert.doesNotMatch(audit, /s3cret-from-a-person/);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("a prompt that echoes cannot be answered through the page (the agent holds its URL)", async () => {
  const home = await tempHome();
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "ci"]);
    const job = await waitingAtPrompt(c, `read -p "Name: " n; echo "hi $n"`);
    const r = await c.callTool({ name: "exec_write", arguments: { job_id: job, human: {} } });
    assert.equal(r.isError, true);
    assert.equal(
      (r.structuredContent as { error: { code: string } }).error.code,
      "NOT_AWAITING_INPUT",
    );
    await call(c, "exec_write", { job_id: job, input: "ada" });
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
