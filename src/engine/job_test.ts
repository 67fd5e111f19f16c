import assert from "node:assert/strict";
import { classify } from "../output/mod.ts";
import { seededRandom } from "../shared/mod.ts";
import type { Job } from "./job.ts";
import { testJob as job } from "./_test_job.ts";

const enc = new TextEncoder();
function output(j: Job): string {
  let out = "";
  let cursor: string | undefined;
  for (;;) {
    const page = j.buffer.read(cursor, 1 << 20);
    out += page.output;
    cursor = page.nextCursor;
    if (!page.hasMore) return out;
  }
}

/** Feeds the same chunks to one job with scan flags and one without; returns both outputs. */
function both(chunks: string[], commitAfter: ReadonlySet<number> = new Set()): [string, string] {
  const plain = job();
  const flagged = job();
  chunks.forEach((text, i) => {
    const c = enc.encode(text);
    plain.feed(c);
    flagged.feed(c, classify(c));
    if (commitAfter.has(i)) {
      plain.commitPending();
      flagged.commitPending();
    }
  });
  plain.finish("exited", { exitCode: 0 });
  flagged.finish("exited", { exitCode: 0 });
  return [output(flagged), output(plain)];
}

Deno.test("a job's output is the same with scan flags: a key in one chunk, its value in a plain one", async (t) => {
  const cases: [string, string[]][] = [
    ["key=value split at the value", ["export password=", "hunter2secretvalue\nmore plain text\n"]],
    ["token split inside its letters", ["ghp_", "a1b2c3d4e5f6g7h8i9j0a1b2c3d4e5f6g7h8i9j0\n"]],
    ["a line overwritten after CR keeps a key behind the cursor", [
      "xxxx password=aaaaaaaaaaaaaaaaaaaa\r",
      "zzzz\nnext\n",
    ]],
    ["a PEM block whose body comes in plain chunks", [
      "-----BEGIN RSA PRIVATE KEY-----\n",
      "QWERTYUIOPqwertyuiop\n",
      "QWERTYUIOPqwertyuiop\n-----END RSA PRIVATE KEY-----\n",
    ]],
    ["a long line held across chunks", ["x".repeat(20_000) + " secret=", "v".repeat(30) + "\n"]],
  ];
  for (const [name, chunks] of cases) {
    await t.step(name, () => {
      const [flagged, plain] = both(chunks);
      assert.equal(flagged, plain);
      assert.ok(
        !/hunter2secret|a1b2c3d4e5|aaaaaaaaaaaa|QWERTYUIOPqwerty|vvvvvvvvvvvv/.test(flagged),
        flagged.slice(-200),
      );
    });
  }
});

Deno.test("a job's output is the same with scan flags (random output, chunks and commits)", () => {
  const pieces = [
    "y\n",
    "plain text 123 ",
    "password=",
    "hunter2secret\n",
    "\r",
    "\x1b[1m",
    "ghp_",
    "a1b2".repeat(10),
    "\n",
    "token: 'abc def ghi'\n",
    "-----BEGIN EC PRIVATE KEY-----\n",
    "QWERTYUIOPqwertyuiop\n",
    "-----END EC PRIVATE KEY-----\n",
    "\b",
  ];
  for (let seed = 1; seed <= 40; seed++) {
    const rnd = seededRandom(seed);
    const chunks: string[] = [];
    const commits = new Set<number>();
    for (let i = 0; i < 60; i++) {
      let c = "";
      const k = 1 + Math.floor(rnd() * 4);
      for (let m = 0; m < k; m++) c += pieces[Math.floor(rnd() * pieces.length)]!;
      chunks.push(c);
      if (rnd() < 0.15) commits.add(i);
    }
    const [flagged, plain] = both(chunks, commits);
    assert.equal(flagged, plain, `seed ${seed}`);
  }
});
