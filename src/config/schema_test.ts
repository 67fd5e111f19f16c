import assert from "node:assert/strict";
import { DEFAULT_LIMITS, DEFAULT_OUTPUT, type EngineOptions } from "../engine/mod.ts";
import { TermadaError } from "../shared/mod.ts";
import { loadYaml, parseConfig } from "./load.ts";
import { resolvePaths } from "../paths/mod.ts";
import {
  Config,
  DEFAULT_CONFIG,
  effectivePaths,
  engineOptionsFrom,
  parseBind,
  policyFor,
} from "./schema.ts";

// parseConfig is synchronous; its YAML parser is loaded once, lazily.
await loadYaml();

Deno.test("DEFAULT_CONFIG holds the embedded defaults", () => {
  assert.deepEqual(DEFAULT_CONFIG, {
    server: { bind: null, socket: null },
    security: {
      exec_gate: "auto",
      identity_mode: "development",
      operator_token_roles: [],
      environment: null,
      quotas: { pending_per_owner: 32, pending_total: 128 },
    },
    log: { level: "info" },
    auth: { dev_mode: true },
    agents: {},
    sessions: {
      shell: "bash",
      cwd: null,
      user_rc: false,
      max_per_agent: 32,
      max_total: 128,
      record: true,
      recording_max_file_bytes: 16 * 1024 * 1024,
      recording_keep_files: 3,
      reap_after_ms: 300_000,
    },
    jobs: {
      kill_grace_ms: 2000,
      retention_bytes: 8 * 1024 * 1024,
      finished_per_agent: 200,
      spool_max_bytes: 16 * 1024 * 1024,
    },
    approvals: { confirm_timeout_ms: 120_000, elicitation: false },
    redaction: { patterns: [] },
    policies: {
      default: { allow: [], deny: [], confirm: [], auto_answer: [], rules: [], budgets: [] },
    },
    default_policy: "default",
    servers: [],
    remote: { connect_timeout_ms: 8000, keepalive_ms: 15_000, reconnect_attempts: 8 },
    audit: { anchors: { every_s: 300, receivers: [] } },
    notifications: {
      desktop: { enabled: false, urgency: "auto", timeout_ms: 5000 },
      telegram: { enabled: false, api_base: "https://api.telegram.org", timeout_ms: 10000 },
      events: ["stop_all", "approval_pending", "input_needed", "job_failed"],
      failures: { statuses: ["failed", "timed_out", "killed"], nonzero_exit: false },
      rate: { per_minute: 20, burst: 5 },
      coalesce_ms: 2000,
      queue_size: 256,
      max_retries: 6,
    },
    plugins: [],
    adapters: { http: [] },
  });
  assert.ok(Object.isFrozen(DEFAULT_CONFIG.sessions));
});

Deno.test("the config defaults agree with the engine's own defaults", () => {
  const e = engineOptionsFrom(DEFAULT_CONFIG, resolvePaths({ env: {}, home: "/h" }));
  assert.equal(e.limits.sessionsPerOwner, DEFAULT_LIMITS.sessionsPerOwner);
  assert.equal(e.limits.sessionsTotal, DEFAULT_LIMITS.sessionsTotal);
  assert.equal(e.limits.finishedJobsPerOwner, DEFAULT_LIMITS.finishedJobsPerOwner);
  assert.equal(e.output.retentionBytes, DEFAULT_OUTPUT.retentionBytes);
});

Deno.test("engineOptionsFrom maps config keys to engine option names", () => {
  const config = Config.parse({
    sessions: {
      shell: "zsh",
      cwd: "/srv",
      user_rc: true,
      max_per_agent: 4,
      max_total: 8,
      record: false,
      recording_max_file_bytes: 1 << 20,
      recording_keep_files: 5,
    },
    jobs: { kill_grace_ms: 500, retention_bytes: 1 << 20, finished_per_agent: 10 },
  });
  const paths = resolvePaths({ env: {}, home: "/h" });
  const options: Partial<EngineOptions> = engineOptionsFrom(config, paths);
  assert.deepEqual(options, {
    runtimeDir: "/h/run",
    sandbox: { mode: "auto", hide: ["/h"], launcherCache: "/h/launcher-cache" },
    recordingsDir: "/h/recordings",
    limits: { sessionsPerOwner: 4, sessionsTotal: 8, finishedJobsPerOwner: 10 },
    output: { retentionBytes: 1 << 20 },
    defaultShell: "zsh",
    defaultCwd: "/srv",
    userRc: true,
    record: false,
    recording: { maxFileBytes: 1 << 20, keepFiles: 5 },
    killGraceMs: 500,
    redactPatterns: [],
  });
  assert.equal("defaultCwd" in engineOptionsFrom(DEFAULT_CONFIG, paths), false);
});

Deno.test("effectivePaths applies server.socket", () => {
  const paths = resolvePaths({ env: {}, home: "/h" });
  assert.equal(effectivePaths(paths, DEFAULT_CONFIG), paths);
  const config = Config.parse({ server: { socket: "/run/t.sock" } });
  assert.equal(effectivePaths(paths, config).socketPath, "/run/t.sock");
  assert.equal(effectivePaths(paths, config).dbPath, "/h/termada.db");
});

Deno.test("parseBind accepts only loopback addresses", async (t) => {
  await t.step("accepted", () => {
    assert.deepEqual(parseBind("127.0.0.1:7717"), { hostname: "127.0.0.1", port: 7717 });
    assert.deepEqual(parseBind("127.0.0.2:9000"), { hostname: "127.0.0.2", port: 9000 });
    assert.deepEqual(parseBind("127.255.255.254:1"), { hostname: "127.255.255.254", port: 1 });
    assert.deepEqual(parseBind("[::1]:7717"), { hostname: "::1", port: 7717 });
    assert.deepEqual(parseBind("[0:0:0:0:0:0:0:1]:80"), { hostname: "::1", port: 80 });
    assert.deepEqual(parseBind("127.0.0.1:0"), { hostname: "127.0.0.1", port: 0 });
  });
  await t.step("refused", () => {
    for (
      const bind of [
        "0.0.0.0:7717",
        "192.168.1.2:1",
        "[::]:7717",
        "[::2]:1",
        "localhost:7717",
        "127.0.0.1",
        "127.0.0.1:65536",
        "127.0.0.1:07717",
        "127.0.0.01:7717",
        "127.0.0.256:1",
        "127.0.0:1",
        "::1:7717",
        "",
      ]
    ) {
      assert.equal(parseBind(bind), undefined, bind);
    }
  });
});

Deno.test("Config rejects unknown keys at every level", () => {
  assert.equal(Config.safeParse({ sesions: {} }).success, false);
  assert.equal(Config.safeParse({ sessions: { shel: "bash" } }).success, false);
  assert.equal(
    Config.safeParse({ agents: { a: { token: "t".repeat(24), role: "x" } } }).success,
    false,
  );
});

Deno.test("Config treats an empty section as its defaults", () => {
  const config = Config.parse({ sessions: null, agents: null });
  assert.deepEqual(config.sessions, DEFAULT_CONFIG.sessions);
  assert.deepEqual(config.agents, {});
});

Deno.test("Config bounds numbers and strings", async (t) => {
  const refused: [string, unknown][] = [
    ["max_per_agent 0", { sessions: { max_per_agent: 0 } }],
    ["max_total fractional", { sessions: { max_total: 1.5 } }],
    ["kill_grace_ms above a minute", { jobs: { kill_grace_ms: 60_001 } }],
    ["retention_bytes tiny", { jobs: { retention_bytes: 10 } }],
    ["relative cwd", { sessions: { cwd: "work" } }],
    ["socket too long", { server: { socket: "/" + "s".repeat(107) } }],
    ["unknown shell", { sessions: { shell: "fish" } }],
    ["unknown log level", { log: { level: "trace" } }],
    ["agent id with capitals", { agents: { Claude: { token: "t".repeat(24) } } }],
    ["agent id too long", { agents: { ["a".repeat(65)]: { token: "t".repeat(24) } } }],
    ["token with spaces", { agents: { a: { token: "t".repeat(20) + " xyz" } } }],
    ["agent name with newline", { agents: { a: { token: "t".repeat(24), name: "a\nb" } } }],
  ];
  for (const [name, input] of refused) {
    await t.step(name, () => assert.equal(Config.safeParse(input).success, false));
  }
});

const TOKEN = "t".repeat(24);

Deno.test("policies: agents get their own policy, others the default", () => {
  const config = Config.parse({
    policies: {
      default: { deny: ["rm -rf *"] },
      ci: { allow: ["npm test *"], confirm: ["git push *"] },
    },
    agents: { claude: { token: TOKEN, policy: "ci" }, codex: { token: "u".repeat(24) } },
  });
  assert.deepEqual(policyFor(config, "claude"), {
    allow: ["npm test *"],
    deny: [],
    confirm: ["git push *"],
    auto_answer: [],
    rules: [],
    budgets: [],
  });
  assert.deepEqual(policyFor(config, "codex").deny, ["rm -rf *"]);
  assert.deepEqual(policyFor(config, "not-configured").deny, ["rm -rf *"]);
  assert.equal(policyFor(DEFAULT_CONFIG, "x"), DEFAULT_CONFIG.policies.default);
});

Deno.test("policies: default_policy picks the fallback and an empty entry means no rules", () => {
  const config = Config.parse({ policies: { open: null, strict: {} }, default_policy: "strict" });
  assert.deepEqual(policyFor(config, "any"), {
    allow: [],
    deny: [],
    confirm: [],
    auto_answer: [],
    rules: [],
    budgets: [],
  });
  assert.deepEqual(config.policies.open, config.policies.strict);
});

Deno.test("policies: a config built without the schema fails closed", () => {
  const broken = { ...DEFAULT_CONFIG, policies: {} } as Config;
  assert.deepEqual(policyFor(broken, "x").deny, ["*"]);
  // Names are looked up as own keys only.
  const proto = { ...DEFAULT_CONFIG, default_policy: "constructor" } as Config;
  assert.deepEqual(policyFor(proto, "x").deny, ["*"]);
});

Deno.test("policies: unknown policy names are errors on the key that names them", () => {
  const bad = Config.safeParse({ agents: { claude: { token: TOKEN, policy: "strict" } } });
  assert.equal(bad.success, false);
  const issue = bad.error!.issues[0]!;
  assert.deepEqual(issue.path, ["agents", "claude", "policy"]);
  assert.match(issue.message, /no policy named "strict" under "policies" \(defined: default\)/);

  const noDefault = Config.safeParse({ policies: { ci: {} } });
  assert.equal(noDefault.success, false);
  assert.deepEqual(noDefault.error!.issues[0]!.path, ["default_policy"]);
  assert.equal(Config.safeParse({ policies: { ci: {} }, default_policy: "ci" }).success, true);
  assert.equal(Config.safeParse({ default_policy: "constructor" }).success, false);
});

Deno.test("policies: rules and auto answers are bounded and validated", async (t) => {
  const refused: [string, unknown][] = [
    ["unknown key in a policy", { policies: { default: { alow: [] } } }],
    ["blank rule", { policies: { default: { deny: ["  "] } } }],
    ["rule with a newline", { policies: { default: { deny: ["rm\n*"] } } }],
    ["rule ending in a lone backslash", { policies: { default: { deny: ["rm \\"] } } }],
    ["rule too long", { policies: { default: { allow: ["a".repeat(4097)] } } }],
    ["too many rules", { policies: { default: { allow: Array(1001).fill("ls") } } }],
    ["rule not a string", { policies: { default: { allow: [1] } } }],
    ["policy name with capitals", { policies: { Default: {} }, default_policy: "Default" }],
    ["invalid regex", { policies: { default: { auto_answer: [{ prompt: "(", answer: "y" }] } } }],
    ["empty prompt", { policies: { default: { auto_answer: [{ prompt: "", answer: "y" }] } } }],
    ["unknown auto_answer key", {
      policies: { default: { auto_answer: [{ prompt: "x", answer: "y", when: 1 }] } },
    }],
    ["too many policies", {
      policies: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`p${i}`, {}])),
      default_policy: "p0",
    }],
  ];
  for (const [name, input] of refused) {
    await t.step(name, () => assert.equal(Config.safeParse(input).success, false));
  }
  await t.step("accepted", () => {
    const ok = Config.parse({
      policies: {
        default: {
          allow: ["git *", "rm \\\\"],
          auto_answer: [{ prompt: "^Continue\\? \\[y/N\\]", answer: "y\n" }],
        },
      },
    });
    assert.equal(ok.policies.default!.auto_answer[0]!.answer, "y\n");
  });
});

Deno.test("policies: an unknown policy name is a config error on its own line", () => {
  const text = [
    "policies:",
    "  ci:",
    "    deny: ['rm -rf *']",
    "agents:",
    "  claude:",
    `    token: ${TOKEN}`,
    "    policy: strict",
    "default_policy: ci",
  ].join("\n");
  assert.throws(
    () => parseConfig(text, { path: "/c.yaml", env: {} }),
    (err) => {
      assert.ok(err instanceof TermadaError);
      assert.equal(
        err.message,
        `Config "/c.yaml" line 7: invalid value for "agents.claude.policy": ` +
          `no policy named "strict" under "policies" (defined: ci)`,
      );
      return true;
    },
  );
  assert.throws(
    () => parseConfig("policies:\n  ci: {}\n", { path: "/c.yaml", env: {} }),
    /line 1: invalid value for "default_policy": no policy named "default"/,
  );
});

Deno.test("config regexes must run in linear time: backreferences and lookaround are refused", () => {
  for (const bad of ["(a)\\1", "(?=x)y", "(?<!a)b"]) {
    const r = Config.safeParse({ redaction: { patterns: [bad] } });
    assert.equal(r.success, false, bad);
    const a = Config.safeParse({
      policies: { default: { auto_answer: [{ prompt: bad, answer: "y" }] } },
    });
    assert.equal(a.success, false, bad);
  }
  assert.equal(Config.safeParse({ redaction: { patterns: ["corp-[0-9]{6}"] } }).success, true);
});
