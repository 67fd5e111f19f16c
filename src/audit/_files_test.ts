import assert from "node:assert/strict";
import { readFirstLine, readLastLines } from "./_files.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

function withFile(text: string, fn: (path: string) => void): void {
  const path = Deno.makeTempFileSync({ prefix: "termada-audit-lines-" });
  try {
    Deno.writeFileSync(path, enc.encode(text));
    fn(path);
  } finally {
    Deno.removeSync(path);
  }
}

Deno.test("readLastLines reads complete lines backwards across chunk boundaries", () => {
  // 3000 lines of 100 bytes (300 KB): several 64 KiB chunks; one line longer than a chunk.
  const lines = Array.from({ length: 3000 }, (_, i) => String(i).padStart(99, "."));
  lines[2990] = "x".repeat(100_000);
  withFile(lines.join("\n") + "\n", (path) => {
    for (const n of [0, 1, 5, 9, 10, 11, 700, 2999, 3000, 5000]) {
      const got = readLastLines(path, n);
      assert.deepEqual(
        got.lines.map((l) => dec.decode(l)),
        n === 0 ? [] : lines.slice(-n),
        `n=${n}`,
      );
      assert.equal(got.tornBytes, 0);
    }
  });
});

Deno.test("readLastLines leaves out a torn last line and counts its bytes", () => {
  withFile("a\nbb\nccc", (path) => {
    const got = readLastLines(path, 5);
    assert.deepEqual(got.lines.map((l) => dec.decode(l)), ["a", "bb"]);
    assert.equal(got.tornBytes, 3);
  });
  withFile("\n\nx\n", (path) => {
    assert.deepEqual(readLastLines(path, 5).lines.map((l) => dec.decode(l)), ["", "", "x"]);
  });
  withFile("", (path) => {
    assert.deepEqual(readLastLines(path, 5), { lines: [], tornBytes: 0, size: 0 });
  });
});

Deno.test("readFirstLine stops at the first newline or the limit", () => {
  withFile("y".repeat(70_000) + "\nsecond\n", (path) => {
    assert.equal(readFirstLine(path, 1_000_000)!.length, 70_000);
    assert.equal(readFirstLine(path, 1000), null);
  });
  withFile("no newline", (path) => assert.equal(readFirstLine(path, 1000), null));
});
