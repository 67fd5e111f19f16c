import assert from "node:assert/strict";
import { compileGlob, globMatch, matchEvery, matchSome } from "./glob.ts";
import { ANY, HOME, literalWord, makeWord, subjectOf } from "./_words.ts";
import { loadShellParser } from "./_parser.ts";

await loadShellParser();

Deno.test("glob: * matches any text, spaces included, and nothing", () => {
  const g = compileGlob("git push *");
  assert.equal(globMatch(g, "git push origin main"), true);
  assert.equal(globMatch(g, "git push "), true);
  assert.equal(globMatch(g, "git pushx"), false);
  assert.equal(globMatch(g, "xgit push origin"), false);
  assert.equal(globMatch(compileGlob("*"), ""), true);
  assert.equal(globMatch(compileGlob("rm -rf /*"), "rm -rf /"), true);
  assert.equal(globMatch(compileGlob("*rm*"), "sudo rm x"), true);
});

Deno.test("glob: a trailing ' *' also matches the bare command", () => {
  assert.equal(globMatch(compileGlob("git push *"), "git push"), true);
  assert.equal(globMatch(compileGlob("git push*"), "git push"), true);
  assert.equal(globMatch(compileGlob("git push x *"), "git push"), false);
});

Deno.test("glob: ? is one character and \\ makes the next literal", () => {
  assert.equal(globMatch(compileGlob("ls -?"), "ls -l"), true);
  assert.equal(globMatch(compileGlob("ls -?"), "ls -la"), false);
  assert.equal(globMatch(compileGlob("ls ?"), "ls é"), true);
  assert.equal(globMatch(compileGlob("ls ?"), "ls 😀"), true);
  assert.equal(globMatch(compileGlob("echo \\*"), "echo *"), true);
  assert.equal(globMatch(compileGlob("echo \\*"), "echo x"), false);
  assert.equal(globMatch(compileGlob("echo \\?\\\\"), "echo ?\\"), true);
  assert.equal(globMatch(compileGlob("[abc]"), "[abc]"), true);
  assert.equal(globMatch(compileGlob("[abc]"), "a"), false);
});

Deno.test("glob: matching is whole-text and case-sensitive", () => {
  assert.equal(globMatch(compileGlob("ls"), "ls -la"), false);
  assert.equal(globMatch(compileGlob("LS *"), "ls x"), false);
});

Deno.test("glob: patterns are normalised", () => {
  assert.equal(globMatch(compileGlob("  git   push   * "), "git push origin"), true);
  assert.equal(globMatch(compileGlob("/usr/bin/rm -rf *"), "rm -rf /"), true);
  assert.equal(globMatch(compileGlob("*/rm x"), "/bin/rm x"), true);
  assert.equal(compileGlob("  git   push ").source, "  git   push ");
});

Deno.test("glob: bad patterns are RangeErrors", () => {
  assert.throws(() => compileGlob(""), RangeError);
  assert.throws(() => compileGlob("   "), RangeError);
  assert.throws(() => compileGlob("rm \\"), RangeError);
});

Deno.test("glob: many stars stay fast (no backtracking)", () => {
  const g = compileGlob("*a*a*a*a*a*a*a*a*a*a*b");
  const text = "a".repeat(20_000);
  const start = performance.now();
  assert.equal(globMatch(g, text), false);
  assert.ok(performance.now() - start < 1000);
});

Deno.test("glob: holes match some or every value", () => {
  const rmX = subjectOf([literalWord("rm"), literalWord("-rf"), makeWord([ANY], "$X", true)]);
  assert.equal(matchSome(compileGlob("rm -rf /*"), rmX), true);
  assert.equal(matchEvery(compileGlob("rm -rf /*"), rmX), false);
  assert.equal(matchEvery(compileGlob("rm -rf *"), rmX), true);
  assert.equal(matchSome(compileGlob("rm -rf /etc"), rmX), true);
  assert.equal(matchSome(compileGlob("rm -r /etc"), rmX), false);

  // A hole in the middle: "cat $DIR/x" could be "cat /etc/x", always matches "cat */x".
  const cat = subjectOf([literalWord("cat"), makeWord([ANY, "/x"], "$DIR/x", false)]);
  assert.equal(matchSome(compileGlob("cat /etc/*"), cat), true);
  assert.equal(matchEvery(compileGlob("cat */x"), cat), true);
  assert.equal(matchEvery(compileGlob("cat *"), cat), true);
  assert.equal(matchEvery(compileGlob("cat ?/x"), cat), false);
  assert.equal(matchSome(compileGlob("cat /y"), cat), false);
});

Deno.test("glob: ~ in a rule matches the home-directory hole", () => {
  const cat = subjectOf([literalWord("cat"), makeWord([HOME, "/notes"], "~/notes", false)]);
  assert.equal(matchEvery(compileGlob("cat ~/*"), cat), true);
  assert.equal(matchEvery(compileGlob("cat /home/*"), cat), false);
  assert.equal(matchSome(compileGlob("cat /home/*"), cat), true);
});
