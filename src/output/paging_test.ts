import assert from "node:assert/strict";
import { type ByteSource, readPage, summarize } from "./paging.ts";

const enc = new TextEncoder();
const dec = new TextDecoder("utf-8", { ignoreBOM: true });

/** All of data written; only the given runs are readable (as a store with lost bytes has them). */
function source(
  data: Uint8Array,
  runs: { start: number; resume: number; end: number }[],
  ended = true,
): ByteSource {
  const runOf = (x: number) => runs.find((r) => x >= r.start && x < r.end);
  return {
    totalBytes: data.length,
    ended,
    available: (x) => x === data.length || runOf(x) !== undefined,
    contiguousEnd: (x) => runOf(x)?.end ?? x,
    gapEnd: (x) => runs.find((r) => r.start > x)?.resume ?? data.length,
    lastRun: () => runs.findLast((r) => r.end === data.length),
    byteAt: (x) => data[x]!,
    decode: (from, to) => dec.decode(data.subarray(from, to)),
  };
}

Deno.test("readPage and summarize follow the runs of any byte source", async (t) => {
  // "aé€" = 61 c3a9 e282ac: bytes 0-5; then "xyz" 6-8 are lost; then "€b" 9-12, entered at 9.
  const data = enc.encode("aé€xyz€b");

  await t.step("a gap between runs is reported once, exactly", () => {
    const s = source(data, [{ start: 0, resume: 0, end: 6 }, { start: 9, resume: 9, end: 13 }]);
    assert.deepEqual(readPage(s, "c6"), {
      output: "€b",
      nextCursor: "cd",
      hasMore: false,
      gap: { fromOffset: 6, toOffset: 9, droppedBytes: 3 },
    });
    assert.deepEqual(readPage(s, undefined, 2), { output: "a", nextCursor: "c1", hasMore: true });
    assert.deepEqual(summarize(s, { headLimit: 100, tailLimit: 1 }), {
      output: "aé€",
      tail: "b",
      omittedBytes: 6,
      nextCursor: "c6",
      hasMore: true,
      gap: { fromOffset: 6, toOffset: 9, droppedBytes: 3 },
    });
  });

  await t.step("a source whose last bytes are gone has an empty tail", () => {
    const s = source(data, [{ start: 0, resume: 0, end: 6 }]);
    assert.deepEqual(summarize(s, { headLimit: 3, tailLimit: 3 }), {
      output: "aé",
      tail: "",
      omittedBytes: 10,
      nextCursor: "c3",
      hasMore: true,
    });
  });

  await t.step("an open source holds back a character still arriving", () => {
    const s = source(data.subarray(0, 5), [{ start: 0, resume: 0, end: 5 }], false);
    assert.deepEqual(readPage(s), { output: "aé", nextCursor: "c3", hasMore: true });
  });
});
