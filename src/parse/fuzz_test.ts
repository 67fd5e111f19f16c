/**
 * Every parser against hostile input: random garbage, truncated and mangled real outputs, huge
 * lines, binary bytes, CRLF, ANSI colours. Asserted: no throw, a result that matches the
 * envelope schema, CRLF/ANSI variants parse like the clean output, and big inputs finish.
 */
import assert from "node:assert/strict";
import { seededRandom } from "../shared/mod.ts";
import { fixture, FIXTURE_NOW } from "./_testing.ts";
import { PARSE_LIMITS } from "./_text.ts";
import { parseOutput, PARSER_NAMES } from "./registry.ts";
import { ParseResult } from "./schema.ts";

/** A real output and an argv for every parser. */
const SAMPLES: Record<string, [string[], string]> = {
  ls: [["ls -la /etc /dev"], "ls_la_etc_dev.txt"],
  ps: [["ps aux"], "ps_aux.txt"],
  df: [["df -h"], "df_h.txt"],
  du: [["du /etc/apt"], "du_etc_apt.txt"],
  free: [["free"], "free.txt"],
  http_headers: [["curl -sIL x"], "curl_sIL_redirects.txt"],
  git_status: [
    ["git status --porcelain=v2 --branch --ignored"],
    "git_status_porcelain_v2_ignored.txt",
  ],
  git_log: [["git log --oneline --decorate --graph --all"], "git_log_oneline_graph.txt"],
  ip_addr: [["ip -j addr"], "ip_j_addr.txt"],
  ip_link: [["ip -j link"], "ip_j_link.txt"],
  ip_route: [["ip -j route"], "ip_j_route.txt"],
  ss: [["ss -tunap"], "ss_tunap.handmade.txt"],
  systemctl_status: [["systemctl status ssh"], "systemctl_status_252_ssh.handmade.txt"],
  docker_ps: [["docker ps -a"], "docker_ps_20.handmade.txt"],
};

function run(parser: string, argv: string[], output: string) {
  const r = parseOutput(parser, argv, output, { now: FIXTURE_NOW });
  const check = ParseResult.safeParse(r);
  assert.ok(check.success, `${parser}: ${check.error?.message.slice(0, 800)}`);
  if ("parse_error" in r) assert.ok(r.parse_error.message.length > 0);
  return r;
}

function garbage(rnd: () => number, size: number): string {
  const alphabet =
    " \t\n-:/()[]{}\",.%@+*|\\'=0123456789abcdefxyzABCDEFHTTP\x1b\r\x00\u00e9\u2500\ud83d\ude00";
  let s = "";
  while (s.length < size) s += alphabet[Math.floor(rnd() * alphabet.length)];
  return s;
}

Deno.test("every parser survives random garbage, truncations and line shuffles", () => {
  assert.deepEqual(Object.keys(SAMPLES).sort(), [...PARSER_NAMES].sort());
  const rnd = seededRandom(16);
  for (const [name, [argv, file]] of Object.entries(SAMPLES)) {
    const real = fixture(file);
    for (let i = 0; i < 40; i++) run(name, argv, garbage(rnd, Math.floor(rnd() * 3000)));
    for (let i = 0; i < 40; i++) run(name, argv, real.slice(0, Math.floor(rnd() * real.length)));
    for (let i = 0; i < 20; i++) {
      const lines = real.split("\n");
      for (let j = 0; j < 5; j++) {
        const a = Math.floor(rnd() * lines.length);
        lines[a] = garbage(rnd, 40);
      }
      run(name, argv, lines.join("\n"));
    }
    // the other fixtures, as the wrong input for this parser
    for (const other of Object.values(SAMPLES)) run(name, argv, fixture(other[1]));
  }
});

Deno.test("every parser survives binary bytes, NULs and huge lines", () => {
  const bytes = new Uint8Array(64 * 1024);
  const rnd = seededRandom(7);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(rnd() * 256);
  const utf8 = new TextDecoder().decode(bytes);
  const latin1 = String.fromCharCode(...bytes.subarray(0, 8192));
  const hugeLine = "x".repeat(1024 * 1024);
  const hugeField = `-rw-r--r-- 1 root root 1 Dec  1 10:00 ${"n".repeat(200_000)}\n`;
  for (const [name, [argv, file]] of Object.entries(SAMPLES)) {
    const real = fixture(file);
    run(name, argv, utf8);
    run(name, argv, latin1);
    run(name, argv, hugeLine);
    run(name, argv, real + hugeLine + "\n" + real);
    run(name, argv, hugeField);
    run(name, argv, real.replaceAll(" ", "\0"));
  }
  const r = run("ls", ["ls -l"], hugeField);
  assert.ok("parsed" in r);
  const e = r.parsed.kind === "directory_listing" ? r.parsed.sections[0]!.entries[0]! : undefined;
  assert.equal(e?.name.length, PARSE_LIMITS.maxField);
  assert.match(r.warnings![0]!.message, /cut to their bound/);
});

Deno.test("CRLF line ends and ANSI colours parse like the clean output", () => {
  for (const [name, [argv, file]] of Object.entries(SAMPLES)) {
    const clean = run(name, argv, fixture(file));
    assert.ok("parsed" in clean, name);
    const crlf = run(name, argv, fixture(file).replaceAll("\n", "\r\n"));
    assert.deepEqual(crlf, clean, `${name} CRLF`);
    const colour = fixture(file).split("\n").map((l, i) =>
      i % 2 === 0 ? `\x1b[01;3${i % 7}m${l}\x1b[0m` : `\x1b]8;;file:///x\x07${l}\x1b]8;;\x07`
    ).join("\n");
    const ansi = run(name, argv, colour);
    assert.ok("parsed" in ansi, name);
    assert.deepEqual(ansi.parsed, clean.parsed, `${name} ANSI`);
    assert.ok(ansi.warnings?.some((w) => /ANSI/.test(w.message)), `${name}: ANSI flagged`);
  }
});

Deno.test("1 MiB of garbage finishes for every parser (linear time)", () => {
  const rnd = seededRandom(1);
  const mib = garbage(rnd, 1024 * 1024);
  const lines = Array.from({ length: 20_000 }, () => garbage(rnd, 50)).join("\n");
  for (const [name, [argv]] of Object.entries(SAMPLES)) {
    run(name, argv, mib);
    run(name, argv, lines);
  }
});

Deno.test("input past 4 MiB and entries past 100 000 are cut with warnings", () => {
  const line = "4\t/some/path/x\n";
  const many = line.repeat(110_000);
  const r = run("du", ["du"], many);
  assert.ok("parsed" in r && r.parsed.kind === "disk_usage");
  assert.equal(r.parsed.entries.length, PARSE_LIMITS.maxEntries);
  assert.ok(
    r.warnings?.some((w) => w.message.startsWith("A list reached its bound (100000 entries")),
  );
  const big = run("du", ["du"], "8\t/p\n".repeat(900_000));
  assert.ok("parsed" in big);
  assert.ok(big.warnings?.some((w) => /longer than 4194304 characters/.test(w.message)));
});
