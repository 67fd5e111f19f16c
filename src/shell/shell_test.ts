import assert from "node:assert/strict";
import { preloadNative, Pty } from "../pty/mod.ts";
import {
  argvToScript,
  MarkerParser,
  type ParsedPiece,
  quoteWord,
  scopeScript,
  STAGE_THRESHOLD,
  typedCommand,
} from "./mod.ts";

preloadNative();

const NONCE = "00112233445566778899aabbccddeeff";
const enc = new TextEncoder();
const dec = new TextDecoder();

function collect(pieces: ParsedPiece[]): string {
  return pieces.map((p) => ("marker" in p ? `<${JSON.stringify(p.marker)}>` : dec.decode(p.data)))
    .join("");
}

Deno.test("marker parser takes out markers with the session nonce only", () => {
  const p = new MarkerParser(NONCE);
  const text =
    `a\x1b]7717;${NONCE};C\x07out\x1b]7717;ffffffffffffffffffffffffffffffff;D;0;/x\x07\x1b]7717;${NONCE};D;3;/tmp/a b\x07\x1b]7717;${NONCE};P\x07$ `;
  assert.equal(
    collect(p.push(enc.encode(text))),
    'a<{"kind":"start"}>out\x1b]7717;ffffffffffffffffffffffffffffffff;D;0;/x\x07<{"kind":"end","status":3,"cwd":"/tmp/a b"}><{"kind":"prompt"}>$ ',
  );
});

Deno.test("marker parser handles markers split at every byte", () => {
  const text = `x\x1b[31my\x1b]7717;${NONCE};D;130;/home/é\x07z`;
  const bytes = enc.encode(text);
  for (let cut = 0; cut <= bytes.length; cut++) {
    const p = new MarkerParser(NONCE);
    const out = collect([...p.push(bytes.subarray(0, cut)), ...p.push(bytes.subarray(cut))]);
    assert.equal(out, `x\x1b[31my<{"kind":"end","status":130,"cwd":"/home/é"}>z`, `cut ${cut}`);
  }
});

Deno.test("marker parser bounds an unterminated marker and rejects bad statuses", () => {
  const p = new MarkerParser(NONCE);
  const huge = `\x1b]7717;${NONCE};D;0;` + "a".repeat(20_000);
  const out = collect(p.push(enc.encode(huge)));
  assert.equal(out.length, huge.length, "too long to be a marker: passed through as data");
  const q = new MarkerParser(NONCE);
  assert.equal(
    collect(q.push(enc.encode(`\x1b]7717;${NONCE};D;999;/\x07`))),
    `\x1b]7717;${NONCE};D;999;/\x07`,
  );
  assert.throws(() => new MarkerParser("short"), RangeError);
});

Deno.test("quoting round-trips through a real bash and sh", async (t) => {
  const words = [
    "plain",
    "",
    "a b",
    "it's",
    "$(id)",
    "`id`",
    "*?[a]",
    "~",
    "!x",
    "é✓",
    "a\\b",
    "-",
  ];
  for (const shell of ["bash", "sh"]) {
    await t.step(shell, async () => {
      const script = `printf '[%s]' ${words.map((w) => quoteWord(w)).join(" ")}`;
      await using pty = Pty.spawn({
        argv: [shell, "-c", script],
        env: { PATH: "/usr/bin:/bin", LANG: "C.UTF-8" },
      });
      let out = "";
      for await (const c of pty.readable) out += dec.decode(c, { stream: true });
      assert.equal(out, words.map((w) => `[${w}]`).join(""));
    });
  }
});

Deno.test("ANSI-C quoting for control characters; refused where the shell lacks it", () => {
  assert.equal(quoteWord("a\nb\tc\x01'\\"), "$'a\\nb\\tc\\001\\'\\\\'");
  assert.throws(() => quoteWord("a\nb", { allowAnsiC: false }), RangeError);
});

Deno.test("argv to script: reserved words and assignments stay words", () => {
  assert.equal(argvToScript(["ls -la | wc -l"]), "ls -la | wc -l");
  assert.equal(argvToScript(["echo", "a b"]), "echo 'a b'");
  assert.equal(argvToScript(["time", "x"]), "'time' x");
  assert.equal(argvToScript(["A=1", "x"]), "'A=1' x");
});

Deno.test("scoped cwd and env run in a subshell", () => {
  assert.equal(scopeScript("make", {}), "make");
  assert.equal(
    scopeScript("make", { cwd: "/a b", env: { X: "1 2" } }),
    "(cd -- '/a b' && export X='1 2' && eval make)",
  );
  assert.throws(() => scopeScript("x", { env: { "1X": "a" } }), RangeError);
});

Deno.test("typed commands: plain, eval for control chars, staged when huge", () => {
  assert.deepEqual(typedCommand("bash", "echo hi", "/s"), { line: "echo hi\r" });
  assert.deepEqual(typedCommand("bash", "a\nb", "/s"), { line: "eval $'a\\nb'\r" });
  assert.deepEqual(typedCommand("sh", "echo hi", "/s"), { line: "__tm_c;eval 'echo hi'\r" });
  assert.deepEqual(typedCommand("sh", "a\nb", "/s"), {
    line: `__tm_c;eval "$(cat /s)"\r`,
    staged: "a\nb\n",
  });
  const huge = "x".repeat(STAGE_THRESHOLD + 1);
  assert.deepEqual(typedCommand("zsh", huge, "/st"), {
    line: `eval "$(</st)"\r`,
    staged: huge + "\n",
  });
});
