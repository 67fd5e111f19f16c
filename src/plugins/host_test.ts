import assert from "node:assert/strict";
import { TermadaError } from "../shared/mod.ts";
import { PluginHost } from "./host.ts";
import { PluginConfig } from "./schema.ts";

const FIXTURES = new URL("../../tests/_fixtures/plugins/", import.meta.url).pathname;

function config(
  name: string,
  file: string,
  extra: Record<string, unknown> = {},
  args: string[] = [],
) {
  return PluginConfig.parse({
    name,
    command: Deno.execPath(),
    args: [
      "run",
      "--quiet",
      "--no-prompt",
      "--allow-read",
      "--allow-env",
      FIXTURES + file,
      ...args,
    ],
    ...extra,
  });
}

function misbehaving(mode: string, extra: Record<string, unknown> = {}): PluginHost {
  return new PluginHost(config(mode.replaceAll("_", "-"), "misbehaving.ts", extra, [mode]));
}

/** Polls `ok` until it holds or 15 s pass. */
async function until(ok: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function rejectsWith(p: Promise<unknown>, code: string, message?: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof TermadaError, `a TermadaError, got ${err}`);
    assert.equal(err.code as string, code, err.message);
    if (message) assert.match(err.message, message);
    return true;
  });
}

/** The good plugin still answers: the daemon side did not stall. */
async function stillAnswers(good: PluginHost): Promise<void> {
  const r = await good.call("add", { a: 2, b: 3 });
  assert.deepEqual(r.content, [{ type: "text", text: "5" }]);
}

Deno.test("a good plugin lists its tools qualified and answers calls", async () => {
  await using host = new PluginHost(config("good", "good.ts"));
  let changes = 0;
  host.onChange(() => changes++);
  await host.start();
  assert.equal(host.status().state, "ready");
  assert.equal(typeof host.status().pid, "number");
  assert.equal(changes, 1);
  const tools = host.tools();
  assert.deepEqual(tools.map((t) => t.name).sort(), ["good.add", "good.echo"]);
  const echo = tools.find((t) => t.tool === "echo")!;
  assert.equal(echo.plugin, "good");
  assert.equal(echo.description, "Returns its text");
  assert.ok(echo.outputSchema !== undefined);
  const r = await host.call("echo", { text: "hi" });
  assert.deepEqual(r.structuredContent, { text: "hi" });
  assert.deepEqual(r.content, [{ type: "text", text: "hi" }]);
  await stillAnswers(host);
  await rejectsWith(
    host.call("nope"),
    "NOT_FOUND",
    /Cannot call "good.nope": plugin "good" has no such tool/,
  );
  await host.close();
  assert.equal(host.status().state, "stopped");
  assert.deepEqual(host.tools(), []);
  await rejectsWith(host.call("echo", { text: "x" }), "PLUGIN_UNAVAILABLE", /host is closed/);
});

Deno.test("calls over calls_per_minute are refused as QUOTA_EXCEEDED (retriable)", async () => {
  await using host = new PluginHost(config("good", "good.ts", { calls_per_minute: 2 }));
  await host.start();
  await host.call("add", { a: 1, b: 1 });
  await host.call("add", { a: 1, b: 1 });
  await assert.rejects(host.call("add", { a: 1, b: 1 }), (err: unknown) => {
    assert.ok(err instanceof TermadaError);
    assert.equal(err.code, "QUOTA_EXCEEDED");
    assert.equal(err.retriable, true);
    return true;
  });
});

Deno.test("a caller's abort cancels the call as STOPPED", async () => {
  await using host = misbehaving("hang_call");
  await host.start();
  const ac = new AbortController();
  const p = host.call("echo", { text: "x" }, { signal: ac.signal });
  setTimeout(() => ac.abort(), 50);
  await rejectsWith(p, "STOPPED", /the caller cancelled it/);
  await until(() => host.stderr().includes("cancelled:"), "notifications/cancelled");
});

Deno.test("a misbehaving plugin gets a typed error while the daemon side keeps answering", async (t) => {
  await using good = new PluginHost(config("good", "good.ts"));
  await good.start();

  await t.step("a line that is not JSON: the call fails at once, the plugin restarts", async () => {
    await using host = misbehaving("invalid_json");
    await host.start();
    await rejectsWith(host.call("echo", { text: "x" }), "PLUGIN_UNAVAILABLE");
    await stillAnswers(good);
    await until(() => host.status().restarts >= 1 && host.status().state === "ready", "restart");
    assert.match(host.status().last_error ?? "", /not JSON/);
  });

  await t.step("a 10 MB line: refused at the bound, the plugin restarts", async () => {
    await using host = misbehaving("huge_line");
    await host.start();
    await rejectsWith(host.call("echo", { text: "x" }), "PLUGIN_UNAVAILABLE");
    await stillAnswers(good);
    await until(() => host.status().restarts >= 1, "restart");
    assert.match(host.status().last_error ?? "", /longer than 4194304 bytes/);
  });

  await t.step("structuredContent that violates the output schema: PLUGIN_BAD_RESULT", async () => {
    await using host = misbehaving("bad_output");
    await host.start();
    await rejectsWith(host.call("echo", { text: "x" }), "PLUGIN_BAD_RESULT", /output schema/);
    await stillAnswers(good);
    assert.equal(host.status().state, "ready", "bad output is no reason to restart");
  });

  await t.step("no structuredContent despite an output schema: PLUGIN_BAD_RESULT", async () => {
    await using host = misbehaving("no_structured");
    await host.start();
    await rejectsWith(
      host.call("echo", { text: "x" }),
      "PLUGIN_BAD_RESULT",
      /no structuredContent/,
    );
  });

  await t.step("a result over MAX_RESULT_BYTES: PLUGIN_BAD_RESULT", async () => {
    await using host = misbehaving("big_result");
    await host.start();
    await rejectsWith(host.call("echo", { text: "x" }), "PLUGIN_BAD_RESULT", /over 1048576 bytes/);
  });

  await t.step("a call never answered: PLUGIN_TIMEOUT and notifications/cancelled", async () => {
    await using host = misbehaving("hang_call");
    await host.start();
    const t0 = performance.now();
    const hung = host.call("echo", { text: "x" }, { timeoutMs: 300 });
    await stillAnswers(good);
    await rejectsWith(hung, "PLUGIN_TIMEOUT", /no answer within 300 ms/);
    assert.ok(performance.now() - t0 < 5000);
    await until(() => host.stderr().includes("cancelled:"), "notifications/cancelled");
  });

  await t.step("exits after a call: restarted with a doubling back-off", async () => {
    await using host = misbehaving("exit_after_call");
    await host.start();
    const t1 = performance.now();
    await rejectsWith(host.call("echo", { text: "x" }), "PLUGIN_UNAVAILABLE");
    await stillAnswers(good);
    await until(() => host.status().state === "ready", "first restart");
    const first = performance.now() - t1;
    assert.equal(host.status().restarts, 1);
    assert.match(host.status().last_error ?? "", /exited with status 3/);
    const t2 = performance.now();
    await rejectsWith(host.call("echo", { text: "x" }), "PLUGIN_UNAVAILABLE");
    await until(
      () => host.status().state === "ready" && host.status().restarts === 2,
      "second restart",
    );
    const second = performance.now() - t2;
    assert.ok(first >= 500, `first back-off ${first} ms`);
    assert.ok(second >= 1000, `second back-off ${second} ms`);
  });

  await t.step(
    "500 tools over pages: kept to MAX_TOOLS_PER_PLUGIN, bad names dropped",
    async () => {
      await using host = misbehaving("many_tools");
      await host.start();
      const tools = host.tools();
      assert.equal(tools.length, 64);
      assert.ok(tools.every((x) => /^many-tools\.t\d+$/.test(x.name)));
    },
  );

  await t.step("a 1 MB schema: that tool dropped, the others kept", async () => {
    await using host = misbehaving("huge_schema");
    await host.start();
    assert.deepEqual(host.tools().map((x) => x.tool), ["echo"]);
  });

  await t.step("never answers initialize: killed at the timeout and retried", async () => {
    await using host = misbehaving("hang_init", { timeout_ms: 100 });
    await host.start();
    assert.notEqual(host.status().state, "ready");
    assert.match(host.status().last_error ?? "", /no answer within 100 ms/);
    await rejectsWith(host.call("echo", { text: "x" }), "PLUGIN_UNAVAILABLE");
    await stillAnswers(good);
    await until(() => host.status().restarts >= 2, "two retries");
    assert.equal(host.status().state === "ready", false);
  });

  await t.step("tools/list_changed: the list is re-read and onChange fires", async () => {
    await using host = misbehaving("list_changed");
    let changes = 0;
    host.onChange(() => changes++);
    await host.start();
    assert.deepEqual(host.tools().map((x) => x.tool), ["echo"]);
    await host.call("echo", { text: "x" });
    await until(() => changes >= 2, "onChange after list_changed");
    assert.deepEqual(host.tools().map((x) => x.tool), ["echo", "extra"]);
  });
});

Deno.test("a command that cannot run leaves the plugin failed, not retrying", async () => {
  await using host = new PluginHost(
    PluginConfig.parse({ name: "gone", command: "/nonexistent/plugin" }),
  );
  await host.start();
  assert.equal(host.status().state, "failed");
  assert.match(host.status().last_error ?? "", /Cannot start plugin "gone"/);
  await rejectsWith(host.call("x"), "PLUGIN_UNAVAILABLE");
});

Deno.test("PluginConfig applies defaults and refuses what is out of bounds", () => {
  const c = PluginConfig.parse({ name: "notes", command: "deno" });
  assert.deepEqual(c, {
    name: "notes",
    command: "deno",
    args: [],
    env: {},
    timeout_ms: 30000,
    calls_per_minute: 600,
  });
  for (
    const bad of [
      { name: "Notes", command: "deno" },
      { name: "notes", command: "" },
      { name: "notes", command: "deno", timeout_ms: 99 },
      { name: "notes", command: "deno", calls_per_minute: 6001 },
      { name: "notes", command: "deno", env: { "1BAD": "x" } },
      { name: "notes", command: "deno", extra: true },
      { name: "notes", command: "deno", args: Array(65).fill("a") },
    ]
  ) {
    assert.equal(PluginConfig.safeParse(bad).success, false, JSON.stringify(bad).slice(0, 80));
  }
});

Deno.test("the demo notes plugin adds and lists notes through the host", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const notes = new URL("../../demo/plugin-notes/notes.ts", import.meta.url).pathname;
    await using host = new PluginHost(PluginConfig.parse({
      name: "notes",
      command: Deno.execPath(),
      args: [
        "run",
        "--quiet",
        "--no-prompt",
        "--allow-env",
        `--allow-read=${dir}`,
        `--allow-write=${dir}`,
        notes,
      ],
      env: { NOTES_DIR: dir },
    }));
    await host.start();
    assert.deepEqual(host.tools().map((t) => t.name).sort(), [
      "notes.add_note",
      "notes.list_notes",
    ]);
    assert.deepEqual((await host.call("add_note", { text: "first" })).structuredContent, {
      id: 1,
      count: 1,
    });
    assert.deepEqual((await host.call("add_note", { text: "second" })).structuredContent, {
      id: 2,
      count: 2,
    });
    const listed = await host.call("list_notes");
    const out = listed.structuredContent as { notes: { text: string }[]; total: number };
    assert.deepEqual(out.notes.map((n) => n.text), ["first", "second"]);
    assert.equal(out.total, 2);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
