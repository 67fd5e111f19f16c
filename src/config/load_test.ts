import assert from "node:assert/strict";
import { join } from "node:path";
import { type Logger, TermadaError } from "../shared/mod.ts";
import { loadConfig, loadYaml, parseConfig } from "./load.ts";
import { DEFAULT_CONFIG } from "./schema.ts";

// parseConfig is synchronous; its YAML parser is loaded once, lazily.
await loadYaml();

const PATH = "/etc/termada/config.yaml";
const TOKEN_A = "a".repeat(32);
const TOKEN_B = "b".repeat(32);
const ENV = { TERMADA_TOKEN_A: TOKEN_A, TERMADA_TOKEN_B: TOKEN_B, HOME: "/home/ada" };

function parse(text: string, env: Record<string, string | undefined> = ENV) {
  return parseConfig(text, { path: PATH, env });
}

/** Asserts that parsing fails with exactly this INVALID_ARGUMENT message. */
function assertError(text: string, message: string, env?: Record<string, string | undefined>) {
  assert.throws(
    () => parse(text, env),
    (err) => {
      assert.ok(err instanceof TermadaError, String(err));
      assert.equal(err.code, "INVALID_ARGUMENT");
      assert.equal(err.message, message);
      return true;
    },
  );
}

async function withTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "termada-cfg-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("loadConfig without a file returns the embedded defaults", async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, "config.yaml");
    const loaded = await loadConfig(path, ENV);
    assert.equal(loaded.source, "defaults");
    assert.equal(loaded.path, path);
    assert.deepEqual(loaded.config, DEFAULT_CONFIG);
  });
});

Deno.test("loadConfig with required: true refuses a missing file", async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, "nope.yaml");
    await assert.rejects(
      () => loadConfig(path, ENV, { required: true }),
      (err) =>
        err instanceof TermadaError &&
        err.message === `Cannot read config "${path}": it does not exist`,
    );
  });
});

Deno.test("loadConfig reads a file and reports source file", async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, "config.yaml");
    await Deno.writeTextFile(path, "sessions:\n  shell: zsh\n", { mode: 0o600 });
    const loaded = await loadConfig(path, ENV);
    assert.equal(loaded.source, "file");
    assert.equal(loaded.config.sessions.shell, "zsh");
    assert.equal(loaded.config.sessions.max_total, 128);
  });
});

Deno.test("loadConfig names the environment variables the file took values from", async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, "config.yaml");
    await Deno.writeTextFile(
      path,
      'agents:\n  ci:\n    token: "${CI_TOKEN}"\n  bot:\n    token: "a-${CI_TOKEN}-${BOT_PART}"\n' +
        'redaction:\n  patterns: ["x$${LITERAL}"]\n',
      { mode: 0o600 },
    );
    const loaded = await loadConfig(path, {
      ...ENV,
      CI_TOKEN: "t".repeat(32),
      BOT_PART: "p".repeat(16),
    });
    assert.deepEqual([...loaded.envNames].sort(), ["BOT_PART", "CI_TOKEN"]);
    const none = await loadConfig(join(dir, "absent.yaml"), ENV);
    assert.deepEqual(none.envNames, []);
  });
});

Deno.test("loadConfig refuses files over 1 MiB and directories", async () => {
  await withTempDir(async (dir) => {
    const big = join(dir, "big.yaml");
    await Deno.writeTextFile(big, "# " + "x".repeat(1 << 20) + "\n");
    await assert.rejects(() => loadConfig(big, ENV), /is larger than 1048576 bytes/);
    await assert.rejects(() => loadConfig(dir, ENV), /it is not a regular file/);
  });
});

Deno.test("an empty or comment-only file means all defaults", () => {
  assert.deepEqual(parse(""), DEFAULT_CONFIG);
  assert.deepEqual(parse("# nothing yet\n"), DEFAULT_CONFIG);
  assert.deepEqual(parse("sessions:\nagents:\n"), DEFAULT_CONFIG);
});

Deno.test("unknown keys are errors that name the key path and its line", async (t) => {
  await t.step("nested", () => {
    assertError(
      [
        "# Termada",
        "server:",
        "  bind: 127.0.0.1:7717",
        "",
        "sessions:",
        "  record: true",
        "  shel: zsh",
      ].join("\n"),
      `Config "${PATH}" line 7: unknown key "sessions.shel"`,
    );
  });
  await t.step("top level", () => {
    assertError(
      "log:\n  level: info\nsesions:\n  shell: bash\n",
      `Config "${PATH}" line 3: unknown key "sesions"`,
    );
  });
  await t.step("inside an agent", () => {
    assertError(
      "agents:\n  claude:\n    token: ${TERMADA_TOKEN_A}\n    role: admin\n",
      `Config "${PATH}" line 4: unknown key "agents.claude.role"`,
    );
  });
  await t.step("the hint lists the valid keys", () => {
    assert.throws(
      () => parse("jobs:\n  kill_grace: 1\n"),
      (err) =>
        err instanceof TermadaError &&
        err.hint ===
          `Valid keys under "jobs": kill_grace_ms, retention_bytes, finished_per_agent, ` +
            `spool_max_bytes`,
    );
  });
});

Deno.test("type errors name the key path and line", async (t) => {
  await t.step("string for a number", () => {
    assertError(
      "sessions:\n  shell: bash\n  max_total: lots\n",
      `Config "${PATH}" line 3: invalid value for "sessions.max_total": ` +
        `invalid input: expected number, received string`,
    );
  });
  await t.step("out of bounds", () => {
    assertError(
      "jobs:\n  kill_grace_ms: 999999\n",
      `Config "${PATH}" line 2: invalid value for "jobs.kill_grace_ms": ` +
        `too big: expected number to be <=60000`,
    );
  });
  await t.step("a section that is not a mapping", () => {
    assertError(
      "log: loud\n",
      `Config "${PATH}" line 1: invalid value for "log": ` +
        `invalid input: expected object, received string`,
    );
  });
  await t.step("a block value reports its key's line", () => {
    assertError(
      "auth:\n  dev_mode:\n    - yes\n",
      `Config "${PATH}" line 2: invalid value for "auth.dev_mode": ` +
        `invalid input: expected boolean, received array`,
    );
  });
  await t.step("a missing token", () => {
    assertError(
      "agents:\n  claude:\n    name: Claude\n",
      `Config "${PATH}" line 2: invalid value for "agents.claude": needs a token or jwt: true`,
    );
  });
  await t.step("the whole file is not a mapping", () => {
    assertError(
      "- a\n- b\n",
      `Config "${PATH}" line 1: the file must be a mapping of keys, like "sessions:"`,
    );
  });
  await t.step("every problem is in the details, first line first", () => {
    assert.throws(
      () => parse("sessions:\n  max_total: 0\nzzz: 1\n"),
      (err) => {
        assert.ok(err instanceof TermadaError);
        assert.deepEqual(err.details?.problems, [
          `Config "${PATH}" line 2: invalid value for "sessions.max_total": ` +
          `too small: expected number to be >=1`,
          `Config "${PATH}" line 3: unknown key "zzz"`,
        ]);
        return true;
      },
    );
  });
});

Deno.test("${VAR} expands from the environment", async (t) => {
  await t.step("whole and partial values, plain and quoted", () => {
    const config = parse(
      [
        "agents:",
        "  a:",
        "    token: ${TERMADA_TOKEN_A}",
        '    name: "Agent ${TERMADA_TOKEN_B} end"',
        "sessions:",
        "  cwd: '${HOME}/work'",
      ].join("\n"),
    );
    assert.equal(config.agents.a?.token, TOKEN_A);
    assert.equal(config.agents.a?.name, `Agent ${TOKEN_B} end`);
    assert.equal(config.sessions.cwd, "/home/ada/work");
  });
  await t.step("a value is expanded once, never recursively", () => {
    const config = parse("sessions:\n  cwd: ${HOME}\n", { HOME: "/x/${HOME}" });
    assert.equal(config.sessions.cwd, "/x/${HOME}");
  });
  await t.step("$${ is a literal ${ and a lone $ is kept", () => {
    const config = parse(
      "agents:\n  a:\n    token: ${TERMADA_TOKEN_A}\n    name: $${NOT_EXPANDED}$x$$\n",
    );
    assert.equal(config.agents.a?.name, "${NOT_EXPANDED}$x$$");
  });
  await t.step("keys are not expanded", () => {
    assertError(
      "sessions:\n  ${TERMADA_TOKEN_A}: 1\n",
      `Config "${PATH}" line 2: unknown key "sessions.\${TERMADA_TOKEN_A}"`,
    );
  });
});

Deno.test("an unset or empty environment variable is an error with its line", async (t) => {
  const text = [
    "log:",
    "  level: info",
    "agents:",
    "  x:",
    "    token: ${TERMADA_TOKEN_X}",
  ].join("\n");
  const message = `Config "${PATH}" line 5: environment variable "TERMADA_TOKEN_X" is not set`;
  await t.step("unset", () => assertError(text, message));
  await t.step("empty", () => assertError(text, message, { ...ENV, TERMADA_TOKEN_X: "" }));
  await t.step("invalid name", () => {
    assertError(
      "sessions:\n  cwd: /a/${1X}\n",
      `Config "${PATH}" line 2: invalid environment variable name "1X" in "\${…}" ` +
        `(letters, digits and _, not starting with a digit; "$\${" is a literal "\${")`,
    );
  });
  await t.step("unterminated", () => {
    assertError(
      "sessions:\n  cwd: /a/${HOME\n",
      `Config "${PATH}" line 2: unterminated "\${" (write "$\${" for a literal "\${")`,
    );
  });
});

Deno.test("server.bind must be a loopback address", async (t) => {
  for (const bind of ["0.0.0.0:7717", "192.168.1.2:1"]) {
    await t.step(`${bind} is refused`, () => {
      assertError(
        `server:\n  bind: "${bind}"\n`,
        `Config "${PATH}" line 2: invalid value for "server.bind": must be a loopback address ` +
          `and a port, like "127.0.0.1:7717" or "[::1]:7717" (127.0.0.0/8 or ::1 only), ` +
          `not "${bind}"`,
      );
    });
  }
  for (const bind of ["[::1]:7717", "127.0.0.2:9000"]) {
    await t.step(`${bind} is accepted`, () => {
      assert.equal(parse(`server:\n  bind: "${bind}"\n`).server.bind, bind);
    });
  }
});

Deno.test("agent tokens must be unique and at least 24 characters", async (t) => {
  await t.step("duplicate tokens are refused without echoing the token", () => {
    assert.throws(
      () =>
        parse(
          [
            "agents:",
            "  claude: { token: '${TERMADA_TOKEN_A}' }",
            "  codex:",
            "    token: ${TERMADA_TOKEN_A}",
          ].join("\n"),
        ),
      (err) => {
        assert.ok(err instanceof TermadaError);
        assert.equal(
          err.message,
          `Config "${PATH}" line 4: invalid value for "agents.codex.token": ` +
            `is the same as agent "claude"'s token; each agent needs its own`,
        );
        assert.ok(!JSON.stringify(err.toJSON()).includes(TOKEN_A));
        return true;
      },
    );
  });
  await t.step("a short token is refused", () => {
    assertError(
      "agents:\n  claude:\n    token: short-token\n",
      `Config "${PATH}" line 3: invalid value for "agents.claude.token": ` +
        `too small: expected string to have >=24 characters`,
    );
  });
  await t.step("an invalid agent id is refused", () => {
    assertError(
      `agents:\n  Claude:\n    token: \${TERMADA_TOKEN_A}\n`,
      `Config "${PATH}" line 2: invalid key "agents.Claude": ` +
        `must be 1-64 lowercase letters, digits, _ or -, starting with a letter or digit`,
    );
  });
  await t.step("distinct tokens load", () => {
    const config = parse(
      "agents:\n  claude: { token: '${TERMADA_TOKEN_A}' }\n  codex: { token: '${TERMADA_TOKEN_B}' }\n",
    );
    assert.deepEqual(Object.keys(config.agents), ["claude", "codex"]);
  });
});

Deno.test("YAML syntax errors name a line", async (t) => {
  const head = "log:\n  level: info\nsessions:\n";
  await t.step("unclosed quote", () => {
    assertError(head + '  shell: "bash\n', `Config "${PATH}" line 4: Missing closing "quote`);
  });
  await t.step("unclosed flow sequence", () => {
    assert.throws(
      () => parse(head + "  shell: [bash,\n"),
      (err) =>
        err instanceof TermadaError && err.code === "INVALID_ARGUMENT" &&
        err.message.startsWith(`Config "${PATH}" line 4: `),
    );
  });
  await t.step("tab indentation", () => {
    assertError(
      head + "\tshell: bash\n",
      `Config "${PATH}" line 4: Tabs are not allowed as indentation`,
    );
  });
  await t.step("misaligned keys", () => {
    assertError(
      head + "  shell: bash\n record: true\n",
      `Config "${PATH}" line 5: All mapping items must start at the same column`,
    );
  });
  await t.step("duplicate key", () => {
    assertError(
      "sessions:\n  shell: bash\n  shell: zsh\n",
      `Config "${PATH}" line 3: Map keys must be unique`,
    );
  });
  await t.step("unknown tag", () => {
    assertError("log:\n  level: !shout info\n", `Config "${PATH}" line 2: Unresolved tag: !shout`);
  });
  await t.step("several documents", () => {
    assert.throws(() => parse("log: {}\n---\njobs: {}\n"), /multiple documents/);
  });
});

Deno.test("a config readable by others warns only when it holds literal tokens", async (t) => {
  const warnings: string[] = [];
  const logger: Logger = {
    debug() {},
    info() {},
    warn: (message) => void warnings.push(message),
    error() {},
  };
  const load = (text: string, mode: number) =>
    withTempDir(async (dir) => {
      const path = join(dir, "config.yaml");
      await Deno.writeTextFile(path, text);
      await Deno.chmod(path, mode);
      const loaded = await loadConfig(path, ENV, { logger });
      assert.equal(Object.keys(loaded.config.agents).length, 1);
    });
  const literal = `agents:\n  a:\n    token: ${TOKEN_A}\n`;
  await t.step("literal token, mode 0644: warning, still loads", async () => {
    warnings.length = 0;
    await load(literal, 0o644);
    assert.deepEqual(warnings, [
      "Config file holds agent tokens and is readable by other users",
    ]);
  });
  await t.step("literal token, mode 0600: no warning", async () => {
    warnings.length = 0;
    await load(literal, 0o600);
    assert.deepEqual(warnings, []);
  });
  await t.step("token from the environment, mode 0644: no warning", async () => {
    warnings.length = 0;
    await load("agents:\n  a:\n    token: ${TERMADA_TOKEN_A}\n", 0o644);
    assert.deepEqual(warnings, []);
  });
});

Deno.test("config.example.yaml loads cleanly", async () => {
  const path = new URL("../../config.example.yaml", import.meta.url).pathname;
  const text = await Deno.readTextFile(path);
  const names = [...text.matchAll(/(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((m) => m[1]!);
  assert.ok(names.length > 0, "the example shows ${ENV} expansion");
  const env: Record<string, string> = { HOME: "/home/ada" };
  names.forEach((name, i) => env[name] = `example-token-${i}-${"x".repeat(24)}`);
  const loaded = await loadConfig(path, env);
  assert.equal(loaded.source, "file");
  // Every key the example sets is either the default or one of its documented sample agents.
  const { agents, ...rest } = loaded.config;
  const { agents: _none, ...defaults } = DEFAULT_CONFIG;
  assert.deepEqual(rest, defaults);
  assert.ok(Object.keys(agents).length > 0);
});
