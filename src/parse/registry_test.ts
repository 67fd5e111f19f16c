import assert from "node:assert/strict";
import { failed, fixture } from "./_testing.ts";
import {
  chooseParser,
  parseOutput,
  PARSER_NAMES,
  parserEnv,
  PARSERS,
  splitShellLine,
} from "./registry.ts";

const pick = (argv: string[]) => {
  const c = chooseParser(argv);
  return "parser" in c ? c.parser : undefined;
};

Deno.test("auto picks the parser from argv[0]'s basename and its flags", () => {
  const cases: [string[], string | undefined][] = [
    [["ls", "-la", "/tmp"], "ls"],
    [["/bin/ls", "-l"], "ls"],
    [["ls", "/tmp"], undefined],
    [["ls", "-1"], undefined],
    [["ps", "aux"], "ps"],
    [["ps", "-C", "bash", "-o", "pid,cmd"], "ps"],
    [["ps", "--no-headers"], undefined],
    [["df", "-h"], "df"],
    [["du", "-sh", "."], "du"],
    [["free", "-m"], "free"],
    [["free", "-s", "1"], undefined],
    [["curl", "-sIL", "http://x"], "http_headers"],
    [["curl", "-H", "I: x", "http://x"], undefined],
    [["curl", "-sI", "-v", "http://x"], undefined],
    [["git", "status", "--porcelain=v2"], "git_status"],
    [["git", "-C", "repo", "status"], "git_status"],
    [["git", "log", "--oneline", "-5"], "git_log"],
    [["git", "log"], undefined],
    [["ip", "-j", "addr"], "ip_addr"],
    [["ip", "-j", "link", "show"], "ip_link"],
    [["ip", "-j", "route"], "ip_route"],
    [["ip", "addr"], undefined],
    [["ss", "-tlnp"], "ss"],
    [["ss", "-s"], undefined],
    [["systemctl", "status", "nginx"], "systemctl_status"],
    [["systemctl", "status"], undefined],
    [["systemctl", "restart", "nginx"], undefined],
    [["docker", "ps", "-a"], "docker_ps"],
    [["docker", "container", "ls"], "docker_ps"],
    [["make"], undefined],
  ];
  for (const [argv, want] of cases) assert.equal(pick(argv), want, argv.join(" "));
});

Deno.test("auto splits a one-word shell line only when it is one simple command", () => {
  assert.equal(pick(["ls -la '/tmp/my dir'"]), "ls");
  assert.equal(pick(["LC_ALL=C sudo ls -l"]), "ls");
  assert.deepEqual(splitShellLine(`git -C "a b" status # note`), {
    argv: ["git", "-C", "a b", "status"],
  });
  assert.deepEqual(splitShellLine("echo a\\ b 'c d'"), { argv: ["echo", "a b", "c d"] });
  for (
    const line of [
      "ls -l | head",
      "ls -l > x",
      "cd x && ls -l",
      "ls -l; ls",
      "ls -l $DIR",
      "ls -l `pwd`",
      "(ls -l)",
      "ls -l 'open",
    ]
  ) {
    const c = chooseParser([line]);
    assert.ok("reason" in c, line);
    assert.match(c.reason, /^No parser matches: the shell line/, line);
  }
});

Deno.test("auto never guesses silently: the result names the parser, or says none matches", () => {
  const r = parseOutput("auto", ["df", "-h"], fixture("df_h.txt"));
  assert.ok("parsed" in r);
  assert.equal(r.parser, "df");
  const none = failed("auto", ["make", "test"], "ok\n");
  assert.equal(none.parser, undefined);
  assert.match(none.parse_error.message, /No parser matches "make"/);
  const flagsOnly = failed("auto", ["ls", "/tmp"], "a\nb\n");
  assert.match(flagsOnly.parse_error.message, /No parser matches these "ls" options/);
  const pipe = failed("auto", ["ps aux | grep x"], "");
  assert.match(pipe.parse_error.message, /not one simple command/);
});

Deno.test("an explicit parser runs whatever the argv; an unknown one is a parse_error", () => {
  const r = parseOutput("df", ["sh", "-c", "df -h"], fixture("df_h.txt"));
  assert.ok("parsed" in r && r.parser === "df");
  const bad = failed("nope", ["df"], "");
  assert.match(bad.parse_error.message, /^Unknown parser "nope"/);
  const wrong = failed("ps", ["ps"], fixture("df_h.txt"));
  assert.equal(wrong.parser, "ps");
  assert.match(wrong.parse_error.message, /PID/);
  assert.equal(wrong.parse_error.line, 1);
});

Deno.test("parse_error when nothing parsed carries the line and the unparsed count", () => {
  const r = failed("ls", ["ls -l"], "garbage one\ngarbage two\n");
  assert.deepEqual(r.parse_error, {
    message: "No line looks like an `ls -l` entry",
    line: 1,
    unparsed_lines: 2,
  });
  assert.equal(failed("ls", ["ls -l"], "").parse_error.message, "The output is empty");
});

Deno.test("parserEnv: the C locale for locale-dependent tools only", () => {
  for (const name of ["ls", "ps", "df", "du", "free", "git_status", "systemctl_status"]) {
    assert.deepEqual(parserEnv(name), { LC_ALL: "C" }, name);
  }
  for (const name of ["http_headers", "git_log", "ip_addr", "ss", "docker_ps", "nope"]) {
    assert.deepEqual(parserEnv(name), {}, name);
  }
  assert.deepEqual(parserEnv("auto", ["ls -la"]), { LC_ALL: "C" });
  assert.deepEqual(parserEnv("auto", ["curl -sI x"]), {});
  assert.deepEqual(parserEnv("auto", ["ls -la | wc"]), {});
});

Deno.test("PARSERS lists every parser with its matcher, env and a JSON Schema", () => {
  assert.deepEqual(PARSERS.map((p) => p.name), [...PARSER_NAMES]);
  assert.equal(PARSERS.length, 14);
  for (const p of PARSERS) {
    assert.ok(p.description.length > 10 && p.matches.length > 3, p.name);
    assert.equal(p.result_schema.$schema, "https://json-schema.org/draft/2020-12/schema");
    assert.equal(p.result_schema.type, "object");
    assert.ok(JSON.stringify(p).length > 100, "the schema serialises (capabilities sends it)");
  }
});

Deno.test("parseOutput never throws on malformed arguments", () => {
  const weird: unknown[][] = [
    [undefined, undefined, undefined],
    ["auto", [], "x"],
    ["auto", [1, 2], "x"],
    ["auto", "ls -l", "x"],
    ["ls", ["ls -l"], 42],
    ["__proto__", ["ls"], "x"],
    ["auto", [""], ""],
    ["ls", ["ls -l"], "x", { now: new Date(NaN) }],
  ];
  for (const args of weird) {
    const r = (parseOutput as (...a: unknown[]) => unknown)(...args) as Record<string, unknown>;
    assert.ok("parse_error" in r || "parsed" in r, JSON.stringify(args));
  }
});
