import assert from "node:assert/strict";
import { TermadaError } from "../shared/mod.ts";
import { CursorBuffer } from "./cursor_buffer.ts";
import { decodeCursor, encodeCursor, MAX_PAGE_BYTES, type Page, type Summary } from "./paging.ts";
import { seededRandom } from "../shared/mod.ts";

const enc = new TextEncoder();
const dec = new TextDecoder("utf-8", { ignoreBOM: true });

const prng = seededRandom;

const isInvalidArgument = (e: unknown): boolean =>
  e instanceof TermadaError && e.code === "INVALID_ARGUMENT";

/** Reads from cursor to the current end; returns the pages. */
function readAll(buf: CursorBuffer, maxBytes?: number, cursor?: string): Page[] {
  const pages: Page[] = [];
  for (;;) {
    const page = buf.read(cursor, maxBytes);
    pages.push(page);
    if (page.nextCursor === cursor || !page.hasMore) return pages;
    if (decodeCursor(page.nextCursor) === buf.totalBytes) return pages;
    cursor = page.nextCursor;
  }
}

/** Valid UTF-8 with 1- to 4-byte characters, n characters long. */
function mixedText(random: () => number, n: number): string {
  const chars = ["a", "b", " ", "\n", "é", "ß", "€", "中", "😀", "🎉", "\t", "\ufeff"];
  let s = "";
  for (let i = 0; i < n; i++) s += chars[Math.floor(random() * chars.length)];
  return s;
}

Deno.test("cursors are opaque strings that round-trip offsets", () => {
  for (const offset of [0, 1, 35, 36, 65536, 123456789, Number.MAX_SAFE_INTEGER]) {
    const c = encodeCursor(offset);
    assert.match(c, /^c[0-9a-z]+$/);
    assert.equal(decodeCursor(c), offset);
  }
  assert.throws(() => encodeCursor(-1), RangeError);
});

Deno.test("malformed cursors are INVALID_ARGUMENT", async (t) => {
  for (
    const bad of [
      "",
      "c",
      "x1",
      "C1",
      "c-1",
      "c00",
      "c01",
      "c1.5",
      "c 1",
      "cZ",
      "c" + "z".repeat(12),
    ]
  ) {
    await t.step(JSON.stringify(bad), () => {
      assert.throws(() => decodeCursor(bad), isInvalidArgument);
      assert.throws(() => new CursorBuffer().read(bad), isInvalidArgument);
    });
  }
});

Deno.test("CursorBuffer refuses a cursor beyond the end and bad page sizes", () => {
  const buf = new CursorBuffer();
  buf.append(enc.encode("hello"));
  assert.equal(buf.read(encodeCursor(5)).output, "");
  assert.throws(() => buf.read(encodeCursor(6)), isInvalidArgument);
  assert.throws(() => buf.read(undefined, 0), isInvalidArgument);
  assert.throws(() => buf.read(undefined, -5), isInvalidArgument);
  assert.throws(() => buf.read(undefined, 1.5), isInvalidArgument);
  assert.throws(() => buf.read(undefined, Number.NaN), isInvalidArgument);
});

Deno.test("CursorBuffer clamps pages to MAX_PAGE_BYTES", () => {
  const buf = new CursorBuffer();
  buf.append(new Uint8Array(200_000).fill(0x61));
  const page = buf.read(undefined, 1_000_000);
  assert.equal(page.output.length, MAX_PAGE_BYTES);
  assert.equal(page.nextCursor, encodeCursor(MAX_PAGE_BYTES));
  assert.equal(buf.read().output.length, MAX_PAGE_BYTES);
});

Deno.test("CursorBuffer pages ~20 MB exactly, byte for byte", () => {
  const random = prng(7);
  const buf = new CursorBuffer({ retentionBytes: 32 * 1024 * 1024 });
  const source = enc.encode(mixedText(random, 2_000_000));
  const whole = new Uint8Array(20 * 1024 * 1024);
  let filled = 0;
  while (filled < whole.length) {
    const len = Math.min(whole.length - filled, source.length);
    whole.set(source.subarray(0, len), filled);
    filled += len;
  }
  for (let at = 0; at < whole.length;) {
    const len = 1 + Math.floor(random() * 100_000);
    buf.append(whole.subarray(at, Math.min(at + len, whole.length)));
    at += len;
  }
  buf.end();
  assert.equal(buf.totalBytes, whole.length);
  let cursor: string | undefined;
  let offset = 0;
  const texts: string[] = [];
  for (;;) {
    const page = buf.read(cursor, 1 + Math.floor(random() * MAX_PAGE_BYTES));
    assert.equal(page.gap, undefined);
    const next = decodeCursor(page.nextCursor);
    // The page holds exactly the bytes between the two cursors.
    assert.equal(enc.encode(page.output).length, next - offset);
    texts.push(page.output);
    offset = next;
    cursor = page.nextCursor;
    if (!page.hasMore) break;
  }
  assert.equal(offset, whole.length);
  // The last 20 MB cut the final character: compare against the same decoding of the bytes.
  assert.equal(texts.join(""), dec.decode(whole));
});

Deno.test("CursorBuffer pages exactly while bytes are still being appended", () => {
  const random = prng(11);
  const buf = new CursorBuffer({ retentionBytes: 1 << 20, headBytes: 0 });
  const appended: Uint8Array[] = [];
  let cursor: string | undefined;
  const texts: string[] = [];
  for (let round = 0; round < 3000; round++) {
    const chunk = enc.encode(mixedText(random, Math.floor(random() * 300)));
    // Split the chunk anywhere, also inside characters.
    const cut = Math.floor(random() * (chunk.length + 1));
    buf.append(chunk.subarray(0, cut));
    buf.append(chunk.subarray(cut));
    appended.push(chunk);
    const page = buf.read(cursor, 1 + Math.floor(random() * 500));
    assert.equal(page.gap, undefined);
    assert.ok(!page.output.includes("\ufffd"), "a page split a character");
    assert.equal(page.hasMore, true);
    texts.push(page.output);
    cursor = page.nextCursor;
  }
  buf.end();
  for (const page of readAll(buf, 4096, cursor)) texts.push(page.output);
  const all = new Uint8Array(appended.reduce((n, c) => n + c.length, 0));
  let o = 0;
  for (const c of appended) {
    all.set(c, o);
    o += c.length;
  }
  assert.equal(texts.join(""), dec.decode(all));
});

Deno.test("CursorBuffer pages never split a UTF-8 character", async (t) => {
  const text = "a€😀é\u00e9中b🎉c€€😀";
  const bytes = enc.encode(text);
  await t.step("every start and every page size", () => {
    const buf = new CursorBuffer();
    buf.append(bytes);
    buf.end();
    // Every character start is a cursor a reader can hold.
    const starts = [0];
    for (const ch of text) starts.push(starts.at(-1)! + enc.encode(ch).length);
    for (const start of starts.slice(0, -1)) {
      for (let size = 1; size <= bytes.length + 1; size++) {
        const pages = readAll(buf, size, encodeCursor(start));
        const joined = pages.map((p) => p.output).join("");
        assert.equal(joined, dec.decode(bytes.subarray(start)), `start ${start} size ${size}`);
        for (const p of pages) assert.ok(!p.output.includes("\ufffd"));
        assert.equal(pages.at(-1)!.hasMore, false);
      }
    }
  });
  await t.step("a character longer than maxBytes comes whole", () => {
    const buf = new CursorBuffer();
    buf.append(enc.encode("😀x"));
    const page = buf.read(undefined, 1);
    assert.equal(page.output, "😀");
    assert.equal(page.nextCursor, encodeCursor(4));
  });
  await t.step("an incomplete last character waits for its bytes", () => {
    const buf = new CursorBuffer();
    const smile = enc.encode("😀");
    buf.append(enc.encode("ab"));
    buf.append(smile.subarray(0, 2));
    const page = buf.read();
    assert.equal(page.output, "ab");
    assert.equal(page.nextCursor, encodeCursor(2));
    assert.equal(buf.read(page.nextCursor).output, "");
    buf.append(smile.subarray(2));
    assert.equal(buf.read(page.nextCursor).output, "😀");
  });
  await t.step("once ended, invalid trailing bytes are returned as they are", () => {
    const buf = new CursorBuffer();
    buf.append(Uint8Array.of(0x61, 0xf0, 0x9f));
    buf.end();
    const page = buf.read();
    assert.equal(page.output, "a\ufffd");
    assert.equal(page.nextCursor, encodeCursor(3));
    assert.equal(page.hasMore, false);
  });
});

Deno.test("CursorBuffer reports dropped bytes as an explicit gap", async (t) => {
  await t.step("exact droppedBytes after retention overflow", () => {
    const buf = new CursorBuffer({ retentionBytes: 1000, headBytes: 0 });
    for (let i = 0; i < 25; i++) buf.append(new Uint8Array(100).fill(0x61 + i));
    assert.equal(buf.totalBytes, 2500);
    assert.equal(buf.startOffset, 1500);
    const page = buf.read(encodeCursor(200), 50);
    assert.deepEqual(page.gap, { fromOffset: 200, toOffset: 1500, droppedBytes: 1300 });
    assert.equal(page.output, "p".repeat(50));
    assert.equal(page.nextCursor, encodeCursor(1550));
    const fromStart = buf.read();
    assert.deepEqual(fromStart.gap, { fromOffset: 0, toOffset: 1500, droppedBytes: 1500 });
    // A cursor still in the ring has no gap.
    assert.equal(buf.read(encodeCursor(1500), 10).gap, undefined);
  });
  await t.step("the ring keeps exactly the newest bytes across wraps", () => {
    const random = prng(3);
    const buf = new CursorBuffer({ retentionBytes: 777, headBytes: 0 });
    const all: number[] = [];
    for (let i = 0; i < 500; i++) {
      const chunk = Uint8Array.from(
        { length: Math.floor(random() * 900) },
        () => 0x21 + Math.floor(random() * 90),
      );
      buf.append(chunk);
      all.push(...chunk);
      const start = buf.startOffset;
      assert.equal(start, Math.max(0, all.length - 777));
      const text = readAll(buf, 300, encodeCursor(start)).map((p) => p.output).join("");
      assert.equal(text, String.fromCharCode(...all.slice(start)));
    }
  });
  await t.step("a page start inside a character skips its continuation bytes into the gap", () => {
    const ring = new CursorBuffer({ retentionBytes: 5, headBytes: 0 });
    ring.append(enc.encode("abcdefgh€xy")); // total 13, start 8: the ring starts at €'s lead
    assert.equal(ring.read().output, "€xy");
    const cut = new CursorBuffer({ retentionBytes: 4, headBytes: 0 });
    cut.append(enc.encode("abcdefgh€xy")); // total 13, start 9: inside €
    const page = cut.read();
    assert.deepEqual(page.gap, { fromOffset: 0, toOffset: 11, droppedBytes: 11 });
    assert.equal(page.output, "xy");
  });
  await t.step("the pinned head stays readable after it left the ring", () => {
    const buf = new CursorBuffer({ retentionBytes: 10, headBytes: 4 });
    buf.append(enc.encode("HEAD-middle-part-TAIL!")); // 22 bytes: the ring keeps 12..22
    const first = buf.read();
    assert.equal(first.output, "HEAD");
    assert.equal(first.gap, undefined);
    const second = buf.read(first.nextCursor);
    assert.deepEqual(second.gap, { fromOffset: 4, toOffset: 12, droppedBytes: 8 });
    assert.equal(second.output, "part-TAIL!");
  });
  await t.step("the pinned head never ends inside a character", () => {
    const buf = new CursorBuffer({ retentionBytes: 4, headBytes: 5 });
    buf.append(enc.encode("abc€defghij")); // € = bytes 3..5 straddles the 5-byte head
    const first = buf.read();
    assert.equal(first.output, "abc");
    const second = buf.read(first.nextCursor);
    assert.deepEqual(second.gap, { fromOffset: 3, toOffset: 9, droppedBytes: 6 });
  });
});

Deno.test("CursorBuffer summary splits head, omitted middle and tail", async (t) => {
  await t.step("everything fits: all in output, no tail", () => {
    const buf = new CursorBuffer();
    buf.append(enc.encode("0123456789"));
    buf.end();
    assert.deepEqual(buf.summary(4, 6), { output: "0123456789", nextCursor: "ca", hasMore: false });
  });
  await t.step("head, omitted, tail", () => {
    const buf = new CursorBuffer();
    buf.append(enc.encode("0123456789abcdefghij"));
    const s = buf.summary(4, 6);
    assert.deepEqual(s, {
      output: "0123",
      tail: "efghij",
      omittedBytes: 10,
      nextCursor: encodeCursor(4),
      hasMore: true,
    });
    // The middle can be paged from nextCursor.
    assert.equal(buf.read(s.nextCursor, 10).output, "456789abcd");
  });
  await t.step("zero limits", () => {
    const buf = new CursorBuffer();
    buf.append(enc.encode("abc"));
    buf.end();
    assert.deepEqual(buf.summary(0, 0), {
      output: "",
      tail: "",
      omittedBytes: 3,
      nextCursor: "c0",
      hasMore: true,
    });
    const empty = new CursorBuffer();
    empty.end();
    assert.deepEqual(empty.summary(0, 0), { output: "", nextCursor: "c0", hasMore: false });
  });
  await t.step("head and tail do not split characters", () => {
    const buf = new CursorBuffer();
    buf.append(enc.encode("ab€cd€ef")); // € at 2..4 and 7..9, total 12
    buf.end();
    const s = buf.summary(3, 4);
    assert.equal(s.output, "ab");
    assert.equal(s.tail, "ef"); // the tail's first 2 bytes were €'s continuation bytes
    assert.equal(s.omittedBytes, 8);
    assert.equal(s.nextCursor, encodeCursor(2));
  });
  await t.step("head from the pinned head after the ring dropped it, with the gap", () => {
    const buf = new CursorBuffer({ retentionBytes: 8, headBytes: 5 });
    buf.append(enc.encode("HEAD:"));
    buf.append(enc.encode("x".repeat(100)));
    buf.append(enc.encode("the-tail"));
    buf.end();
    const s = buf.summary(100, 4);
    assert.deepEqual(s, {
      output: "HEAD:",
      tail: "tail",
      omittedBytes: 104,
      nextCursor: encodeCursor(5),
      hasMore: true,
      gap: { fromOffset: 5, toOffset: 105, droppedBytes: 100 },
    });
  });
  await t.step("invalid limits are INVALID_ARGUMENT", () => {
    const buf = new CursorBuffer();
    assert.throws(() => buf.summary(-1, 5), isInvalidArgument);
    assert.throws(() => buf.summary(5, 0.5), isInvalidArgument);
  });
});

Deno.test("CursorBuffer hasMore is true until the stream ended and was read to the end", () => {
  const buf = new CursorBuffer();
  assert.deepEqual(buf.read(), { output: "", nextCursor: "c0", hasMore: true });
  buf.append(enc.encode("abcdef"));
  const p1 = buf.read(undefined, 4);
  assert.equal(p1.hasMore, true);
  const p2 = buf.read(p1.nextCursor);
  assert.equal(p2.output, "ef");
  assert.equal(p2.hasMore, true); // not ended: more may come
  buf.end();
  assert.equal(buf.ended, true);
  assert.equal(buf.read(p1.nextCursor, 1).hasMore, true); // bytes remain beyond nextCursor
  assert.equal(buf.read(p1.nextCursor).hasMore, false);
  assert.equal(buf.read(p2.nextCursor).hasMore, false);
  assert.throws(() => buf.append(enc.encode("late")), TypeError);
});

Deno.test("CursorBuffer notifies onAppend listeners after append and end", () => {
  const buf = new CursorBuffer();
  const seen: string[] = [];
  const off = buf.onAppend(() => seen.push(`a${buf.totalBytes}${buf.ended ? "e" : ""}`));
  buf.onAppend(() => {
    throw new Error("a broken waiter");
  });
  buf.append(enc.encode("abc"));
  buf.append(new Uint8Array(0)); // nothing appended: no notification
  buf.append(enc.encode("d"));
  off();
  buf.append(enc.encode("e"));
  const seen2: number[] = [];
  buf.onAppend(() => seen2.push(buf.totalBytes));
  buf.end();
  buf.end(); // idempotent
  assert.deepEqual(seen, ["a3", "a4"]);
  assert.deepEqual(seen2, [5]);
});

Deno.test("CursorBuffer refuses invalid options", () => {
  assert.throws(() => new CursorBuffer({ retentionBytes: 0 }), RangeError);
  assert.throws(() => new CursorBuffer({ headBytes: -1 }), RangeError);
});

Deno.test("CursorBuffer storage follows the bytes kept, not the limits", async (t) => {
  await t.step("a few bytes: a small ring while running, exactly the bytes once ended", () => {
    const buf = new CursorBuffer(); // 8 MiB retention, 16 KiB head by default
    assert.equal(buf.allocatedBytes, 0);
    buf.append(enc.encode("hi\n"));
    assert.ok(buf.allocatedBytes <= 256, `allocated ${buf.allocatedBytes}`);
    buf.end();
    assert.equal(buf.allocatedBytes, 3);
    assert.equal(buf.read().output, "hi\n");
    assert.equal(buf.summary(8192, 8192).output, "hi\n");
  });
  await t.step("no output: nothing allocated", () => {
    const buf = new CursorBuffer();
    buf.end();
    assert.equal(buf.allocatedBytes, 0);
    assert.equal(buf.read().output, "");
  });
  await t.step("the head is not copied while the ring still holds it", () => {
    const buf = new CursorBuffer({ retentionBytes: 1 << 20, headBytes: 16 * 1024 });
    for (let i = 0; i < 40; i++) buf.append(new Uint8Array(500).fill(0x61 + (i % 26)));
    buf.end();
    assert.equal(buf.allocatedBytes, 20_000);
  });
  await t.step("after a wrap: the full ring and the head's usable bytes", () => {
    const buf = new CursorBuffer({ retentionBytes: 4, headBytes: 5 });
    buf.append(enc.encode("abc€defghij")); // the head stops before € (3 usable bytes)
    buf.end();
    assert.equal(buf.allocatedBytes, 4 + 3);
    const first = buf.read();
    assert.equal(first.output, "abc");
    assert.deepEqual(buf.read(first.nextCursor).gap, {
      fromOffset: 3,
      toOffset: 9,
      droppedBytes: 6,
    });
  });
  await t.step("a head completed in the ring, pinned when the ring first drops bytes", () => {
    const buf = new CursorBuffer({ retentionBytes: 20, headBytes: 8 });
    buf.append(enc.encode("abcdefg€")); // 10 bytes, € = 7..9 straddles the 8-byte head
    buf.append(enc.encode("0123456789")); // 20: still nothing dropped
    assert.equal(buf.read().output, "abcdefg€0123456789");
    buf.append(enc.encode("KLMNOPQRST")); // 30: the ring keeps 10..30
    const first = buf.read();
    assert.equal(first.output, "abcdefg");
    const second = buf.read(first.nextCursor);
    assert.deepEqual(second.gap, { fromOffset: 7, toOffset: 10, droppedBytes: 3 });
    assert.equal(second.output, "0123456789KLMNOPQRST");
  });
  await t.step("pages and summaries are the same before and after end()", () => {
    // hasMore differs by design (the stream ended); everything else must not move.
    const view = ({ hasMore: _, ...rest }: Page | Summary) => rest;
    const random = prng(11);
    for (const [retentionBytes, headBytes] of [[64, 16], [300, 0], [5000, 50], [37, 100]]) {
      const buf = new CursorBuffer({ retentionBytes, headBytes });
      for (let i = 0; i < 20; i++) buf.append(enc.encode(mixedText(random, 1 + random() * 20)));
      const pages = readAll(buf, 40).map(view);
      const summary = view(buf.summary(30, 30));
      buf.end();
      const label = `retention ${retentionBytes}, head ${headBytes}`;
      assert.deepEqual(readAll(buf, 40).map(view), pages, label);
      assert.deepEqual(view(buf.summary(30, 30)), summary, label);
    }
  });
});

Deno.test("CursorBuffer keeps no listener after end()", () => {
  const buf = new CursorBuffer();
  let calls = 0;
  buf.onAppend(() => calls++);
  buf.end();
  assert.equal(calls, 1);
  const off = buf.onAppend(() => calls++);
  off();
  buf.end();
  assert.equal(calls, 1);
});
