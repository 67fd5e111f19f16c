import assert from "node:assert/strict";
import { join } from "node:path";
import { captureLog, closedPort, FakeBotApi, testCerts, waitFor } from "./_test_util.ts";
import { createNotifier } from "./create.ts";
import type { Message } from "./message.ts";
import { Notifier } from "./notifier.ts";
import { NotificationsConfig } from "./schema.ts";
import { DeliveryError } from "./sink.ts";
import { loadBotToken, scrubToken, type TelegramOptions, TelegramSink } from "./telegram.ts";

const TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";
const SECRET_PART = TOKEN.split(":")[1]!;
const MESSAGE: Message = {
  title: "Approval waiting",
  body: "Approval apr_1",
  urgent: true,
  count: 1,
};

async function sink(api: string, options: Partial<TelegramOptions> = {}): Promise<TelegramSink> {
  return new TelegramSink({
    token: () => TOKEN,
    chatId: "-100123",
    apiBase: api,
    caCerts: [(await testCerts()).ca],
    timeoutMs: 2000,
    ...options,
  });
}

async function sendError(s: TelegramSink): Promise<DeliveryError> {
  try {
    await s.send(MESSAGE, new AbortController().signal);
  } catch (err) {
    assert.ok(err instanceof DeliveryError, String(err));
    assert.ok(!err.message.includes(SECRET_PART), `token in: ${err.message}`);
    assert.ok(!String(err.stack).includes(SECRET_PART));
    return err;
  }
  throw new Error("expected the send to fail");
}

Deno.test("telegram: sendMessage over HTTPS with the token in the path and plain text", async () => {
  await using api = new FakeBotApi(await testCerts());
  const s = await sink(api.url + "/");
  try {
    await s.send(MESSAGE, new AbortController().signal);
  } finally {
    s.close();
  }
  assert.equal(api.requests.length, 1);
  assert.equal(api.requests[0]!.path, `/bot${TOKEN}/sendMessage`);
  assert.deepEqual(api.requests[0]!.body, {
    chat_id: "-100123",
    text: "Termada: Approval waiting\nApproval apr_1",
    disable_web_page_preview: true,
  });
});

Deno.test("telegram: how each answer is classified (retry or not)", async (t) => {
  const certs = await testCerts();
  const cases: [string, Response, boolean, number | undefined][] = [
    [
      "429 with retry_after",
      Response.json({
        ok: false,
        error_code: 429,
        description: "Too Many Requests: retry after 3",
        parameters: { retry_after: 3 },
      }, { status: 429 }),
      true,
      3000,
    ],
    ["500", new Response("<html>oops</html>", { status: 500 }), true, undefined],
    [
      "400 chat not found",
      Response.json({ ok: false, error_code: 400, description: "Bad Request: chat not found" }, {
        status: 400,
      }),
      false,
      undefined,
    ],
    ["200 without ok", Response.json({ ok: false }), false, undefined],
    [
      "a redirect",
      new Response(null, { status: 302, headers: { location: "https://x/" } }),
      false,
      undefined,
    ],
  ];
  for (const [name, response, retriable, retryAfterMs] of cases) {
    await t.step(name, async () => {
      await using api = new FakeBotApi(certs, () => response);
      const s = await sink(api.url);
      try {
        const err = await sendError(s);
        assert.equal(err.retriable, retriable, err.message);
        assert.equal(err.retryAfterMs, retryAfterMs);
      } finally {
        s.close();
      }
    });
  }
});

Deno.test("telegram: a server that never answers times out, scrubbed and retriable", async () => {
  await using api = new FakeBotApi(await testCerts(), () => "hang");
  const s = await sink(api.url, { timeoutMs: 150 });
  try {
    const err = await sendError(s);
    assert.equal(err.retriable, true);
    assert.match(err.message, /no answer within 150 ms/);
  } finally {
    s.close();
  }
});

Deno.test("telegram: connection refused is retriable and never quotes the URL's token", async () => {
  const s = await sink(`https://127.0.0.1:${closedPort()}`);
  try {
    const err = await sendError(s);
    assert.equal(err.retriable, true);
    // Deno's cause reads "error sending request for url (https://…/bot<TOKEN>/sendMessage)".
    assert.match(err.message, /^Cannot send to Telegram: .*bot\[token\]\/sendMessage.*refused/i);
  } finally {
    s.close();
  }
});

Deno.test("telegram: an untrusted certificate fails (no silent downgrade)", async () => {
  await using api = new FakeBotApi(await testCerts());
  const s = new TelegramSink({
    token: () => TOKEN,
    chatId: "1",
    apiBase: api.url,
    timeoutMs: 2000,
  });
  try {
    await sendError(s);
    assert.equal(api.requests.length, 0);
  } finally {
    s.close();
  }
});

Deno.test("telegram: http api_base and malformed tokens are refused before any request", async () => {
  assert.throws(
    () => new TelegramSink({ token: () => TOKEN, chatId: "1", apiBase: "http://127.0.0.1:1" }),
    TypeError,
  );
  await using api = new FakeBotApi(await testCerts());
  const s = await sink(api.url, { token: () => "not a token" });
  try {
    const err = await sendError(s);
    assert.equal(err.retriable, false);
    assert.equal(api.requests.length, 0);
  } finally {
    s.close();
  }
});

Deno.test("scrubToken removes the token and anything token-shaped after /bot", () => {
  const url = `https://api.telegram.org/bot${TOKEN}/sendMessage`;
  assert.equal(
    scrubToken(`error sending request for url (${url})`),
    "error sending request for url (https://api.telegram.org/bot[token]/sendMessage)",
  );
  assert.equal(scrubToken(`x ${TOKEN} y`, TOKEN), "x [token] y");
  assert.ok(!scrubToken(encodeURIComponent(TOKEN), TOKEN).includes(SECRET_PART));
});

Deno.test("notifier + telegram: 429 then success and 500 then success, nothing leaked to logs", async (t) => {
  const certs = await testCerts();
  const answers: [string, Response][] = [
    [
      "429 retry_after 1",
      Response.json({ ok: false, error_code: 429, parameters: { retry_after: 1 } }, {
        status: 429,
      }),
    ],
    [
      "500",
      Response.json({ ok: false, error_code: 500, description: `boom bot${TOKEN}` }, {
        status: 500,
      }),
    ],
  ];
  for (const [name, first] of answers) {
    await t.step(name, async () => {
      await using api = new FakeBotApi(certs, (n) => n === 0 ? first : Response.json({ ok: true }));
      const log = captureLog();
      await using notifier = new Notifier([await sink(api.url)], {
        redact: (s) => s,
        coalesceMs: 0,
        backoff: { baseMs: 20, maxMs: 100 },
        log,
      });
      log.debug("start", {});
      notifier.notify({ kind: "stop_all", actor: "alice", actor_kind: "operator", outcome: "x" });
      await waitFor("a delivered message", () => notifier.stats().telegram!.sent === 1);
      assert.equal(api.requests.length, 2);
      assert.equal(notifier.stats().telegram!.retries, 1);
      assert.ok(log.lines.some((l) => l.includes("will be retried")));
      for (const l of log.lines) assert.ok(!l.includes(SECRET_PART), l);
    });
  }
});

Deno.test("notifier + telegram: 400 is not retried and the log never holds the token", async () => {
  await using api = new FakeBotApi(
    await testCerts(),
    () =>
      Response.json({ ok: false, error_code: 401, description: "Unauthorized" }, { status: 401 }),
  );
  const log = captureLog();
  await using notifier = new Notifier([await sink(api.url)], {
    redact: (s) => s,
    coalesceMs: 0,
    backoff: { baseMs: 10, maxMs: 10 },
    log,
  });
  notifier.notify({ kind: "job_failed", job_id: "job_1", outcome: "failed" });
  await waitFor("the refusal", () => notifier.stats().telegram!.failed === 1);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(api.requests.length, 1);
  const line = log.lines.find((l) => l.includes("refused"))!;
  assert.match(line, /HTTP 401/);
  assert.match(line, /check the bot token/);
  for (const l of log.lines) assert.ok(!l.includes(SECRET_PART), l);
});

Deno.test("notifier + telegram: connection refused, retries exhausted, logs scrubbed", async () => {
  const log = captureLog();
  await using notifier = new Notifier([await sink(`https://127.0.0.1:${closedPort()}`)], {
    redact: (s) => s,
    coalesceMs: 0,
    maxRetries: 2,
    backoff: { baseMs: 5, maxMs: 10 },
    log: { ...log, debug: log.warn },
  });
  notifier.notify({ kind: "approval_pending", approval_id: "apr_1", command: `curl bot${TOKEN}` });
  await waitFor("retries to run out", () => notifier.stats().telegram!.failed === 1);
  assert.equal(notifier.stats().telegram!.retries, 2);
  assert.ok(log.lines.length >= 3);
  for (const l of log.lines) assert.ok(!l.includes(SECRET_PART), l);
});

Deno.test("createNotifier: a 0600 token file and a CA file set up telegram end to end", async () => {
  const dir = await Deno.makeTempDir({ prefix: "termada-notify-" });
  try {
    const certs = await testCerts();
    await using api = new FakeBotApi(certs);
    const tokenFile = join(dir, "bot-token");
    Deno.writeTextFileSync(tokenFile, TOKEN + "\n", { mode: 0o600 });
    Deno.chmodSync(tokenFile, 0o600);
    const caFile = join(dir, "ca.pem");
    Deno.writeTextFileSync(caFile, certs.ca);
    const config = NotificationsConfig.parse({
      telegram: {
        enabled: true,
        bot_token_file: tokenFile,
        chat_id: 42,
        api_base: api.url,
        ca_file: caFile,
      },
      coalesce_ms: 0,
    });
    const secret = "s3cr3t-db-password";
    await using notifier = createNotifier(config, {
      redact: (s) => s.replaceAll(secret, "[secret]"),
      log: captureLog(),
    });
    assert.deepEqual(notifier.sinks, ["telegram"]);
    notifier.notify({
      kind: "approval_pending",
      actor: "builder",
      approval_id: "apr_9",
      command: `mysql -p${secret} prod`,
    });
    await waitFor("the message", () => api.requests.length === 1);
    const text = String(api.requests[0]!.body.text);
    assert.equal(api.requests[0]!.body.chat_id, "42");
    assert.match(
      text,
      /^Termada: Approval waiting\nApproval apr_9 for agent "builder": mysql -p\[secret\] prod$/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("loadBotToken refuses group/world-readable, foreign and malformed files", async (t) => {
  const dir = await Deno.makeTempDir({ prefix: "termada-notify-" });
  try {
    const file = join(dir, "bot-token");
    const write = (text: string, mode: number) => {
      Deno.writeTextFileSync(file, text);
      Deno.chmodSync(file, mode);
    };
    await t.step("0600 and 0400 are accepted", () => {
      write(TOKEN + "\n", 0o600);
      assert.equal(loadBotToken(file), TOKEN);
      write(TOKEN, 0o400);
      assert.equal(loadBotToken(file), TOKEN);
    });
    for (const mode of [0o640, 0o604, 0o644, 0o660]) {
      await t.step(`mode ${mode.toString(8)} is refused`, () => {
        write(TOKEN, mode);
        assert.throws(() => loadBotToken(file), (e: Error) => {
          assert.match(e.message, /group or others may read it/);
          assert.ok(!e.message.includes(SECRET_PART));
          return true;
        });
      });
    }
    await t.step("content that is not a token is refused without quoting it", () => {
      write("password=hunter2hunter2", 0o600);
      assert.throws(() => loadBotToken(file), (e: Error) => !e.message.includes("hunter2"));
    });
    await t.step("a directory or a missing file is refused", () => {
      assert.throws(() => loadBotToken(dir), /not a regular file/);
      assert.throws(() => loadBotToken(join(dir, "nope")), /cannot be read/);
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
