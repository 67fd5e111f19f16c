import assert from "node:assert/strict";
import { join } from "node:path";
import { TermadaError } from "../shared/mod.ts";
import {
  detectClients,
  editCodexToml,
  editJsonServers,
  type Launch,
  resolveLaunch,
  setupClients,
  tildify,
} from "./setup.ts";

const LAUNCH: Launch = {
  command: "/opt/termada/bin/termada",
  args: ["serve", "--stdio"],
  source: "flag",
};

async function withHome(fn: (home: string) => Promise<void>): Promise<void> {
  const home = await Deno.makeTempDir({ prefix: "termada-setup-" });
  try {
    await fn(home);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
}

const envFor = (home: string) => ({ HOME: home, PATH: join(home, "bin") });

Deno.test("setup adds termada to ~/.claude.json, keeps every other key and the mode, and is idempotent", async () => {
  await withHome(async (home) => {
    const file = join(home, ".claude.json");
    const before = {
      firstStartTime: "2026-01-01T00:00:00.000Z",
      projects: { "/x": { allowedTools: ["a"], mcpServers: { p: { command: "p" } } } },
      mcpServers: { other: { type: "stdio", command: "other", args: [], env: { A: "1" } } },
      numStartups: 3,
    };
    await Deno.writeTextFile(file, JSON.stringify(before, null, 2), { mode: 0o640 });
    await Deno.chmod(file, 0o640);
    const env = envFor(home);
    const first = await setupClients({ home, env, launch: LAUNCH, clients: ["claude"] });
    assert.deepEqual(first, [{ client: "claude", file, action: "added" }]);
    const after = JSON.parse(await Deno.readTextFile(file));
    assert.deepEqual(after, {
      ...before,
      mcpServers: {
        ...before.mcpServers,
        termada: { type: "stdio", command: LAUNCH.command, args: ["serve", "--stdio"], env: {} },
      },
    });
    assert.equal((await Deno.stat(file)).mode! & 0o777, 0o640, "the file's mode is kept");
    const mtime = (await Deno.stat(file)).mtime;
    const second = await setupClients({ home, env, launch: LAUNCH, clients: ["claude"] });
    assert.equal(second[0]!.action, "unchanged");
    assert.deepEqual((await Deno.stat(file)).mtime, mtime, "an unchanged file is not rewritten");
    assert.deepEqual(
      [...Deno.readDirSync(home)].map((e) => e.name),
      [".claude.json"],
      "no temp file left",
    );
  });
});

Deno.test("setup refuses a malformed ~/.claude.json, naming the file, and writes nothing", async (t) => {
  for (
    const [name, text] of [
      ["not JSON", '{"mcpServers": {'],
      ["not an object", "[1, 2]"],
      ["mcpServers not an object", '{"mcpServers": "x"}'],
    ]
  ) {
    await t.step(name!, async () => {
      await withHome(async (home) => {
        const file = join(home, ".claude.json");
        await Deno.writeTextFile(file, text!);
        // Cursor is valid: it must not be written either when claude fails.
        const cursor = join(home, ".cursor", "mcp.json");
        await Deno.mkdir(join(home, ".cursor"));
        await Deno.writeTextFile(cursor, "{}");
        await assert.rejects(
          setupClients({ home, env: envFor(home), launch: LAUNCH, clients: ["cursor", "claude"] }),
          (err: unknown) =>
            err instanceof TermadaError && err.code === "INVALID_ARGUMENT" &&
            err.message.includes(file),
        );
        assert.equal(await Deno.readTextFile(file), text, "left as it was");
        assert.equal(await Deno.readTextFile(cursor), "{}", "no other client was written");
      });
    });
  }
});

Deno.test("setup updates a stale termada entry and leaves extra fields of a matching one", () => {
  const stale = JSON.stringify({ mcpServers: { termada: { command: "old", args: [] } } });
  const r = editJsonServers(stale, "f", { command: "new", args: ["serve", "--stdio"] });
  assert.equal(r.action, "updated");
  assert.deepEqual(JSON.parse(r.text!).mcpServers.termada, {
    command: "new",
    args: ["serve", "--stdio"],
  });
  const same = JSON.stringify({
    mcpServers: { termada: { command: "new", args: ["serve", "--stdio"], env: { X: "1" } } },
  });
  assert.deepEqual(editJsonServers(same, "f", { command: "new", args: ["serve", "--stdio"] }), {
    action: "unchanged",
  });
});

Deno.test("setup writes ~/.cursor/mcp.json from nothing", async () => {
  await withHome(async (home) => {
    const r = await setupClients({ home, env: envFor(home), launch: LAUNCH, clients: ["cursor"] });
    assert.equal(r[0]!.action, "added");
    const file = join(home, ".cursor", "mcp.json");
    assert.deepEqual(JSON.parse(await Deno.readTextFile(file)), {
      mcpServers: { termada: { command: LAUNCH.command, args: ["serve", "--stdio"] } },
    });
    assert.equal((await Deno.stat(file)).mode! & 0o777, 0o600);
  });
});

const CODEX = `# my codex config
model = "o3"

[mcp_servers.docs]
command = "docs-mcp"
args = [
  "--port",
  "[not a header]",
]

[profiles.fast]
model = "o4-mini"
`;

Deno.test("setup appends a [mcp_servers.termada] table to a codex config with other tables", () => {
  const r = editCodexToml(CODEX, "config.toml", LAUNCH);
  assert.equal(r.action, "added");
  assert.equal(
    r.text,
    CODEX.trimEnd() + "\n\n[mcp_servers.termada]\n" +
      `command = "/opt/termada/bin/termada"\nargs = ["serve", "--stdio"]\n`,
  );
  assert.equal(editCodexToml(r.text, "config.toml", LAUNCH).action, "unchanged");
});

Deno.test("setup replaces only command and args of an existing codex termada table", () => {
  const text = `[mcp_servers.termada]
command = "old"
args = [
  "serve",
]
startup_timeout_sec = 20

[mcp_servers.termada.env]
TERMADA_HOME = "/x"

[profiles.fast]
model = "o4-mini"
`;
  const r = editCodexToml(text, "config.toml", LAUNCH);
  assert.equal(r.action, "updated");
  assert.equal(
    r.text,
    `[mcp_servers.termada]
command = "/opt/termada/bin/termada"
args = ["serve", "--stdio"]
startup_timeout_sec = 20

[mcp_servers.termada.env]
TERMADA_HOME = "/x"

[profiles.fast]
model = "o4-mini"
`,
  );
  assert.equal(editCodexToml(r.text, "config.toml", LAUNCH).action, "unchanged");
});

Deno.test("setup refuses a codex termada it cannot edit safely", async (t) => {
  for (
    const [name, text] of [
      ["inline table", '[mcp_servers]\ntermada = { command = "x", args = [] }\n'],
      ["dotted keys", 'mcp_servers.termada.command = "x"\n'],
      [
        "two tables",
        '[mcp_servers.termada]\ncommand = "a"\n[mcp_servers.termada]\ncommand = "b"\n',
      ],
    ]
  ) {
    await t.step(name!, () => {
      assert.throws(
        () => editCodexToml(text, "/h/.codex/config.toml", LAUNCH),
        (err: unknown) =>
          err instanceof TermadaError && err.message.includes('"/h/.codex/config.toml"'),
      );
    });
  }
});

Deno.test("setup escapes codex strings as TOML basic strings and writes a new file", async () => {
  await withHome(async (home) => {
    const launch: Launch = { ...LAUNCH, command: '/opt/my "tools"/termada' };
    const r = await setupClients({ home, env: envFor(home), launch, clients: ["codex"] });
    assert.equal(r[0]!.action, "added");
    const text = await Deno.readTextFile(join(home, ".codex", "config.toml"));
    assert.equal(
      text,
      '[mcp_servers.termada]\ncommand = "/opt/my \\"tools\\"/termada"\n' +
        'args = ["serve", "--stdio"]\n',
    );
  });
});

Deno.test("setup --dry-run writes nothing", async () => {
  await withHome(async (home) => {
    const r = await setupClients({
      home,
      env: envFor(home),
      launch: LAUNCH,
      clients: ["claude", "codex", "cursor"],
      dryRun: true,
    });
    assert.deepEqual(r.map((x) => x.action), ["added", "added", "added"]);
    assert.deepEqual([...Deno.readDirSync(home)], []);
  });
});

Deno.test("setup finds clients by their config directory or their binary on PATH", async () => {
  await withHome(async (home) => {
    const env = envFor(home);
    assert.deepEqual(detectClients(home, env), []);
    await Deno.mkdir(join(home, ".codex"));
    await Deno.mkdir(join(home, "bin"));
    await Deno.writeTextFile(join(home, "bin", "cursor"), "#!/bin/sh\n", { mode: 0o755 });
    assert.deepEqual(detectClients(home, env), ["codex", "cursor"]);
  });
});

Deno.test("setup resolves the command: --command, this binary, termada on PATH, else source", async (t) => {
  await withHome(async (home) => {
    const env = envFor(home);
    const self = (extra: string[]) => ({ program: "/usr/bin/deno", args: ["run", "x", ...extra] });
    await t.step("from source", () => {
      assert.deepEqual(resolveLaunch(["serve"], { env, execPath: "/usr/bin/deno", self }), {
        command: "/usr/bin/deno",
        args: ["run", "x", "serve"],
        source: "source",
      });
    });
    await Deno.mkdir(join(home, "bin"));
    const onPath = join(home, "bin", "termada");
    await Deno.writeTextFile(onPath, "#!/bin/sh\n", { mode: 0o755 });
    await t.step("on PATH", () => {
      assert.deepEqual(resolveLaunch(["serve"], { env, execPath: "/usr/bin/deno", self }), {
        command: onPath,
        args: ["serve"],
        source: "path",
      });
    });
    await t.step("a compiled binary", () => {
      assert.equal(
        resolveLaunch(["serve"], { env, execPath: "/opt/termada", self }).command,
        "/opt/termada",
      );
    });
    await t.step("--command must be an executable file", () => {
      assert.equal(resolveLaunch([], { env, command: onPath }).source, "flag");
      assert.throws(
        () => resolveLaunch([], { env, command: join(home, "missing") }),
        (e: unknown) => e instanceof TermadaError && e.code === "INVALID_ARGUMENT",
      );
      Deno.chmodSync(onPath, 0o644);
      assert.throws(() => resolveLaunch([], { env, command: onPath }), /not an executable/);
    });
  });
});

Deno.test("setup shows paths under HOME with ~", () => {
  assert.equal(tildify("/home/a/.claude.json", "/home/a"), "~/.claude.json");
  assert.equal(tildify("/home/ab/x", "/home/a"), "/home/ab/x");
});
