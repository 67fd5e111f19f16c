/**
 * Black-box: plugins declared in the config, seen and called by an agent through the real SDK
 * client against a spawned daemon — the tools as `<plugin>.<tool>`, the policy's `plugins:`
 * rules, the audit's intent and outcome records, and plugins that crash or hang while the
 * daemon and the other tools keep answering.
 */
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { denoDir, pollUntil } from "./_clients.ts";
import {
  call,
  homeWithConfig,
  operatorFetch,
  ROOT,
  type RunningDaemon,
  startDaemon,
  stdioClient,
  termada,
} from "./_daemon.ts";

const FIXTURES = `${ROOT}tests/_fixtures/plugins`;

function entry(name: string, file: string, extra: string[] = [], more = ""): string {
  const args = ["run", "--quiet", "--no-prompt", "--allow-read", "--allow-env", file, ...extra];
  return `  - name: ${name}\n    command: ${JSON.stringify(Deno.execPath())}\n` +
    `    args: ${JSON.stringify(args)}\n    env: {DENO_DIR: ${JSON.stringify(DIR)}}\n${more}`;
}

const DIR = await denoDir();
const CONFIG = `plugins:
${entry("good", `${FIXTURES}/good.ts`)}
${entry("crashy", `${FIXTURES}/misbehaving.ts`, ["exit_after_call"])}
${entry("slow", `${FIXTURES}/misbehaving.ts`, ["hang_call"], "    timeout_ms: 1500\n")}
policies:
  default:
    plugins:
      deny: ["good.add"]
`;

interface Listed {
  name: string;
  title?: string;
  description?: string;
  outputSchema?: unknown;
  _meta?: Record<string, unknown>;
}

/** The tools list once every name in `names` is in it (plugins start in the background). */
async function listed(c: Client, names: readonly string[]): Promise<Listed[]> {
  return await pollUntil(
    async () => {
      const l = (await c.listTools()).tools as Listed[];
      return names.every((n) => l.some((x) => x.name === n)) ? l : undefined;
    },
    `${names.join(", ")} listed`,
    20_000,
  );
}

async function auditRecords(d: RunningDaemon): Promise<Record<string, unknown>[]> {
  const r = await operatorFetch(d)("/audit?n=500");
  assert.equal(r.status, 200);
  const body = await r.json() as { records?: Record<string, unknown>[] };
  return body.records ?? (body as unknown as Record<string, unknown>[]);
}

Deno.test("plugins: tools as <plugin>.<tool>, through the gateway and the audit; broken ones stay contained", async (t) => {
  const home = await homeWithConfig(CONFIG);
  try {
    await using d = await startDaemon(home);
    let listChanged = 0;
    await using c = await stdioClient(home, ["--agent", "dev"], {}, {
      setup: (client) =>
        client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
          listChanged++;
        }),
    });
    const tools = await listed(c, ["good.echo", "good.add", "crashy.echo", "slow.echo"]);

    await t.step("listed as plugin tools, beside Termada's own", () => {
      const echo = tools.find((x) => x.name === "good.echo")!;
      assert.equal(echo._meta?.["termada/plugin"], "good");
      assert.match(echo.title ?? "", /plugin good/);
      assert.match(echo.description ?? "", /^\[plugin good\] Returns its text/);
      assert.ok(echo.outputSchema, "its output schema is published");
      assert.ok(tools.some((x) => x.name === "exec_run"));
    });

    await t.step(
      "a call passes and its result is the plugin's, checked by the client",
      async () => {
        const r = await c.callTool({ name: "good.echo", arguments: { text: "hello plugin" } });
        assert.equal(r.isError, undefined, JSON.stringify(r));
        assert.deepEqual(r.structuredContent, { text: "hello plugin" });
      },
    );

    await t.step("the policy's plugins rules decide: good.add is denied", async () => {
      const r = await call(c, "good.add", { a: 1, b: 2 });
      assert.equal((r.error as { code: string }).code, "DENIED_BY_POLICY", JSON.stringify(r));
    });

    await t.step(
      "a tool a plugin lacks is NOT_FOUND; a plugin that is not there, -32602",
      async () => {
        const r = await call(c, "good.nope", {});
        assert.equal((r.error as { code: string }).code, "NOT_FOUND", JSON.stringify(r));
        await assert.rejects(
          c.callTool({ name: "nope.echo", arguments: {} }),
          (e: unknown) => (e as { code?: number }).code === -32602 && /nope\.echo/.test(String(e)),
        );
      },
    );

    await t.step("the audit holds intent and outcome of the call, and the refusal", async () => {
      const records = await auditRecords(d);
      const text = records.map((r) => JSON.stringify(r));
      const requested = text.find((s) =>
        s.includes('"action.requested"') && s.includes('"plugin"') && s.includes("good.echo")
      );
      assert.ok(requested, `no intent record:\n${text.slice(-20).join("\n")}`);
      assert.match(requested, /hello plugin/);
      assert.ok(
        text.some((s) => s.includes('"action.done"') && s.includes('"kind":"plugin"')),
        "no outcome record",
      );
      assert.ok(text.some((s) => s.includes('"action.denied"') && s.includes("good.add")));
    });

    await t.step("a hanging plugin times out; the others answer meanwhile", async () => {
      const started = Date.now();
      const slow = call(c, "slow.echo", { text: "x" });
      const fast = await call(c, "good.echo", { text: "fast" });
      assert.deepEqual(fast, { text: "fast" });
      assert.ok(Date.now() - started < 1400, "the good plugin waited for the slow one");
      const r = await slow;
      assert.equal((r.error as { code: string }).code, "PLUGIN_TIMEOUT", JSON.stringify(r));
      const run = await call(c, "exec_run", { command: ["echo", "still here"] });
      assert.match(String(run.output), /still here/);
    });

    await t.step("a plugin that dies on a call: typed error, restarted, list_changed", async () => {
      const r = await call(c, "crashy.echo", { text: "x" });
      assert.equal((r.error as { code: string }).code, "PLUGIN_UNAVAILABLE", JSON.stringify(r));
      assert.equal((r.error as { retriable: boolean }).retriable, true);
      const status = await pollUntil(
        async () => {
          const res = await operatorFetch(d)("/plugins");
          const body = await res.json() as {
            plugins: { name: string; state: string; restarts: number }[];
          };
          const crashy = body.plugins.find((p) => p.name === "crashy");
          return crashy && crashy.restarts >= 1 && crashy.state === "ready" ? body : undefined;
        },
        "crashy restarted",
        15_000,
      );
      assert.equal(status.plugins.find((p) => p.name === "good")?.state, "ready");
      await pollUntil(() => Promise.resolve(listChanged > 0 || undefined), "tools/list_changed");
      const again = await c.callTool({ name: "good.echo", arguments: { text: "after" } });
      assert.deepEqual(again.structuredContent, { text: "after" });
    });
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("plugins: a policy with command rules and no plugins rules refuses plugin tools (fail closed)", async () => {
  const home = await homeWithConfig(`plugins:
${entry("good", `${FIXTURES}/good.ts`)}
policies:
  default:
    allow: ["echo *"]
`);
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    await listed(c, ["good.echo"]);
    const r = await call(c, "good.echo", { text: "x" });
    const e = r.error as { code: string; message: string };
    assert.equal(e.code, "DENIED_BY_POLICY", JSON.stringify(r));
    assert.match(e.message, /no "plugins" rules/);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("plugins: a config entry that breaks the schema is refused with its path", async () => {
  const home = await homeWithConfig(`plugins:\n  - name: "Bad Name"\n    command: x\n`);
  try {
    const r = await termada(home, ["serve", "--bind", "127.0.0.1:0"]);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /plugins/, r.stderr);
    assert.match(r.stderr, /name/, r.stderr);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("plugins: a confirm rule holds the call for a person; a configured secret is masked in the audit and in the answer", async () => {
  const home = await homeWithConfig(`plugins:
${entry("good", `${FIXTURES}/good.ts`)}
redaction:
  patterns: ["PLUG-SECRET-[0-9]+"]
policies:
  default:
    plugins:
      confirm: ["good.echo"]
`);
  try {
    await using d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    await listed(c, ["good.echo"]);
    const op = operatorFetch(d);
    const waiting = c.callTool({ name: "good.echo", arguments: { text: "PLUG-SECRET-4242" } });
    waiting.catch(() => {/* asserted below; a failed step must not leave it unhandled */});
    const pending = await pollUntil(async () => {
      const r = await op("/approvals");
      const body = await r.json() as { approvals: { approval_id: string; command: string[] }[] };
      return body.approvals.find((a) => a.command[0] === "good.echo");
    }, "the call in the approval queue");
    // The person deciding sees the call as it will be made (as for a command).
    assert.match(pending.command.join(" "), /PLUG-SECRET-4242/);
    const ok = await op(`/approvals/${pending.approval_id}/approve`, {
      method: "POST",
      body: "{}",
      headers: { "content-type": "application/json" },
    });
    assert.equal(ok.status, 200, await ok.text());
    const r = await waiting;
    // What the plugin answers is masked like any output an agent reads.
    assert.deepEqual(r.structuredContent, { text: "[REDACTED]" });
    assert.ok(!JSON.stringify(r.content).includes("PLUG-SECRET-4242"), JSON.stringify(r));
    const audit = await (await op("/audit?n=500")).text();
    assert.match(audit, /good\.echo/);
    assert.ok(!audit.includes("PLUG-SECRET-4242"), "the secret is in the audit log");
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
