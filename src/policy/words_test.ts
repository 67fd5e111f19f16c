import assert from "node:assert/strict";
import {
  ANY,
  decodeAnsiC,
  hasBraceExpansion,
  makeWord,
  programName,
  replaceWithHole,
  splitEnvString,
} from "./_words.ts";
import { hasHistoryExpansion } from "./_analyze.ts";
import { loadShellParser } from "./_parser.ts";

await loadShellParser();

Deno.test("words: $'…' decodes like bash", () => {
  assert.equal(decodeAnsiC("\\x72m"), "rm");
  assert.equal(decodeAnsiC("\\162\\155"), "rm");
  assert.equal(decodeAnsiC("\\u0072\\U0000006d"), "rm");
  assert.equal(decodeAnsiC("a\\tb\\nc\\\\d\\'e\\\"f\\?"), "a\tb\nc\\d'e\"f?");
  assert.equal(decodeAnsiC("\\e[0m\\cA"), "\x1b[0m\x01");
  assert.equal(decodeAnsiC("\\q\\x"), "\\q\\x");
  assert.equal(decodeAnsiC("ab\\x00cd"), "ab");
});

Deno.test("words: brace expansion is found only where bash expands it", () => {
  assert.equal(hasBraceExpansion("{rm,-rf,/}"), true);
  assert.equal(hasBraceExpansion("a{b,c}d"), true);
  assert.equal(hasBraceExpansion("{1..5}"), true);
  assert.equal(hasBraceExpansion("{}"), false);
  assert.equal(hasBraceExpansion("{a}"), false);
  assert.equal(hasBraceExpansion("{a,b"), false);
  assert.equal(hasBraceExpansion("\0a,b\0"), false);
});

Deno.test("words: env -S splits like GNU env", () => {
  assert.deepEqual(splitEnvString("rm -rf /"), ["rm", "-rf", "/"]);
  assert.deepEqual(splitEnvString(`'a b' "c d" e\\_f`), ["a b", "c d", "e", "f"]);
  assert.deepEqual(splitEnvString(`"a\\_b"`), ["a b"]);
  assert.deepEqual(splitEnvString("a #comment"), ["a"]);
  assert.deepEqual(splitEnvString("a\\cb c"), ["a"]);
  assert.deepEqual(splitEnvString("  "), []);
  assert.ok(!Array.isArray(splitEnvString("${HOME}/x")));
  assert.ok(!Array.isArray(splitEnvString("'unclosed")));
  assert.ok(!Array.isArray(splitEnvString("bad\\q")));
});

Deno.test("words: program names are basenames", () => {
  assert.equal(programName("/usr/bin/rm"), "rm");
  assert.equal(programName("./rm"), "rm");
  assert.equal(programName("rm"), "rm");
  assert.equal(programName("=rm"), "rm");
  assert.equal(programName("a=b"), "a=b");
});

Deno.test("words: placeholders become holes", () => {
  const w = replaceWithHole(makeWord(["echo {}/x"], "", false), "{}");
  assert.deepEqual(w.pieces, ["echo ", ANY, "/x"]);
  assert.equal(w.literal, undefined);
  assert.equal(w.display, "echo {}/x");
});

Deno.test("words: history expansion is recognised where bash performs it", () => {
  for (const line of ["echo !!", "!-2", "!rm", 'echo "a!b"', "echo $(!!)", "ls !$"]) {
    assert.equal(hasHistoryExpansion(line), true, line);
  }
  for (
    const line of [
      "echo 'a!b'",
      "[ ! -f x ]",
      "echo hi!",
      'echo "hi!"',
      "echo $!",
      "echo ${!x}",
      "ls [!a]*",
      "a != b",
      "echo \\!x",
      "echo $'it\\'s !x'",
    ]
  ) {
    assert.equal(hasHistoryExpansion(line), false, line);
  }
});
