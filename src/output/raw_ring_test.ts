import assert from "node:assert/strict";
import { TermadaError } from "../shared/mod.ts";
import { RawRing } from "./raw_ring.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Deterministic bytes 0..n-1 shifted by `seed`, so any misplaced byte shows. */
function pattern(n: number, seed = 0): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = (i + seed) & 0xff;
  return out;
}

Deno.test("RawRing starts empty and allocates nothing until the first append", () => {
  const ring = new RawRing();
  assert.equal(ring.totalBytes, 0);
  assert.equal(ring.startOffset, 0);
  assert.equal(ring.allocatedBytes, 0);
  assert.deepEqual(ring.snapshot(), new Uint8Array(0));
  assert.deepEqual(ring.since(0), { bytes: new Uint8Array(0), from: 0, truncated: false });
});

Deno.test("RawRing grows by doubling up to its capacity, not beyond", () => {
  const ring = new RawRing(10_000);
  ring.append(enc.encode("$ "));
  assert.equal(ring.allocatedBytes, 1024);
  ring.append(pattern(3000));
  assert.equal(ring.allocatedBytes, 4096);
  ring.append(pattern(6000));
  assert.equal(ring.allocatedBytes, 10_000);
  assert.equal(ring.totalBytes, 9002);
  assert.equal(ring.startOffset, 0);
  const all = ring.snapshot();
  assert.equal(dec.decode(all.subarray(0, 2)), "$ ");
  assert.deepEqual(all.subarray(2, 3002), pattern(3000));
  assert.deepEqual(all.subarray(3002), pattern(6000));
});

Deno.test("RawRing keeps the newest bytes when it wraps", async (t) => {
  await t.step("many small appends", () => {
    const ring = new RawRing(100);
    const all: number[] = [];
    for (let i = 0; i < 57; i++) {
      const chunk = pattern(7, i * 7);
      ring.append(chunk);
      all.push(...chunk);
    }
    assert.equal(ring.totalBytes, 399);
    assert.equal(ring.startOffset, 299);
    assert.deepEqual(ring.snapshot(), Uint8Array.from(all.slice(299)));
  });

  await t.step("a chunk larger than the capacity", () => {
    const ring = new RawRing(64);
    ring.append(pattern(10));
    ring.append(pattern(1000, 5));
    assert.equal(ring.totalBytes, 1010);
    assert.equal(ring.startOffset, 946);
    assert.deepEqual(ring.snapshot(), pattern(1000, 5).subarray(936));
  });

  await t.step("a chunk exactly the capacity", () => {
    const ring = new RawRing(64);
    ring.append(pattern(30));
    ring.append(pattern(64, 9));
    assert.equal(ring.startOffset, 30);
    assert.deepEqual(ring.snapshot(), pattern(64, 9));
  });
});

Deno.test("RawRing.since resumes at an offset and flags dropped bytes", () => {
  const ring = new RawRing(16);
  ring.append(enc.encode("0123456789"));
  assert.deepEqual(ring.since(4), {
    bytes: enc.encode("456789"),
    from: 4,
    truncated: false,
  });
  ring.append(enc.encode("abcdefghij")); // 20 written, 16 held: "456789abcdefghij"
  assert.equal(ring.startOffset, 4);
  const late = ring.since(2);
  assert.equal(late.truncated, true);
  assert.equal(late.from, 4);
  assert.equal(dec.decode(late.bytes), "456789abcdefghij");
  assert.equal(dec.decode(ring.since(12).bytes), "cdefghij");
  assert.equal(dec.decode(ring.since(20).bytes), "");
  assert.equal(dec.decode(ring.since(10, 14).bytes), "abcd");
});

Deno.test("RawRing.since returns a copy that later appends do not change", () => {
  const ring = new RawRing(8);
  ring.append(enc.encode("abcdefgh"));
  const held = ring.since(0).bytes;
  ring.append(enc.encode("XYZ"));
  assert.equal(dec.decode(held), "abcdefgh");
  assert.equal(dec.decode(ring.snapshot()), "defghXYZ");
});

Deno.test("RawRing.since rejects offsets past the end as an invalid argument", () => {
  const ring = new RawRing(8);
  ring.append(enc.encode("abc"));
  for (const bad of [4, -1, 1.5, Number.NaN]) {
    assert.throws(() => ring.since(bad), (err: unknown) => {
      assert.ok(err instanceof TermadaError);
      assert.equal(err.code, "INVALID_ARGUMENT");
      return true;
    });
  }
});

Deno.test("RawRing rejects a capacity that is not a positive integer", () => {
  for (const bad of [0, -5, 1.5, Number.POSITIVE_INFINITY]) {
    assert.throws(() => new RawRing(bad), RangeError);
  }
});

Deno.test("RawRing matches a naive model over random appends", () => {
  // Tiny deterministic PRNG so a failure reproduces.
  let seed = 42;
  const rand = (n: number) => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  for (const capacity of [1, 5, 1000, 3000]) {
    const ring = new RawRing(capacity);
    let model: number[] = [];
    for (let i = 0; i < 300; i++) {
      const chunk = pattern(rand(capacity * 2 + 3), rand(256));
      ring.append(chunk);
      model.push(...chunk);
      if (model.length > capacity) model = model.slice(model.length - capacity);
      assert.equal(ring.totalBytes - ring.startOffset, model.length);
      const offset = ring.startOffset + rand(model.length + 1);
      assert.deepEqual(
        ring.since(offset).bytes,
        Uint8Array.from(model.slice(offset - ring.startOffset)),
      );
    }
  }
});
