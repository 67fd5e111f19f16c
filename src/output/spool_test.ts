import assert from "node:assert/strict";
import { seededRandom, TermadaError } from "../shared/mod.ts";
import { CursorBuffer } from "./cursor_buffer.ts";
import { decodeCursor, MAX_PAGE_BYTES, type Page } from "./paging.ts";
import { pruneSpools, removeSpool, SpoolReader, SpoolWriter } from "./spool.ts";

const enc = new TextEncoder();
const dec = new TextDecoder("utf-8", { ignoreBOM: true });
const MiB = 1024 * 1024;
const JOB = "job_0123456789ab";

const prng = seededRandom;

const CHARS = ["a", "b", " ", "\n", "é", "ß", "€", "中", "😀", "🎉", "\t", "\ufeff"].map((c) =>
  enc.encode(c)
);

/** Exactly n bytes of valid UTF-8 with 1- to 4-byte characters (ASCII pads the end). */
function mixedBytes(random: () => number, n: number): Uint8Array {
  const out = new Uint8Array(n);
  let i = 0;
  while (i < n) {
    const c = CHARS[Math.floor(random() * CHARS.length)]!;
    if (i + c.length > n) out[i++] = 0x61;
    else {
      out.set(c, i);
      i += c.length;
    }
  }
  return out;
}

function withDir(fn: (dir: string) => void): void {
  const dir = Deno.makeTempDirSync({ prefix: "termada-spool-" });
  try {
    fn(`${dir}/spool`);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

/** Writes data in random chunks and ends the spool. */
function writeSpool(
  dir: string,
  data: Uint8Array,
  options: { segmentBytes?: number; maxBytes?: number; seed?: number; maxChunk?: number } = {},
): void {
  const random = prng(options.seed ?? 1);
  const w = SpoolWriter.create(dir, JOB, options);
  const maxChunk = options.maxChunk ?? 300_000;
  for (let off = 0; off < data.length;) {
    const n = random() < 0.5
      ? 1 + Math.floor(random() * 4096)
      : 1 + Math.floor(random() * maxChunk);
    w.append(data.subarray(off, off + n));
    off = Math.min(data.length, off + n);
  }
  assert.equal(w.totalBytes, data.length);
  w.end();
}

/** Every page from the start; asserts that each page makes progress. */
function readAll(reader: SpoolReader, maxBytes?: number): Page[] {
  const pages: Page[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = reader.read(cursor, maxBytes);
    pages.push(page);
    if (!page.hasMore) return pages;
    assert.notEqual(page.nextCursor, cursor, "a page always makes progress");
    cursor = page.nextCursor;
  }
}

const isCont = (b: number) => (b & 0xc0) === 0x80;

/** First offset at or after x that is not a continuation byte (at most 3 steps). */
function charStart(data: Uint8Array, x: number): number {
  for (let k = 0; k < 3 && x < data.length && isCont(data[x]!); k++) x++;
  return x;
}

/** The end of the whole characters before x. */
function charEndBefore(data: Uint8Array, x: number): number {
  let k = x;
  while (k > 0 && isCont(data[k]!)) k--;
  return k;
}

const segmentsOnDisk = (dir: string, jobId = JOB): number[] =>
  [...Deno.readDirSync(`${dir}/${jobId}`)]
    .map((e) => /^seg-(\d+)$/.exec(e.name)?.[1])
    .filter((n) => n !== undefined)
    .map(Number)
    .sort((a, b) => a - b);

const isCode = (code: string) => (e: unknown): boolean =>
  e instanceof TermadaError && e.code === code;

Deno.test("40 MB in random chunks pages back exactly, the dropped middle one exact gap", () => {
  withDir((dir) => {
    const total = 40_000_000;
    const data = mixedBytes(prng(7), total);
    writeSpool(dir, data);

    // Defaults: 1 MiB segments, 16 MiB on disk: the head plus the newest 15.
    const last = Math.floor((total - 1) / MiB);
    const kept = [0, ...Array.from({ length: 15 }, (_, i) => last - 14 + i)];
    assert.deepEqual(segmentsOnDisk(dir), kept);
    const onDisk = kept.reduce((sum, n) => sum + Deno.statSync(`${dir}/${JOB}/seg-${n}`).size, 0);
    assert.ok(onDisk <= 16 * MiB);

    const reader = SpoolReader.open(dir, JOB)!;
    assert.equal(reader.totalBytes, total);
    assert.equal(reader.complete, true);
    const pages = readAll(reader);
    const headEnd = charEndBefore(data, MiB);
    const tailStart = charStart(data, (last - 14) * MiB);
    const gaps = pages.filter((p) => p.gap);
    assert.deepEqual(gaps.map((p) => p.gap), [{
      fromOffset: headEnd,
      toOffset: tailStart,
      droppedBytes: tailStart - headEnd,
    }]);
    for (const p of pages) {
      assert.ok(enc.encode(p.output).length <= MAX_PAGE_BYTES);
      assert.ok(!p.output.includes("\ufffd"), "no page splits a character");
    }
    const text = pages.map((p) => p.output).join("");
    assert.equal(
      text,
      dec.decode(data.subarray(0, headEnd)) + dec.decode(data.subarray(tailStart)),
    );
    const end = pages[pages.length - 1]!;
    assert.equal(decodeCursor(end.nextCursor), total);
    assert.equal(end.hasMore, false);
  });
});

Deno.test("characters of 2, 3 and 4 bytes cut at every segment boundary stay whole", async (t) => {
  const S = 64;
  // At boundary n, a character of length 2..4 starts 1..len-1 bytes before it.
  const cuts: { len: number; before: number }[] = [];
  for (const len of [2, 3, 4]) {
    for (let before = 1; before < len; before++) cuts.push({ len, before });
  }
  const chars = new Map([[2, enc.encode("é")], [3, enc.encode("€")], [4, enc.encode("😀")]]);
  const parts: number[] = [];
  for (let n = 1; n <= 48; n++) {
    const cut = cuts[(n - 1) % cuts.length]!;
    while (parts.length < n * S - cut.before) parts.push(0x2e);
    parts.push(...chars.get(cut.len)!);
  }
  while (parts.length % S !== 17) parts.push(0x2e);
  const data = Uint8Array.from(parts);
  for (let n = 1; n <= 48; n++) assert.ok(isCont(data[n * S]!), "every boundary cuts a character");

  await t.step("without deleted segments, any page size", () => {
    withDir((dir) => {
      writeSpool(dir, data, { segmentBytes: S, maxBytes: 1024 * S, maxChunk: 100 });
      const reader = SpoolReader.open(dir, JOB)!;
      for (const maxBytes of [1, 2, 3, 4, 5, 7, 63, 64, 65, 1000, MAX_PAGE_BYTES]) {
        const pages = readAll(reader, maxBytes);
        assert.equal(pages.map((p) => p.output).join(""), dec.decode(data), `maxBytes ${maxBytes}`);
        assert.ok(pages.every((p) => !p.gap && !p.output.includes("\ufffd")));
      }
    });
  });

  await t.step("with deleted segments, gaps start and end on whole characters", () => {
    withDir((dir) => {
      writeSpool(dir, data, { segmentBytes: S, maxBytes: 4 * S, maxChunk: 100 });
      const reader = SpoolReader.open(dir, JOB)!;
      const last = Math.floor((data.length - 1) / S);
      assert.deepEqual(segmentsOnDisk(dir), [0, last - 2, last - 1, last]);
      for (const maxBytes of [1, 3, 5, 64, MAX_PAGE_BYTES]) {
        const pages = readAll(reader, maxBytes);
        const gap = pages.find((p) => p.gap)!.gap!;
        assert.deepEqual(gap, {
          fromOffset: charEndBefore(data, S),
          toOffset: charStart(data, (last - 2) * S),
          droppedBytes: charStart(data, (last - 2) * S) - charEndBefore(data, S),
        });
        const text = pages.map((p) => p.output).join("");
        assert.ok(!text.includes("\ufffd"));
        assert.equal(enc.encode(text).length + gap.droppedBytes, data.length);
      }
    });
  });
});

Deno.test("a spool pages and summarizes exactly like a CursorBuffer holding the same bytes", () => {
  // The CursorBuffer's head is one segment and its ring starts at the oldest kept segment, so both
  // hold the same bytes: every read and summary must then be identical.
  const random = prng(42);
  let roundsWithGap = 0;
  for (let round = 0; round < 40; round++) {
    withDir((dir) => {
      const S = 64 + Math.floor(random() * 200);
      const keep = 2 + Math.floor(random() * 4);
      const total = Math.floor(random() * 30 * S);
      const data = mixedBytes(random, total);
      writeSpool(dir, data, {
        segmentBytes: S,
        maxBytes: keep * S + Math.floor(random() * S),
        seed: round,
        maxChunk: 3 * S,
      });
      const firstKept = Math.floor((total - 1) / S) - (keep - 1) + 1;
      const dropped = total > 0 && firstKept >= 2;
      if (dropped) roundsWithGap++;
      const buffer = new CursorBuffer({
        headBytes: S,
        retentionBytes: Math.max(1, dropped ? total - firstKept * S : total),
      });
      buffer.append(data);
      buffer.end();
      const reader = SpoolReader.open(dir, JOB)!;
      assert.equal(reader.totalBytes, total);

      for (let i = 0; i < 200; i++) {
        const cursor = i === 0 ? undefined : `c${Math.floor(random() * (total + 1)).toString(36)}`;
        const maxBytes = 1 + Math.floor(random() * 3 * S);
        assert.deepEqual(
          reader.read(cursor, maxBytes),
          buffer.read(cursor, maxBytes),
          `round ${round} S ${S} total ${total} cursor ${cursor} maxBytes ${maxBytes}`,
        );
      }
      for (let i = 0; i < 50; i++) {
        const head = Math.floor(random() * 3 * S);
        const tail = Math.floor(random() * 3 * S);
        assert.deepEqual(reader.summary(head, tail), buffer.summary(head, tail));
      }
    });
  }
  assert.ok(roundsWithGap >= 10, `only ${roundsWithGap} rounds dropped segments`);
});

Deno.test("summary gives the head, the tail and what lies between", () => {
  withDir((dir) => {
    const data = enc.encode("é".repeat(100) + "x".repeat(5000) + "€".repeat(100));
    writeSpool(dir, data, { segmentBytes: 256, maxBytes: 4 * 256 });
    const reader = SpoolReader.open(dir, JOB)!;

    const s = reader.summary(101, 30);
    assert.equal(s.output, "é".repeat(50), "the head backs off a cut character");
    assert.equal(s.tail, "€".repeat(10));
    assert.equal(s.omittedBytes, data.length - 100 - 30);
    assert.equal(s.nextCursor, `c${(100).toString(36)}`);
    assert.equal(s.hasMore, true);
    assert.equal(s.gap, undefined, "the head did not reach the dropped bytes");

    const wide = reader.summary(1000, 10_000);
    assert.equal(enc.encode(wide.output).length, 256, "head segment only");
    assert.equal(wide.gap?.fromOffset, 256);
    assert.equal(wide.tail, dec.decode(data.subarray(wide.gap!.toOffset)));

    const none = reader.summary(0, 0);
    assert.deepEqual([none.output, none.tail, none.omittedBytes], ["", "", data.length]);
  });
  withDir((dir) => {
    writeSpool(dir, enc.encode("short output\n"));
    const all = SpoolReader.open(dir, JOB)!.summary(8, 8);
    assert.deepEqual(all, { output: "short output\n", nextCursor: "cd", hasMore: false });
  });
});

Deno.test("an abandoned spool keeps every flushed byte readable and is final", async (t) => {
  await t.step("crash inside the head", () => {
    withDir((dir) => {
      const w = SpoolWriter.create(dir, JOB);
      w.append(enc.encode("before flush\n"));
      w.flush();
      w.append(enc.encode("lost in the crash\n"));
      w.abandon();
      const r = SpoolReader.open(dir, JOB)!;
      assert.equal(r.complete, false);
      assert.equal(r.totalBytes, 13);
      assert.deepEqual(r.read(), { output: "before flush\n", nextCursor: "cd", hasMore: false });
    });
  });
  await t.step("crash after middle segments were deleted", () => {
    withDir((dir) => {
      const S = 1024;
      const data = mixedBytes(prng(3), 200 * S);
      const w = SpoolWriter.create(dir, JOB, { segmentBytes: S, maxBytes: 5 * S });
      w.append(data.subarray(0, 20_000));
      w.append(data.subarray(20_000, 40_000)); // 40 000 < 64 KiB: still queued
      w.flush();
      w.append(data.subarray(40_000, 110_000)); // ≥ 64 KiB: written at once
      w.append(data.subarray(110_000, 120_000)); // queued, lost in the crash
      w.abandon();
      const r = SpoolReader.open(dir, JOB)!;
      assert.equal(r.complete, false);
      assert.equal(r.totalBytes, 110_000);
      const pages = readAll(r);
      const last = Math.floor((110_000 - 1) / S);
      assert.deepEqual(segmentsOnDisk(dir), [0, last - 3, last - 2, last - 1, last]);
      const from = charEndBefore(data, S);
      const to = charStart(data, (last - 3) * S);
      assert.deepEqual(pages.find((p) => p.gap)?.gap, {
        fromOffset: from,
        toOffset: to,
        droppedBytes: to - from,
      });
      assert.equal(
        pages.map((p) => p.output).join(""),
        dec.decode(data.subarray(0, from)) + dec.decode(data.subarray(to, 110_000)),
      );
      assert.equal(pages[pages.length - 1]!.hasMore, false);
    });
  });
  await t.step("crash right after a new segment was opened", () => {
    withDir((dir) => {
      const S = 1024;
      const w = SpoolWriter.create(dir, JOB, { segmentBytes: S, maxBytes: 2 * S });
      w.append(new Uint8Array(3 * S).fill(0x61));
      w.flush();
      w.abandon();
      assert.deepEqual(segmentsOnDisk(dir), [0, 2]);
      const r = SpoolReader.open(dir, JOB)!;
      assert.equal(r.totalBytes, 3 * S);
      const pages = readAll(r);
      assert.deepEqual(pages.map((p) => p.gap).filter(Boolean), [
        { fromOffset: S, toOffset: 2 * S, droppedBytes: S },
      ]);
    });
  });
});

Deno.test("spool files are private, end is idempotent and a spool cannot be reused", () => {
  withDir((dir) => {
    const w = SpoolWriter.create(dir, JOB, { segmentBytes: 16, maxBytes: 64 });
    w.append(enc.encode("x".repeat(100)));
    w.end();
    w.end();
    assert.throws(() => w.append(enc.encode("late")), TypeError);
    assert.equal(Deno.statSync(dir).mode! & 0o777, 0o700);
    assert.equal(Deno.statSync(`${dir}/${JOB}`).mode! & 0o777, 0o700);
    for (const e of Deno.readDirSync(`${dir}/${JOB}`)) {
      assert.equal(Deno.statSync(`${dir}/${JOB}/${e.name}`).mode! & 0o777, 0o600, e.name);
    }
    assert.deepEqual(JSON.parse(Deno.readTextFileSync(`${dir}/${JOB}/done`)), {
      totalBytes: 100,
      segmentBytes: 16,
    });
    assert.throws(() => SpoolWriter.create(dir, JOB), isCode("INTERNAL"));
    assert.throws(
      () => SpoolWriter.create(dir, "job_aaaaaaaaaaaa", { segmentBytes: 8 }),
      RangeError,
    );
    assert.throws(
      () => SpoolWriter.create(dir, "job_aaaaaaaaaaaa", { segmentBytes: 64, maxBytes: 100 }),
      RangeError,
    );
  });
});

Deno.test("bad cursors are INVALID_ARGUMENT; a missing or linked spool has no reader", () => {
  withDir((dir) => {
    writeSpool(dir, enc.encode("hello"));
    const r = SpoolReader.open(dir, JOB)!;
    assert.throws(() => r.read("c6"), isCode("INVALID_ARGUMENT"));
    assert.throws(() => r.read("../c1"), isCode("INVALID_ARGUMENT"));
    assert.throws(() => r.read(undefined, 0), isCode("INVALID_ARGUMENT"));
    assert.throws(() => r.summary(-1, 1), isCode("INVALID_ARGUMENT"));
    assert.deepEqual(r.read("c5"), { output: "", nextCursor: "c5", hasMore: false });
    assert.equal(SpoolReader.open(dir, "job_zzzzzzzzzzzz"), undefined, "no spool, no reader");
    Deno.symlinkSync(`${dir}/${JOB}`, `${dir}/job_yyyyyyyyyyyy`);
    assert.equal(SpoolReader.open(dir, "job_yyyyyyyyyyyy"), undefined, "a link is not a spool");
  });
});

Deno.test("job ids that are not job ids never reach a path", () => {
  withDir((dir) => {
    Deno.mkdirSync(dir, { recursive: true });
    for (
      const bad of [
        "",
        "..",
        "../job_0123456789ab",
        "job_0123456789a",
        "job_0123456789ABC",
        "job_0123456789ab/..",
        "job_01234567/9ab",
        "seg-0",
        42 as unknown as string,
      ]
    ) {
      assert.throws(() => SpoolWriter.create(dir, bad), isCode("INVALID_ARGUMENT"), String(bad));
      assert.throws(() => SpoolReader.open(dir, bad), isCode("INVALID_ARGUMENT"), String(bad));
      assert.throws(() => removeSpool(dir, bad), isCode("INVALID_ARGUMENT"), String(bad));
    }
    assert.deepEqual([...Deno.readDirSync(dir)], []);
  });
});

Deno.test("pruneSpools deletes the spools of forgotten jobs and nothing else", () => {
  withDir((dir) => {
    assert.equal(pruneSpools(dir, () => false), 0, "no spool directory yet");
    const ids = ["job_aaaaaaaaaaaa", "job_bbbbbbbbbbbb", "job_cccccccccccc"];
    for (const id of ids) {
      const w = SpoolWriter.create(dir, id);
      w.append(enc.encode(id));
      w.end();
    }
    Deno.mkdirSync(`${dir}/notes`);
    Deno.writeTextFileSync(`${dir}/job_dddddddddddd`, "a file, not a spool");
    const asked: string[] = [];
    const removed = pruneSpools(dir, (id) => {
      asked.push(id);
      return id === "job_bbbbbbbbbbbb";
    });
    assert.equal(removed, 2);
    assert.deepEqual(asked.sort(), ids);
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name).sort(), [
      "job_bbbbbbbbbbbb",
      "job_dddddddddddd",
      "notes",
    ]);
    assert.equal(SpoolReader.open(dir, "job_bbbbbbbbbbbb")!.read().output, "job_bbbbbbbbbbbb");
    removeSpool(dir, "job_bbbbbbbbbbbb");
    removeSpool(dir, "job_bbbbbbbbbbbb");
  });
});

Deno.test("a spool that cannot be written stops quietly and records what was lost", () => {
  withDir((dir) => {
    const S = 1024;
    const w = SpoolWriter.create(dir, JOB, { segmentBytes: S, maxBytes: 4 * S });
    w.append(new Uint8Array(S).fill(0x62));
    w.flush();
    // Pull the directory away: the next segment cannot be created.
    Deno.removeSync(`${dir}/${JOB}`, { recursive: true });
    w.append(new Uint8Array(100 * 1024).fill(0x63));
    w.append(new Uint8Array(10).fill(0x63));
    assert.ok(w.error !== undefined);
    assert.equal(w.totalBytes, S + 100 * 1024 + 10);
    w.end(); // cannot write `done` either: logged, not thrown
    assert.equal(SpoolReader.open(dir, JOB), undefined);
  });
});

Deno.test("bytes missing from a finished spool read as a gap up to the recorded end", () => {
  withDir((dir) => {
    const S = 1024;
    writeSpool(dir, new Uint8Array(3 * S).fill(0x61), { segmentBytes: S, maxBytes: 8 * S });
    Deno.truncateSync(`${dir}/${JOB}/seg-2`, 100);
    const r = SpoolReader.open(dir, JOB)!;
    assert.equal(r.totalBytes, 3 * S, "done is the truth about the size");
    const pages = readAll(r);
    const end = pages[pages.length - 1]!;
    assert.deepEqual(end.gap, { fromOffset: 2 * S + 100, toOffset: 3 * S, droppedBytes: S - 100 });
    assert.deepEqual([end.output, end.nextCursor, end.hasMore], [
      "",
      `c${(3 * S).toString(36)}`,
      false,
    ]);
    assert.equal(pages.map((p) => p.output).join(""), "a".repeat(2 * S + 100));
    const s = r.summary(10, 10);
    assert.deepEqual([s.output, s.tail, s.omittedBytes], ["a".repeat(10), "", 3 * S - 10]);
  });
});
