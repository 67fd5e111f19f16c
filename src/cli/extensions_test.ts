import assert from "node:assert/strict";
import type { AdapterRunView, OperatorPluginList } from "../wire/mod.ts";
import { adaptersCommand, formatAdapters, formatPlugins, pluginsCommand } from "./extensions.ts";

type Plugin = OperatorPluginList["plugins"][number];

function plugin(name: string, over: Partial<Plugin> = {}): Plugin {
  return {
    name,
    command: `/usr/local/bin/${name}`,
    state: "ready",
    restarts: 0,
    tools: ["query", "schema"],
    pid: 4242,
    ...over,
  };
}

function run(id: string, over: Partial<AdapterRunView> = {}): AdapterRunView {
  return {
    run_id: id,
    adapter: "file.patch",
    phase: "verified",
    verified: true,
    resource: "file:/srv/app/a.txt",
    summary: "patch /srv/app/a.txt (+1 -1)",
    risk: "medium",
    reversible: true,
    created_at: "2026-05-01T12:00:00Z",
    updated_at: "2026-05-01T12:00:01Z",
    ...over,
  };
}

Deno.test("plugins lists each plugin's state, restarts and tools, and a failed one's error", () => {
  const text = formatPlugins({
    plugins: [
      plugin("db"),
      plugin("search", {
        state: "failed",
        restarts: 3,
        tools: [],
        last_error: "exited with code 1:\nENOENT",
      }),
      plugin("warm", { state: "restarting", restarts: 1, last_error: "killed by SIGTERM" }),
    ],
  });
  assert.deepEqual(text.split("\n"), [
    "NAME    STATE       RESTARTS  TOOLS  DETAIL",
    "db      ready       0         2      query, schema",
    "search  failed      3         0      last error: exited with code 1: ENOENT",
    "warm    restarting  1         2      last error: killed by SIGTERM; tools: query, schema",
    "",
  ]);
});

Deno.test("plugins keeps a ready plugin's last error out and says when none are configured", () => {
  const text = formatPlugins({ plugins: [plugin("db", { last_error: "an old crash" })] });
  assert.doesNotMatch(text, /old crash/);
  assert.match(formatPlugins({ plugins: [plugin("idle", { tools: [] })] }), /^idle .* 0\s+-$/m);
  assert.equal(formatPlugins({ plugins: [] }), "No plugins configured.\n");
});

Deno.test("plugins cuts each line to the width, ending it in an ellipsis", () => {
  const tools = Array.from({ length: 40 }, (_, i) => `tool_${i}`);
  const text = formatPlugins({ plugins: [plugin("db", { tools })] }, 60);
  const [, row] = text.split("\n");
  assert.equal([...row!].length, 60);
  assert.match(row!, /^db\s+ready\s+0\s+40\s+tool_0, tool_1, .*…$/);
  for (const line of formatPlugins({ plugins: [plugin("db", { tools })] }).split("\n")) {
    assert.ok([...line].length <= 100, line);
  }
});

Deno.test("adapters shows what is offered, then each run with its agent, phase and error", () => {
  const text = formatAdapters({
    adapters: ["file.patch", "http.request"],
    runs: [
      run("run_000000000001"),
      run("run_000000000002", {
        adapter: "http.request",
        phase: "failed",
        verified: false,
        summary: "POST https://api.example.com/deploy",
        error: { code: "TIMEOUT", message: "No answer in 30 s" },
      }),
    ],
    agents: ["ci", "dev"],
  });
  assert.deepEqual(text.split("\n"), [
    "Adapters offered: file.patch, http.request",
    "RUN               AGENT  ADAPTER       PHASE     ERROR    SUMMARY",
    "run_000000000001  ci     file.patch    verified  -        patch /srv/app/a.txt (+1 -1)",
    "run_000000000002  dev    http.request  failed    TIMEOUT  POST https://api.example.com/deploy",
    "",
  ]);
});

Deno.test("adapters says none are offered and no run exists", () => {
  assert.equal(
    formatAdapters({ adapters: [], runs: [], agents: [] }),
    "Adapters offered: none\nNo adapter runs.\n",
  );
  // An older daemon without `agents`: the owner is shown as unknown.
  assert.match(formatAdapters({ adapters: [], runs: [run("run_000000000001")] }), /run_\S+\s+-\s+/);
  const long = formatAdapters({
    adapters: ["file.patch"],
    runs: [
      run("run_000000000001", { summary: "x".repeat(300), error: { code: "E", message: "" } }),
    ],
    agents: ["ci"],
  }, 80);
  for (const line of long.split("\n")) assert.ok([...line].length <= 80, line);
  assert.match(long, /verified\s+E\s+x+…\n$/);
});

Deno.test("plugins and adapters parse their arguments strictly", async (t) => {
  const out: string[] = [];
  const ctx = { out: (s: string) => Promise.resolve(void out.push(s)) };
  await t.step("--help", async () => {
    assert.equal(await pluginsCommand(["--help"], ctx), 0);
    assert.match(out.join(""), /^Usage: termada plugins \[--json\]/);
    out.length = 0;
    assert.equal(await adaptersCommand(["-h"], ctx), 0);
    assert.match(out.join(""), /^Usage: termada adapters \[--limit N\] \[--json\]/);
  });
  const invalid = async (f: () => Promise<number>, message: RegExp) => {
    await assert.rejects(f, (e: Error & { code?: string }) => {
      assert.equal(e.code, "INVALID_ARGUMENT");
      assert.match(e.message, message);
      return true;
    });
  };
  await t.step("unknown option", async () => {
    await invalid(
      () => pluginsCommand(["--frobnicate"], ctx),
      /Unknown option "--frobnicate" \(termada plugins --help\)/,
    );
    await invalid(() => adaptersCommand(["--all"], ctx), /Unknown option "--all"/);
  });
  await t.step("extra argument", async () => {
    await invalid(() => pluginsCommand(["db"], ctx), /Unexpected argument "db"/);
    await invalid(() => adaptersCommand(["run_x"], ctx), /Unexpected argument "run_x"/);
  });
  await t.step("--limit out of bounds", async () => {
    for (const bad of ["0", "501", "-1", "ten", "1.5", ""]) {
      await invalid(
        () => adaptersCommand([`--limit=${bad}`], ctx),
        new RegExp(`"--limit" must be 1 to 500, not "${bad.replace(".", "\\.")}"`),
      );
    }
    await invalid(() => adaptersCommand(["--limit"], ctx), /Option "--limit" needs a value/);
  });
});
