import assert from "node:assert/strict";
import { policyFor } from "../config/schema.ts";
import { DEFAULT_CONFIG } from "../config/schema.ts";
import {
  ALLOWED_AT_EXEC,
  compilePolicy,
  decide,
  decideExec,
  decideLine,
  execMayMatch,
  globMatch,
  POLICY_LIMITS,
  type PolicyAction,
  type PolicyRules,
} from "./mod.ts";
import { loadShellParser } from "./_parser.ts";

await loadShellParser();

const MIXED: PolicyRules = {
  allow: [],
  deny: ["rm -rf *"],
  confirm: ["git push *"],
};
const NONE: PolicyRules = { allow: [], deny: [], confirm: [] };
const ALLOW_ALL: PolicyRules = { allow: ["*"], deny: [], confirm: [] };

Deno.test("decide: a deny decision names the rule and the command", () => {
  const d = decide(["rm -rf /tmp/x"], MIXED);
  assert.deepEqual(d, {
    action: "deny",
    rule: { list: "deny", pattern: "rm -rf *" },
    reason: `denied by rule "rm -rf *" (deny) for "rm -rf /tmp/x"`,
    commands: [["rm", "-rf", "/tmp/x"]],
    assignments: [],
    opaque: false,
  });
});

Deno.test("decide: a match that depends on run-time values says so", () => {
  const d = decide(["rm -rf $DIR"], { allow: [], deny: ["rm -rf /*"], confirm: [] });
  assert.equal(d.action, "deny");
  assert.equal(
    d.reason,
    `denied by rule "rm -rf /*" (deny) for "rm -rf $DIR" (a value known only at run time could match)`,
  );
});

Deno.test("decide: confirm, allow and unmatched reasons", () => {
  const confirm = decide(["git push origin"], MIXED);
  assert.equal(confirm.action, "confirm");
  assert.deepEqual(confirm.rule, { list: "confirm", pattern: "git push *" });
  assert.equal(
    confirm.reason,
    `confirmation required by rule "git push *" (confirm) for "git push origin"`,
  );

  assert.equal(
    decide(["ls"], MIXED).reason,
    "allowed: no deny or confirm rule matches and the allow list is empty",
  );
  assert.equal(decide(["ls"], NONE).reason, "allowed: the policy has no rules");

  const list: PolicyRules = { allow: ["ls *", "git status"], deny: [], confirm: ["git push *"] };
  const one = decide(["ls -la"], list);
  assert.deepEqual([one.action, one.rule, one.reason], [
    "allow",
    { list: "allow", pattern: "ls *" },
    `allowed by rule "ls *" (allow) for "ls -la"`,
  ]);
  const two = decide(["ls && git status"], list);
  assert.equal(two.reason, "allowed: each of the 2 commands matches an allow rule");
  const unmatched = decide(["ls; make"], list);
  assert.deepEqual([unmatched.action, unmatched.rule, unmatched.reason], [
    "confirm",
    undefined,
    `confirmation required: "make" matches no allow rule`,
  ]);
  const denied = decide(["make"], { ...list, confirm: [] });
  assert.deepEqual([denied.action, denied.reason], [
    "deny",
    `denied: "make" matches no allow rule`,
  ]);
});

Deno.test("decide: strictest wins across every command of the line", () => {
  assert.equal(decide(["git push; rm -rf /"], MIXED).action, "deny");
  assert.equal(decide(["ls; git push"], MIXED).action, "confirm");
  // An allow rule never switches deny or confirm off.
  const both: PolicyRules = { allow: ["*"], deny: ["rm -rf *"], confirm: ["git push *"] };
  assert.equal(decide(["rm -rf /"], both).action, "deny");
  assert.equal(decide(["git push"], both).action, "confirm");
  assert.equal(decide(["make"], both).action, "allow");
});

Deno.test("decide: opaque commands are denied whenever the policy has a rule", () => {
  const cases: [PolicyRules, PolicyAction][] = [
    [NONE, "allow"],
    [{ allow: [], deny: ["x"], confirm: [] }, "deny"],
    [{ allow: [], deny: [], confirm: ["x"] }, "deny"],
    [{ allow: ["*"], deny: [], confirm: [] }, "deny"],
  ];
  for (const [rules, expected] of cases) {
    const d = decide(["python3 -c 'print(1)'"], rules);
    assert.equal(d.action, expected, JSON.stringify(rules));
    assert.equal(d.opaque, true);
  }
  const d = decide(["eval $CMD"], MIXED);
  assert.equal(
    d.reason,
    `denied: cannot tell what runs ("eval" runs text only known at run time ("$CMD")); ` +
      "the policy denies what it cannot check",
  );
  // A confirm rule that matches does not soften an opaque line; a deny rule still names itself.
  assert.equal(decide(["git push; eval $X"], MIXED).action, "deny");
  assert.equal(decide(["rm -rf /; eval $X"], MIXED).rule?.pattern, "rm -rf *");
});

Deno.test("decide: commands are normalised and every wrapper level is listed", () => {
  const d = decide(["A=1 sudo -u root env B=2 /usr/bin/nice -n 5 ./rm -f x"], NONE);
  assert.deepEqual(d.commands, [
    ["sudo", "-u", "root", "env", "B=2", "/usr/bin/nice", "-n", "5", "./rm", "-f", "x"],
    ["env", "B=2", "/usr/bin/nice", "-n", "5", "./rm", "-f", "x"],
    ["nice", "-n", "5", "./rm", "-f", "x"],
    ["rm", "-f", "x"],
  ]);
  assert.deepEqual(d.assignments, ["A=1", "B=2"]);
  // A rule may target the wrapper itself.
  assert.equal(decide(["sudo ls"], { allow: [], deny: ["sudo *"], confirm: [] }).action, "deny");
});

Deno.test("decide: one word is a shell line, several words are an exact argv", () => {
  assert.deepEqual(decide(["echo a; ls"], NONE).commands, [["echo", "a"], ["ls"]]);
  assert.deepEqual(decide(["echo", "a; ls"], NONE).commands, [["echo", "a; ls"]]);
  assert.deepEqual(decide(["echo", "$(rm -rf /)"], MIXED).action, "allow");
  assert.deepEqual(decide(["X=1", "ls"], NONE).commands, [["X=1", "ls"]]);
  assert.equal(decide([], MIXED).action, "deny");
  assert.equal(decide([], NONE).action, "allow");
});

Deno.test("decide: run-time parts are shown as written, also after non-ASCII text", () => {
  const d = decide(['echo "é ü" $(date) é$HOME'], NONE);
  assert.deepEqual(d.commands, [["date"], ["echo", "é ü", "$(date)", "é$HOME"]]);
});

Deno.test("decide: the environment the engine sets is recorded and checked", () => {
  const d = decide(["ls"], MIXED, { env: { FOO: "1" } });
  assert.deepEqual([d.action, d.assignments], ["allow", ["FOO=1"]]);
  const preload = decide(["ls"], MIXED, { env: { LD_PRELOAD: "/tmp/x.so" } });
  assert.deepEqual([preload.action, preload.opaque], ["deny", true]);
  assert.match(preload.reason, /"LD_PRELOAD"/);
  assert.equal(decideLine("ls", MIXED, { env: { BASH_ENV: "/tmp/x" } }).action, "deny");
});

Deno.test("decide: a program in an unknown directory keeps its name", () => {
  assert.deepEqual(decide(["~/bin/tool -x"], NONE).commands, [["tool", "-x"]]);
  assert.deepEqual(decide(['"$D"/tool'], NONE).commands, [["tool"]]);
  assert.equal(decide(["$D/tool"], NONE).opaque, true);
});

Deno.test("decideLine: a line typed at a shell prompt", () => {
  assert.equal(decideLine("rm -rf /", MIXED).action, "deny");
  assert.equal(decideLine("ls -la", MIXED).action, "allow");
  assert.equal(decideLine("!!", MIXED).action, "deny");
  assert.equal(decideLine("for f in *; do", MIXED).action, "deny");
  assert.equal(decideLine("", MIXED).action, "allow");
});

Deno.test("compilePolicy: compiled once, same decisions; bad patterns throw", () => {
  const compiled = compilePolicy(MIXED);
  for (const line of ["rm -rf /", "git push", "ls", "eval $x"]) {
    assert.deepEqual(decide([line], compiled), decide([line], MIXED));
  }
  assert.throws(() => compilePolicy({ allow: [""], deny: [], confirm: [] }), RangeError);
  assert.throws(
    () => compilePolicy({ ...NONE, auto_answer: [{ prompt: "(", answer: "y" }] }),
    /Invalid "auto_answer.prompt"/,
  );
  // Prompts are matched in linear time: a backreference cannot be compiled at all.
  assert.throws(
    () => compilePolicy({ ...NONE, auto_answer: [{ prompt: "(a)\\1", answer: "y" }] }),
    /backreferences are not supported/,
  );
  assert.equal(
    compilePolicy({ ...NONE, auto_answer: [{ prompt: "^y/n", answer: "y" }] })
      .autoAnswer[0]!.prompt.test("y/n?"),
    true,
  );
});

Deno.test("decide: the config's policies are policy rules", () => {
  const rules: PolicyRules = policyFor(DEFAULT_CONFIG, "anyone");
  assert.equal(decide(["rm -rf /"], rules).action, "allow");
});

Deno.test("limits: size, nesting depth and command count fail closed", () => {
  const big = "echo " + "a".repeat(POLICY_LIMITS.commandBytes);
  assert.equal(decide([big], MIXED).action, "deny");
  assert.match(decide([big], MIXED).reason, /longer than 1048576 bytes/);
  assert.equal(decide(["echo", "a".repeat(POLICY_LIMITS.commandBytes)], MIXED).action, "deny");
  assert.equal(decide([big], NONE).action, "allow");

  // eval re-parses its arguments: each level is one more nested parse.
  const nest = (n: number) => "eval ".repeat(n) + "ls";
  assert.equal(decide([nest(5)], MIXED).action, "allow");
  assert.equal(decide([`bash -c "sh -c 'dash -c ls'"`], MIXED).action, "allow");
  const deep = decide([nest(70)], MIXED);
  assert.equal(deep.action, "deny");
  assert.match(deep.reason, /nest more than 64 levels/);
  const subst = decide(["echo " + "$(".repeat(70) + "ls" + ")".repeat(70)], ALLOW_ALL);
  assert.deepEqual([subst.action, subst.opaque], ["deny", true]);
  assert.match(subst.reason, /nest more than 64 levels/);

  const many = Array(POLICY_LIMITS.commands + 1).fill(":").join(";");
  const d = decide([many], MIXED);
  assert.equal(d.action, "deny");
  assert.match(d.reason, /more than 10000 commands/);
  assert.equal(decide([Array(2000).fill("ls").join(" && ")], MIXED).action, "allow");
});

Deno.test("decide: a parser crash is opaque and the next command is decided normally", () => {
  const crash = decide(["(".repeat(50_000) + "ls" + ")".repeat(50_000)], MIXED);
  assert.deepEqual([crash.action, crash.opaque], ["deny", true]);
  assert.match(crash.reason, /cannot parse/);
  assert.equal(decide(["rm -rf /"], MIXED).action, "deny");
  assert.equal(decide(["ls | wc -l"], MIXED).action, "allow");
});

Deno.test("decide never throws, whatever the input", () => {
  let seed = 42;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const alphabet = [
    "a",
    " ",
    "'",
    '"',
    "\\",
    "$",
    "(",
    ")",
    "{",
    "}",
    "`",
    "|",
    "&",
    ";",
    "<",
    ">",
    "\n",
    "!",
    "*",
    "[",
    "]",
    "=",
    "-c",
    "bash",
    "rm",
    "#",
    "~",
    "@",
    "<<",
    "EOF",
  ];
  for (let i = 0; i < 500; i++) {
    let line = "";
    const n = Math.floor(random() * 30);
    for (let k = 0; k < n; k++) line += alphabet[Math.floor(random() * alphabet.length)];
    const d = decide([line], MIXED);
    assert.ok(["allow", "deny", "confirm"].includes(d.action), line);
  }
});

Deno.test("decideExec skips only rules whose literal start the command lacks", async (t) => {
  const policy = compilePolicy({
    allow: [],
    deny: ["touch *", "rm -rf /*", "git push --force*", "*sudo*", "ta?l x"],
    confirm: ["kubectl delete *", "ssh"],
  });
  const globs = [...policy.deny, ...policy.confirm].map((g) => g.source);
  await t.step("every command decides as the rules say", () => {
    const words = [
      "touch",
      "rm",
      "-rf",
      "/",
      "/tmp",
      "git",
      "push",
      "--force",
      "--forced",
      "x",
      "kubectl",
      "delete",
      "pods",
      "ssh",
      "tail",
      "tall",
      "",
      "tou",
      "touchy",
      "sudo",
      "ö",
    ];
    let seed = 7;
    const pick = () => words[(seed = (seed * 1103515245 + 12345) % 2147483648) % words.length]!;
    for (let i = 0; i < 3000; i++) {
      const argv = Array.from({ length: 1 + (i % 5) }, pick);
      const subjects = [{ names: [argv[0]!], args: argv.slice(1) }];
      const text = argv.join(" ");
      const want = globs.find((g) =>
        policy.deny.concat(policy.confirm).some((c) => c.source === g && globMatch(c, text))
      );
      const d = decideExec(subjects, policy);
      assert.equal(d.rule?.pattern, want, text);
      if (!execMayMatch(subjects, policy)) assert.equal(d.action, "allow", text);
    }
  });
  await t.step("a command no rule's start fits is allowed without matching", () => {
    assert.equal(execMayMatch([{ names: ["true"], args: [] }], policy), true, "*sudo* fits all");
    const lists = compilePolicy({ allow: [], deny: ["touch *"], confirm: [] });
    assert.equal(execMayMatch([{ names: ["true"], args: ["x"] }], lists), false);
    assert.equal(execMayMatch([{ names: ["touch"], args: [] }], lists), true);
    assert.equal(execMayMatch([{ names: ["tou"], args: ["ch"] }], lists), false);
    assert.equal(decideExec([{ names: ["true"], args: ["x"] }], lists).reason, ALLOWED_AT_EXEC);
  });
});
