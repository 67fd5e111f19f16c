import assert from "node:assert/strict";
import {
  applyAt,
  countChanges,
  locateHunks,
  parseUnifiedDiff,
  reverseHunks,
  splitLines,
} from "./diff.ts";
import { isReason } from "./_test_util.ts";

const BEFORE = "one\ntwo\nthree\nfour\nfive\n";
const PATCH = `diff --git a/x.txt b/x.txt
index 1..2 100644
--- a/x.txt\t2024-01-01 00:00:00
+++ b/x.txt
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
@@ -4,2 +4,3 @@
 four
 five
+six
`;

Deno.test("parseUnifiedDiff reads headers, hunks and counts", () => {
  const [f, ...rest] = parseUnifiedDiff(PATCH);
  assert.equal(rest.length, 0);
  assert.equal(f!.oldPath, "x.txt");
  assert.equal(f!.newPath, "x.txt");
  assert.equal(f!.hunks.length, 2);
  assert.deepEqual(f!.hunks[0]!.lines, [" one\n", "-two\n", "+TWO\n", " three\n"]);
  assert.deepEqual(countChanges(f!.hunks), { added: 2, removed: 1 });
});

Deno.test("applying then reversing a patch gives back the exact bytes", () => {
  const [f] = parseUnifiedDiff(PATCH);
  const lines = splitLines(BEFORE);
  const at = locateHunks("x.txt", lines, f!.hunks);
  const after = applyAt(lines, f!.hunks, at).join("");
  assert.equal(after, "one\nTWO\nthree\nfour\nfive\nsix\n");
  const back = reverseHunks(f!.hunks, at);
  assert.equal(applyAt(splitLines(after), back.hunks, back.at).join(""), BEFORE);
});

Deno.test("a hunk is found within the offset window and refused beyond it", async (t) => {
  const [f] = parseUnifiedDiff(PATCH);
  await t.step("shifted by 3 lines", () => {
    const lines = splitLines("a\nb\nc\n" + BEFORE);
    const at = locateHunks("x.txt", lines, f!.hunks);
    assert.deepEqual(at, [3, 6]);
  });
  await t.step("shifted beyond the window", () => {
    const lines = splitLines("pad\n".repeat(5) + BEFORE);
    assert.throws(() => locateHunks("x.txt", lines, f!.hunks, 2), isReason("PATCH_DOES_NOT_APPLY"));
  });
});

Deno.test("a hunk that does not match names the file and the hunk", () => {
  const [f] = parseUnifiedDiff(PATCH);
  assert.throws(
    () => locateHunks("x.txt", splitLines("one\ntwo\nthree\nFOUR\nfive\n"), f!.hunks),
    { message: 'Cannot apply patch to "x.txt": hunk 2 does not match' },
  );
});

Deno.test("no newline at end of file is kept on either side", () => {
  const patch = `--- a/n.txt
+++ b/n.txt
@@ -1,2 +1,2 @@
 a
-b
\\ No newline at end of file
+c
`;
  const [f] = parseUnifiedDiff(patch);
  const lines = splitLines("a\nb");
  const after = applyAt(lines, f!.hunks, locateHunks("n.txt", lines, f!.hunks)).join("");
  assert.equal(after, "a\nc\n");
});

Deno.test("created and deleted files parse with /dev/null", () => {
  const [c, d] = parseUnifiedDiff(`--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+x
+y
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-gone
`);
  assert.equal(c!.oldPath, null);
  assert.equal(c!.newPath, "new.txt");
  assert.equal(applyAt([], c!.hunks, locateHunks("new.txt", [], c!.hunks)).join(""), "x\ny\n");
  assert.equal(d!.newPath, null);
  assert.deepEqual(applyAt(["gone\n"], d!.hunks, [0]), []);
});

Deno.test("malformed patches are refused", async (t) => {
  const cases: Record<string, string> = {
    "no headers": "hello\n",
    "short hunk": "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n",
    "long hunk": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n a\n b\n",
    "bad line": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n*a\n",
    "binary": "Binary files a/x and b/x differ\n",
    "no hunks": "--- a/x\n+++ b/x\n",
    "quoted path": '--- "a/x y"\n+++ "b/x y"\n@@ -1 +1 @@\n-a\n+b\n',
  };
  for (const [name, patch] of Object.entries(cases)) {
    await t.step(name, () => {
      assert.throws(() => parseUnifiedDiff(patch), isReason("PATCH_DOES_NOT_APPLY"));
    });
  }
});
