/**
 * Black-box: a daemon configured to notify over Telegram sends an approval waiting, a job that
 * needs input and a stop-all to a local HTTPS server standing in for the Bot API (no internet),
 * redacted, with the token only in the request path — and a bad token file stops the start.
 */
import assert from "node:assert/strict";
import { FakeBotApi, testCerts } from "../src/notify/_test_util.ts";
import { call, startDaemon, stdioClient, tempHome, termada } from "./_daemon.ts";

const TOKEN = "123456:AAbbCCddEEffGGhhIIjjKKllMMnnOOppQQ";

async function until(what: string, f: () => boolean, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!f()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function notifyHome(api: string, tokenMode = 0o600): Promise<string> {
  const home = await tempHome();
  const certs = await testCerts();
  await Deno.writeTextFile(`${home}/ca.pem`, certs.ca);
  await Deno.writeTextFile(`${home}/bot-token`, TOKEN + "\n", { mode: tokenMode });
  await Deno.chmod(`${home}/bot-token`, tokenMode);
  await Deno.writeTextFile(
    `${home}/config.yaml`,
    `policies:
  default:
    confirm: ["touch *"]
redaction:
  patterns: ["hunter2[0-9]+"]
notifications:
  telegram:
    enabled: true
    bot_token_file: ${home}/bot-token
    chat_id: "4242"
    api_base: ${api}
    ca_file: ${home}/ca.pem
  coalesce_ms: 100
  rate: { per_minute: 600, burst: 20 }
`,
  );
  return home;
}

Deno.test("approvals waiting, input needed and stop-all reach Telegram, redacted; the token never leaks", async () => {
  await using bot = new FakeBotApi(await testCerts());
  const home = await notifyHome(bot.url);
  try {
    await using d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "ci"]);
    const texts = () => bot.requests.map((r) => String(r.body.text));

    // A confirm rule parks the command: a person is told it waits.
    const parked = await call(c, "exec_run", {
      command: ["touch /tmp/termada-notify-hunter2123"],
      timeout_ms: 0,
    });
    assert.equal(parked.status, "pending_approval", JSON.stringify(parked));
    await until("the approval message", () => texts().some((t) => /approv/i.test(t)));
    const approval = texts().find((t) => /approv/i.test(t))!;
    assert.match(approval, /ci/);
    assert.doesNotMatch(approval, /hunter2123/, "the command is redacted");

    // A job that waits at a prompt nobody answers automatically.
    const s = (await call(c, "session_create", {})).session_id as string;
    const ask = await call(c, "exec_start", {
      session: s,
      command: ["read -p 'Name? ' n; echo got $n"],
    });
    await until("the input message", () => texts().some((t) => /input/i.test(t)));
    assert.ok(texts().find((t) => /input/i.test(t))!.includes(String(ask.job_id)));

    // Stop all.
    const stop = await termada(home, ["stop", "--barrier-ms", "100"]);
    assert.equal(stop.code, 0, stop.stderr);
    await until("the stop-all message", () => texts().some((t) => /stop/i.test(t)));

    for (const r of bot.requests) {
      assert.equal(r.path, `/bot${TOKEN}/sendMessage`);
      assert.equal(r.body.chat_id, "4242");
    }
    assert.doesNotMatch(d.stderr(), new RegExp(TOKEN.split(":")[1]!), "the token is in no log");
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("a bot token file others may read stops the daemon's start with a clear error", async () => {
  const home = await notifyHome("https://127.0.0.1:1", 0o644);
  try {
    const r = await termada(home, ["serve", "--bind", "127.0.0.1:0"]);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /bot-token/);
    assert.doesNotMatch(r.stderr, new RegExp(TOKEN.split(":")[1]!));
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
