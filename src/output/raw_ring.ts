/**
 * The last N bytes a session wrote, addressed by absolute offsets so a reader can resume where it
 * left off (`since(offset)`) and learn when the ring dropped bytes it had not read.
 *
 * Storage grows by doubling from a small first allocation up to `capacity`, so a session that only
 * printed a prompt holds a few KiB, not the full capacity. Once full, the ring wraps and the oldest
 * bytes are overwritten. Appends are O(chunk) copies with no per-byte work.
 */
import { invalidArgument } from "../shared/mod.ts";

/** Default capacity: 1 MiB of raw output per session. */
export const RAW_RING_DEFAULT_CAPACITY = 1024 * 1024;

/** The first allocation; the buffer then doubles on demand up to the capacity. */
const FIRST_ALLOCATION = 1024;

const EMPTY = new Uint8Array(0);

/** What `RawRing.since` returns. */
export interface RawSince {
  /** A fresh copy of the bytes: the caller may keep it while the ring moves on. */
  bytes: Uint8Array;
  /** Absolute offset of `bytes[0]`. */
  from: number;
  /** True when the requested offset had already been dropped: `from` is later than asked. */
  truncated: boolean;
}

export class RawRing {
  /** Most bytes ever held at once. */
  readonly capacity: number;
  #buf: Uint8Array = EMPTY;
  /** Index in `#buf` of the oldest held byte. */
  #head = 0;
  /** Bytes currently held. */
  #size = 0;
  #total = 0;

  constructor(capacity: number = RAW_RING_DEFAULT_CAPACITY) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) {
      throw new RangeError(
        `Cannot create a raw ring of capacity "${capacity}": it must be a positive integer`,
      );
    }
    this.capacity = capacity;
  }

  /** Total bytes ever appended: the absolute offset of the end. */
  get totalBytes(): number {
    return this.#total;
  }

  /** Absolute offset of the oldest byte still held. */
  get startOffset(): number {
    return this.#total - this.#size;
  }

  /** Bytes currently allocated (for memory accounting). */
  get allocatedBytes(): number {
    return this.#buf.length;
  }

  /** Copies `bytes` in; the caller keeps ownership of its array. */
  append(bytes: Uint8Array): void {
    const n = bytes.length;
    if (n === 0) return;
    this.#total += n;
    const cap = this.capacity;
    if (n >= cap) {
      // Only the newest `cap` bytes survive: no need to keep anything older.
      if (this.#buf.length < cap) this.#buf = new Uint8Array(cap);
      this.#buf.set(n === cap ? bytes : bytes.subarray(n - cap));
      this.#head = 0;
      this.#size = cap;
      return;
    }
    const needed = this.#size + n;
    if (needed > this.#buf.length && this.#buf.length < cap) this.#grow(needed);
    const buf = this.#buf;
    const len = buf.length;
    const tail = (this.#head + this.#size) % len;
    const first = Math.min(n, len - tail);
    buf.set(first === n ? bytes : bytes.subarray(0, first), tail);
    if (first < n) buf.set(bytes.subarray(first), 0);
    if (needed > len) {
      // Full: the write overwrote the oldest bytes.
      this.#head = (this.#head + needed - len) % len;
      this.#size = len;
    } else {
      this.#size = needed;
    }
  }

  /**
   * Bytes from `offset` up to `end` (default: the end). If `offset` was already dropped, starts at
   * `startOffset` with `truncated: true`. An offset past the end is a caller error.
   */
  since(offset: number, end: number = this.#total): RawSince {
    if (!Number.isSafeInteger(offset) || offset < 0 || offset > this.#total) {
      throw invalidArgument(
        `Cannot read output since offset "${offset}": it must be an integer from 0 to ${this.#total}`,
        "Use an offset returned by an earlier read",
      );
    }
    if (!Number.isSafeInteger(end) || end < offset || end > this.#total) {
      throw new RangeError(
        `Cannot read output up to offset "${end}": it must be between ${offset} and ${this.#total}`,
      );
    }
    const start = this.startOffset;
    const truncated = offset < start;
    const from = truncated ? start : offset;
    const stop = Math.max(from, end);
    return { bytes: this.#copy(from - start, stop - start), from, truncated };
  }

  /** A copy of everything held. */
  snapshot(): Uint8Array {
    return this.#copy(0, this.#size);
  }

  /** Copies held bytes [a, b) (relative to the oldest byte) into a fresh array. */
  #copy(a: number, b: number): Uint8Array {
    const n = b - a;
    const out = new Uint8Array(n);
    if (n === 0) return out;
    const buf = this.#buf;
    const len = buf.length;
    const s = (this.#head + a) % len;
    const first = Math.min(n, len - s);
    out.set(buf.subarray(s, s + first));
    if (first < n) out.set(buf.subarray(0, n - first), first);
    return out;
  }

  #grow(needed: number): void {
    let len = Math.max(FIRST_ALLOCATION, this.#buf.length);
    while (len < needed) len *= 2;
    len = Math.min(len, this.capacity);
    const next = new Uint8Array(len);
    next.set(this.#copy(0, this.#size));
    this.#buf = next;
    this.#head = 0;
  }
}
