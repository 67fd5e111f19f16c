import assert from "node:assert/strict";
import { type Config, loadYaml, parseConfig } from "../config/mod.ts";
import { loadShellParser, type ResourceSubject } from "../policy/mod.ts";
import { preloadNative } from "../pty/mod.ts";
import { fileIdentity } from "../sandbox/mod.ts";
import { policyPort, type PolicyPortOptions } from "./policy_port.ts";

// parseConfig is synchronous; its YAML parser is loaded once, lazily.
await loadYaml();

await loadShellParser();
preloadNative(); // libc (file identities at exec) stays loaded for the process, not for one test

/** Strong enough for strict identity mode (32+ characters, 16+ distinct, mixed classes). */
const TOKEN_A = "tok_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6";
const TOKEN_B = "tok_Q1r2S3t4U5v6W7x8Y9z0A1b2C3d4E5f6";

function config(yaml: string): Config {
  return parseConfig(yaml, { path: "/x.yaml", env: {} });
}

function port(c: Config, options: Partial<PolicyPortOptions> = {}) {
  return policyPort(c, { PATH: Deno.env.get("PATH"), execGate: () => true, ...options });
}

const file = (kind: "file.read" | "file.write", path: string, target = "local") =>
  ({ kind, target, path }) satisfies ResourceSubject;
const server = (name: string, tags: string[] = []) =>
  ({ kind: "server", name, tags }) satisfies ResourceSubject;
const forward = (srv: string, host: string, p: number) =>
  ({ kind: "forward", server: srv, host, port: p }) satisfies ResourceSubject;

const SERVERS = `
servers:
  - {name: web, host: 10.0.0.1, user: deploy, environment: prod, tags: [front]}
  - {name: stage, host: 10.0.0.2, user: deploy, environment: staging}
  - {name: plain, host: 10.0.0.3, user: deploy}
`;

function strictConfig(policy: string): Config {
  return config(`
security: {identity_mode: strict}
agents:
  a1: {token: "${TOKEN_A}", policy: p}
policies:
  default: {}
  p: ${policy}
${SERVERS}`);
}

Deno.test("strict mode denies what no allow rule matches, for every kind of decision", async (t) => {
  await t.step("exec and input: a policy with deny rules only", () => {
    const strict = port(strictConfig(`{deny: ["rm *"]}`));
    const d = strict.decide("a1", ["ls", "-la"]);
    assert.equal(d.action, "deny");
    assert.equal(d.reason, "denied: strict identity mode and no allow rule matches this exec");
    const l = strict.decideLine("a1", "ls -la");
    assert.equal(l.action, "deny");
    assert.match(l.reason, /strict identity mode .* this input$/);
    assert.equal(strict.decide("a1", ["rm", "x"]).action, "deny");
  });
  await t.step("exec and input: an empty policy", () => {
    const strict = port(strictConfig(`{}`));
    assert.equal(strict.decide("a1", ["true"]).action, "deny");
    assert.equal(strict.decideLine("a1", "true").action, "deny");
  });
  await t.step("files, servers and forwards without rules for them", () => {
    const strict = port(strictConfig(`{}`));
    for (
      const [subject, kind] of [
        [file("file.read", "/etc/hosts"), "file.read"],
        [file("file.write", "/tmp/x"), "file.write"],
        [server("web"), "session"],
        [forward("web", "127.0.0.1", 5432), "forward"],
      ] as const
    ) {
      const d = strict.decideResource!("a1", subject);
      assert.equal(d.action, "deny", kind);
      assert.equal(d.reason, `denied: strict identity mode and no allow rule matches this ${kind}`);
    }
    assert.equal(strict.decideResource!("a1", server("web"), "fleet").action, "deny");
  });
  await t.step("what a glob allow list matches is allowed", () => {
    const strict = port(strictConfig(`
    allow: ["git *", "ls *"]
    files: {read: {allow: ["/srv/**"]}, write: {allow: ["/srv/out/*"]}}
    servers: {allow: ["tag:front"]}
    forwards: {allow: ["web:127.0.0.1:*"]}`));
    assert.equal(strict.decide("a1", ["git", "status"]).action, "allow");
    assert.equal(strict.decide("a1", ["ls -la | grep x"]).action, "deny");
    assert.equal(strict.decideLine("a1", "ls -la").action, "allow");
    assert.equal(strict.decideResource!("a1", file("file.read", "/srv/a/b")).action, "allow");
    assert.equal(strict.decideResource!("a1", file("file.read", "/etc/hosts")).action, "deny");
    assert.equal(strict.decideResource!("a1", file("file.write", "/srv/out/x")).action, "allow");
    assert.equal(strict.decideResource!("a1", file("file.write", "/srv/out/a/x")).action, "deny");
    assert.equal(strict.decideResource!("a1", server("web", ["front"])).action, "allow");
    assert.equal(strict.decideResource!("a1", server("stage")).action, "deny");
    assert.equal(strict.decideResource!("a1", forward("web", "127.0.0.1", 80)).action, "allow");
    assert.equal(strict.decideResource!("a1", forward("web", "10.0.0.9", 80)).action, "deny");
  });
  await t.step("what a structured allow rule matches is allowed", () => {
    const strict = port(strictConfig(`
    rules:
      - {effect: allow, action: exec, resource: ["ls *", "true"]}
      - {effect: allow, action: input, resource: "pwd"}
      - {effect: allow, action: file.read, resource: "/srv/**"}
      - {effect: allow, action: file.write, resource: "/tmp/*"}
      - {effect: allow, action: session, resource: "stage"}
      - {effect: allow, action: forward, resource: "stage:127.0.0.1:*"}`));
    const ok = strict.decide("a1", ["ls -la; true"]);
    assert.equal(ok.action, "allow");
    assert.equal(strict.decide("a1", ["ls -la; cat x"]).action, "deny");
    assert.equal(strict.decide("a1", ["cat", "x"]).action, "deny");
    assert.equal(strict.decideLine("a1", "pwd").action, "allow");
    assert.equal(strict.decideLine("a1", "ls").action, "deny");
    assert.equal(strict.decideResource!("a1", file("file.read", "/srv/a/b")).action, "allow");
    assert.equal(strict.decideResource!("a1", file("file.read", "/etc/hosts")).action, "deny");
    assert.equal(strict.decideResource!("a1", file("file.write", "/tmp/x")).action, "allow");
    assert.equal(strict.decideResource!("a1", file("file.write", "/tmp/a/x")).action, "deny");
    assert.equal(strict.decideResource!("a1", server("stage")).action, "allow");
    assert.equal(strict.decideResource!("a1", server("web")).action, "deny");
    assert.equal(strict.decideResource!("a1", forward("stage", "127.0.0.1", 22)).action, "allow");
    assert.equal(strict.decideResource!("a1", forward("web", "127.0.0.1", 22)).action, "deny");
  });
});

Deno.test("development mode keeps today's behaviour: an empty policy allows", () => {
  const dev = port(config(`policies: {default: {}}\n${SERVERS}`));
  assert.equal(dev.decide("anyone", ["rm", "-rf", "/tmp/x"]).action, "allow");
  assert.equal(dev.decide("anyone", ['eval "$x"']).action, "allow");
  assert.equal(dev.decideLine("anyone", "ls | wc -l").action, "allow");
  assert.equal(dev.decideResource!("anyone", file("file.read", "/etc/shadow")).action, "allow");
  assert.equal(dev.decideResource!("anyone", file("file.write", "/tmp/x", "web")).action, "allow");
  assert.equal(dev.decideResource!("anyone", server("web")).action, "allow");
  assert.equal(dev.decideResource!("anyone", forward("web", "127.0.0.1", 22)).action, "allow");
  // With rules, what they do not name is still allowed (no strict default deny).
  const some = port(config(`policies: {default: {deny: ["rm *"]}}`));
  assert.equal(some.decide("anyone", ["ls"]).action, "allow");
  assert.equal(some.decide("anyone", ["rm", "x"]).action, "deny");
});

Deno.test("a confirm carries who must approve", async (t) => {
  await t.step("the glob confirm list: one operator by default", () => {
    const p = port(config(`policies: {default: {confirm: ["git push *"]}}`));
    const d = p.decide("a", ["git", "push", "origin"]);
    assert.equal(d.action, "confirm");
    assert.deepEqual(d.approval, { quorum: 1, roles: [], mfa: false, exclude_requester: false });
  });
  await t.step("the glob confirm list: the policy's approval", () => {
    const p = port(config(`
policies:
  default:
    confirm: ["git push *"]
    approval: {quorum: 2, roles: [sre]}`));
    const d = p.decideLine("a", "git push origin main");
    assert.equal(d.action, "confirm");
    assert.deepEqual(d.approval, {
      quorum: 2,
      roles: ["sre"],
      mfa: false,
      exclude_requester: false,
    });
  });
  await t.step("a structured confirm: its own approval", () => {
    const p = port(config(`
policies:
  default:
    rules:
      - effect: confirm
        action: file.write
        resource: "/etc/**"
        approval: {quorum: 3, mfa: true, exclude_requester: true}
        reason: config files`));
    const d = p.decideResource!("a", file("file.write", "/etc/hosts"));
    assert.equal(d.action, "confirm");
    assert.deepEqual(d.rule, { list: "rules", pattern: "rules[0]" });
    assert.equal(d.reason, "confirmation required by rules[0] for file.write: config files");
    assert.deepEqual(d.approval, { quorum: 3, roles: [], mfa: true, exclude_requester: true });
    assert.equal(p.decideResource!("a", file("file.write", "/tmp/x")).action, "allow");
  });
  await t.step("a glob confirm and a structured confirm add up", () => {
    const p = port(config(`
policies:
  default:
    confirm: ["kubectl *"]
    approval: {quorum: 2, roles: [sre]}
    rules:
      - {effect: confirm, action: exec, resource: "kubectl delete *", approval: {roles: [lead], mfa: true}}`));
    const d = p.decide("a", ["kubectl", "delete", "pod", "x"]);
    assert.equal(d.action, "confirm");
    assert.deepEqual(d.approval, {
      quorum: 2,
      roles: ["sre", "lead"],
      mfa: true,
      exclude_requester: false,
      // An approver holds sre (the list's requirement) and lead (the rule's).
      role_sets: [["sre"], ["lead"]],
    });
    assert.deepEqual(p.decide("a", ["kubectl", "get", "pods"]).approval, {
      quorum: 2,
      roles: ["sre"],
      mfa: false,
      exclude_requester: false,
    });
  });
  await t.step("a structured deny over a glob confirm", () => {
    const p = port(config(`
policies:
  default:
    confirm: ["git push *"]
    rules: [{effect: deny, action: exec, resource: "git push --force*"}]`));
    const d = p.decide("a", ["git", "push", "--force", "origin"]);
    assert.equal(d.action, "deny");
    assert.equal(d.approval, undefined);
  });
});

Deno.test("structured rules on principal and tenant see who is behind the agent (whoIs)", () => {
  const c = config(`
policies:
  default:
    rules:
      - {effect: deny, principal: "mallory@*"}
      - {effect: confirm, action: exec, tenant: acme}
      - {effect: deny, action: exec, principal: "agent:intruder"}`);
  const who: Record<string, { principal: string; tenant?: string }> = {
    m: { principal: "mallory@evil.example" },
    b: { principal: "bob", tenant: "acme" },
    c: { principal: "carol", tenant: "globex" },
  };
  const p = port(c, { whoIs: (a) => who[a] ?? { principal: `agent:${a}` } });
  assert.equal(p.decide("m", ["ls"]).action, "deny");
  assert.equal(p.decideResource!("m", file("file.read", "/tmp/x")).action, "deny");
  assert.equal(p.decide("b", ["ls"]).action, "confirm");
  assert.equal(p.decide("c", ["ls"]).action, "allow");
  // Without whoIs, an agent is `agent:<id>` with no tenant.
  const anonymous = port(c);
  assert.equal(anonymous.decide("intruder", ["ls"]).action, "deny");
  assert.equal(anonymous.decide("b", ["ls"]).action, "allow");
});

Deno.test("environment comes from the server's label, and security.environment for local", () => {
  const c = config(`
security: {environment: laptop}
policies:
  default:
    rules:
      - {effect: deny, action: exec, environment: prod}
      - {effect: confirm, action: exec, environment: laptop}
      - {effect: deny, action: file.write, environment: "stag*"}
${SERVERS}`);
  const p = port(c);
  assert.equal(p.decide("a", ["ls"], undefined, { target: "web", remote: true }).action, "deny");
  assert.equal(p.decide("a", ["ls"], undefined, { target: "stage", remote: true }).action, "allow");
  assert.equal(p.decide("a", ["ls"], undefined, { target: "plain", remote: true }).action, "allow");
  assert.equal(p.decide("a", ["ls"]).action, "confirm");
  assert.equal(p.decide("a", ["ls"], undefined, { target: "local" }).action, "confirm");
  assert.equal(p.decideLine("a", "ls", { target: "web", remote: true }).action, "allow");
  assert.equal(p.decideResource!("a", file("file.write", "/tmp/x", "stage")).action, "deny");
  assert.equal(p.decideResource!("a", file("file.write", "/tmp/x", "web")).action, "allow");
  assert.equal(p.decideResource!("a", file("file.write", "/tmp/x")).action, "allow");
  // No label on the daemon's machine: an environment rule does not match local work.
  const unlabelled = port(config(`
policies: {default: {rules: [{effect: deny, environment: "*"}]}}
${SERVERS}`));
  assert.equal(unlabelled.decide("a", ["ls"]).action, "allow");
  assert.equal(unlabelled.decide("a", ["ls"], undefined, { target: "web" }).action, "deny");
});

Deno.test("risk is raised on a production target", () => {
  const p = port(config(`
policies: {default: {rules: [{effect: confirm, risk: [high, critical]}]}}
${SERVERS}`));
  assert.equal(p.decide("a", ["ls"]).action, "allow");
  assert.equal(p.decide("a", ["ls"], undefined, { target: "web", remote: true }).action, "confirm");
  assert.equal(
    p.decide("a", ["ls"], undefined, { target: "stage", kind: "fleet" }).action,
    "confirm",
  );
  assert.equal(p.decideResource!("a", server("web")).action, "allow");
});

Deno.test("a time window uses the injected clock", () => {
  const c = config(`
policies:
  default:
    rules: [{effect: deny, action: exec, time: {from: "22:00", to: "06:00", tz: "UTC"}}]`);
  let now = Date.UTC(2026, 0, 5, 23, 0);
  const p = port(c, { now: () => now });
  assert.equal(p.decide("a", ["ls"]).action, "deny");
  now = Date.UTC(2026, 0, 5, 12, 0);
  assert.equal(p.decide("a", ["ls"]).action, "allow");
});

Deno.test("reload makes later decisions use the new config", () => {
  const open = config(`policies: {default: {}}`);
  const globs = config(`policies: {default: {deny: ["rm *"]}}`);
  const structured = config(`
policies: {default: {rules: [{effect: confirm, action: [exec, input], resource: "rm *"}]}}`);
  const p = port(open);
  assert.equal(p.decide("a", ["rm", "x"]).action, "allow");
  p.reload(globs);
  assert.equal(p.decide("a", ["rm", "x"]).action, "deny");
  assert.equal(p.decideExec!("a", { path: "/usr/bin/rm", argv: ["rm", "x"] }).action, "deny");
  p.reload(structured);
  assert.equal(p.decide("a", ["rm", "x"]).action, "confirm");
  assert.equal(p.decideLine("a", "rm x").action, "confirm");
  p.reload(open);
  assert.equal(p.decide("a", ["rm", "x"]).action, "allow");
  assert.equal(p.decideExec!("a", { path: "/usr/bin/rm", argv: ["rm", "x"] }).action, "allow");
  // Strict mode is part of the config, too.
  p.reload(strictConfig(`{}`));
  assert.equal(p.decide("a1", ["ls"]).action, "deny");
});

Deno.test("decideExec applies structured deny and confirm rules on exec at execve", async (t) => {
  const c = config(`
policies:
  default:
    rules:
      - {effect: deny, action: exec, resource: "touch *", reason: no new files}
      - {effect: confirm, action: exec, resource: "shutdown *"}
      - {effect: deny, action: file.write, resource: "/**"}`);
  const p = port(c);
  await t.step("a deny", () => {
    const d = p.decideExec!("a", { path: "/usr/bin/touch", argv: ["touch", "x"] });
    assert.equal(d.action, "deny");
    assert.equal(d.verify, true);
    assert.deepEqual(d.rule, { list: "rules", pattern: "rules[0]" });
    assert.equal(d.reason, "denied by rules[0] for exec: no new files (at exec)");
  });
  await t.step("under the file's name, whatever argv[0] says", () => {
    const d = p.decideExec!("a", { path: "/usr/bin/touch", argv: ["innocent", "x"] });
    assert.equal(d.action, "deny");
  });
  await t.step("a confirm", () => {
    const d = p.decideExec!("a", { path: "/usr/sbin/shutdown", argv: ["shutdown", "now"] });
    assert.equal(d.action, "confirm");
    assert.equal(d.verify, true);
  });
  await t.step("anything else runs", () => {
    const d = p.decideExec!("a", { path: "/usr/bin/ls", argv: ["ls", "-la"] });
    assert.equal(d.action, "allow");
  });
  await t.step("the static layer denies it too", () => {
    assert.equal(p.decide("a", ["touch", "x"]).action, "deny");
  });
});

// At exec only deny and confirm rules apply (allow rules and strict mode's default deny are
// the static layer's): `make`, allowed when asked for, is not denied when it runs.
Deno.test({
  name: "strict mode does not deny at exec what no deny or confirm rule names",
  fn() {
    const p = port(strictConfig(`
    allow: ["make *"]
    rules: [{effect: deny, action: exec, resource: "rm *"}]`));
    assert.equal(p.decide("a1", ["make", "all"]).action, "allow");
    assert.equal(
      p.decideExec!("a1", { path: "/usr/bin/make", argv: ["make", "all"] }).action,
      "allow",
    );
    assert.equal(p.decideExec!("a1", { path: "/usr/bin/rm", argv: ["rm", "x"] }).action, "deny");
  },
});

Deno.test("budgetsFor maps the policy's budgets and tells a production target", () => {
  const c = config(`
agents:
  a1: {token: "${TOKEN_A}", policy: p}
  a2: {token: "${TOKEN_B}"}
policies:
  default:
    budgets: [{name: all, scope: global, metric: operations, limit: 1000}]
  p:
    budgets:
      - {name: ops, scope: principal, metric: operations, limit: 100, window: "1h"}
      - {name: prod, scope: tenant, metric: prod_changes, limit: 5, window: "1d", kinds: [exec, file.write], match: acme}
      - {name: spend, scope: recipient, metric: cost, limit: 12.5, window: "30s"}
${SERVERS}`);
  const p = port(c, {
    whoIs: (a) => a === "a1" ? { principal: "alice", tenant: "acme" } : { principal: `agent:${a}` },
  });
  assert.deepEqual(p.budgetsFor!("a1", "web"), {
    rules: [
      {
        policy: "p",
        name: "ops",
        scope: "principal",
        metric: "operations",
        limit: 100,
        windowMs: 3_600_000,
      },
      {
        policy: "p",
        name: "prod",
        scope: "tenant",
        metric: "prod_changes",
        limit: 5,
        windowMs: 86_400_000,
        kinds: ["exec", "file.write"],
        match: "acme",
      },
      {
        policy: "p",
        name: "spend",
        scope: "recipient",
        metric: "cost",
        limit: 12.5,
        windowMs: 30_000,
      },
    ],
    principal: "alice",
    tenant: "acme",
    production: true,
  });
  assert.equal(p.budgetsFor!("a1", "stage").production, false);
  assert.equal(p.budgetsFor!("a1", "plain").production, false);
  assert.equal(p.budgetsFor!("a1", "local").production, false);
  const dflt = p.budgetsFor!("a2", "local");
  assert.deepEqual(dflt, {
    rules: [{
      policy: "default",
      name: "all",
      scope: "global",
      metric: "operations",
      limit: 1000,
      windowMs: null,
    }],
    principal: "agent:a2",
    production: false,
  });
  assert.equal(p.budgetsFor!("stranger", "web").rules[0]?.policy, "default");
  assert.deepEqual(
    p.allBudgets!().map((b) => `${b.policy}/${b.name}`),
    ["default/all", "p/ops", "p/prod", "p/spend"],
  );
  // The daemon's own machine labelled production.
  const prodLocal = port(config(`security: {environment: PROD}`));
  assert.equal(prodLocal.budgetsFor!("a", "local").production, true);
});

Deno.test("a structured deny on exec matches a renamed copy of the program by its content", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const copy = `${dir}/harmless`;
    await Deno.copyFile("/usr/bin/touch", copy);
    const p = port(config(`
policies:
  default:
    rules: [{effect: deny, action: exec, resource: "touch *"}]`));
    const sha = fileIdentity(copy)!.sha256;
    const d = p.decideExec!("a", { path: copy, argv: ["harmless", "x"], sha256: sha });
    assert.equal(d.action, "deny", d.reason);
    assert.equal(p.decideExec!("a", { path: "/usr/bin/true", argv: ["true"] }).action, "allow");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("review cases: fleet under structured allow rules, deny rules do not open files, interpreters at exec", async (t) => {
  await t.step("a fleet run's servers are session targets; its command is decided as fleet", () => {
    const p = port(config(`
policies:
  default:
    rules:
      - {effect: allow, action: fleet, resource: "uptime"}
      - {effect: allow, action: session, resource: "*"}
${SERVERS}`));
    assert.equal(p.decideResource!("a", server("web"), "fleet").action, "allow");
    assert.equal(
      p.decide("a", ["uptime"], undefined, { remote: true, kind: "fleet", target: "web" }).action,
      "allow",
    );
    assert.equal(
      p.decide("a", ["rm", "-rf", "/"], undefined, { remote: true, kind: "fleet", target: "web" })
        .action,
      "deny",
    );
  });
  await t.step("a rule for every action does not open files or forwards", () => {
    const p = port(config(`
policies:
  default:
    rules: [{effect: deny, environment: prod}]`));
    assert.equal(p.decideResource!("a", file("file.read", "/etc/shadow")).action, "deny");
    assert.equal(p.decideResource!("a", forward("web", "127.0.0.1", 22)).action, "deny");
  });
  await t.step("a structured deny holds on a script's interpreter at exec", () => {
    const p = port(config(`
policies:
  default:
    rules: [{effect: deny, action: exec, resource: "perl *"}]`));
    const d = p.decideExec!("a", {
      path: "/tmp/script",
      argv: ["/tmp/script"],
      interpreter: { path: "/usr/bin/perl" },
    });
    assert.equal(d.action, "deny", d.reason);
    const ok = p.decideExec!("a", { path: "/usr/bin/true", argv: ["true"] });
    assert.equal(ok.action, "allow");
    assert.equal(ok.verify, true, "structured exec rules: the race check runs after exec");
  });
});
