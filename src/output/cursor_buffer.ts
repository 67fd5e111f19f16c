/**
 * The retained output of one job or session, paged by opaque cursors (byte offsets). A ring keeps
 * the newest retentionBytes; the first headBytes are pinned for summaries. Pages and summaries never
 * split a UTF-8 character and say exactly which bytes were dropped.
 *
 * Memory follows the bytes, not the limits: thousands of finished jobs stay in memory, most with a
 * few bytes of output. The ring starts small and doubles; the head is copied out only when the ring
 * is about to drop bytes (until then the ring holds them); end() trims both to exactly what is kept.
 */
import { logger } from "../shared/mod.ts";
import {
  type ByteSource,
  MAX_PAGE_BYTES,
  type Page,
  readPage,
  summarize,
  type Summary,
} from "./paging.ts";
import { completeEnd, isCont } from "./utf8.ts";

export interface CursorBufferOptions {
  /** Newest bytes kept (default 8 MiB); older bytes are dropped. */
  retentionBytes?: number;
  /** First bytes kept forever for summaries (default 16 KiB). */
  headBytes?: number;
}

const DEFAULT_RETENTION = 8 * 1024 * 1024;
const DEFAULT_HEAD = 16 * 1024;
/** Smallest ring allocated: below it, a doubling step would cost more than the bytes. */
const MIN_CAPACITY = 256;
const EMPTY = new Uint8Array(0);
/** ignoreBOM: a leading U+FEFF is output like any other character (exact paging). */
const decoder = new TextDecoder("utf-8", { ignoreBOM: true });
const log = logger("output");

/**
 * Implements ByteSource for the shared paging rules; those methods expect readable offsets (see
 * ByteSource) and are not meant for callers that only page.
 */
export class CursorBuffer implements ByteSource {
  readonly #retention: number;
  readonly #headCap: number;
  /**
   * Ring of the newest bytes; offset x lives at x % length. Grows up to #retention; while nothing
   * was dropped (#total <= #retention) offsets [0, #total) sit at the same indexes.
   */
  #ring: Uint8Array = EMPTY;
  /**
   * The first bytes ever appended (up to #headCap), copied out of the ring once it first drops
   * bytes (#headPinned). Before that the ring itself holds them.
   */
  #head: Uint8Array = EMPTY;
  #headPinned = false;
  /** Usable head bytes: ends on a character boundary once the head is complete. */
  #headLen = 0;
  #headDone = false;
  #total = 0;
  #ended = false;
  /** Made on the first onAppend, dropped at end(): most jobs finish with nobody waiting. */
  #listeners: Set<() => void> | undefined;

  constructor(options: CursorBufferOptions = {}) {
    const retention = options.retentionBytes ?? DEFAULT_RETENTION;
    const head = options.headBytes ?? DEFAULT_HEAD;
    if (!Number.isSafeInteger(retention) || retention < 1) {
      throw new RangeError(
        `CursorBuffer retentionBytes must be a positive integer, got ${retention}`,
      );
    }
    if (!Number.isSafeInteger(head) || head < 0) {
      throw new RangeError(`CursorBuffer headBytes must be a non-negative integer, got ${head}`);
    }
    this.#retention = retention;
    this.#headCap = head;
  }

  /** True once end() was called. */
  get ended(): boolean {
    return this.#ended;
  }

  /** Bytes ever appended. */
  get totalBytes(): number {
    return this.#total;
  }

  /** Bytes of storage held (ring and pinned head), for memory accounting. */
  get allocatedBytes(): number {
    return this.#ring.length + this.#head.length;
  }

  /** Oldest offset still in the ring (the pinned head may hold older ones). */
  get startOffset(): number {
    return Math.max(0, this.#total - this.#retention);
  }

  /** Copies bytes in; amortized O(n). Old bytes beyond retentionBytes are dropped. */
  append(bytes: Uint8Array): void {
    if (this.#ended) throw new TypeError("Cannot append to a CursorBuffer after end()");
    const len = bytes.length;
    if (len === 0) return;
    const total = this.#total;
    const newTotal = total + len;

    if (!this.#headPinned && newTotal > this.#retention) {
      // The ring is about to drop bytes: keep the head's copy from now on. Nothing has been
      // dropped yet, so its first bytes are still at their own indexes in the ring.
      this.#headPinned = true;
      if (this.#headCap > 0) {
        this.#head = new Uint8Array(this.#headCap);
        this.#head.set(this.#ring.subarray(0, Math.min(total, this.#headCap)));
      }
    }
    if (this.#headPinned && total < this.#headCap) {
      this.#head.set(bytes.subarray(0, Math.min(len, this.#headCap - total)), total);
    }

    let ring = this.#ring;
    if (ring.length < this.#retention && newTotal > ring.length) {
      // Still growing: nothing has wrapped, offsets [0, total) sit at the same indexes.
      const size = Math.min(this.#retention, Math.max(ring.length * 2, newTotal, MIN_CAPACITY));
      const next = new Uint8Array(size);
      next.set(ring.subarray(0, total));
      ring = this.#ring = next;
    }
    const cap = ring.length;
    const src = len > cap ? bytes.subarray(len - cap) : bytes;
    const pos = (newTotal - src.length) % cap;
    const first = Math.min(src.length, cap - pos);
    ring.set(first === src.length ? src : src.subarray(0, first), pos);
    if (first < src.length) ring.set(src.subarray(first), 0);
    this.#total = newTotal;
    this.#updateHeadLen();
    this.#notify();
  }

  /**
   * Stream finished: hasMore becomes false once read to the end. The storage shrinks to exactly
   * the bytes kept (the buffer cannot grow any more), and listeners are released after this last
   * notification.
   */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#compact();
    this.#notify();
    this.#listeners = undefined;
  }

  /** Notified after each append/end (for long-poll waiters); returns unsubscribe. */
  onAppend(listener: () => void): () => void {
    // After end() nothing is ever notified again: keep no reference to the listener.
    if (this.#ended) return () => {};
    (this.#listeners ??= new Set()).add(listener);
    return () => {
      this.#listeners?.delete(listener);
    };
  }

  /**
   * One page from cursor (default: the start). maxBytes defaults to MAX_PAGE_BYTES, bigger values
   * are clamped. A cursor before the retained bytes yields a gap; one beyond the end is refused.
   */
  read(cursor?: string, maxBytes: number = MAX_PAGE_BYTES): Page {
    return readPage(this, cursor, maxBytes);
  }

  /**
   * For a run result: output = head (≤ headLimit bytes from offset 0, from the pinned head even if
   * dropped from the ring), tail = last ≤ tailLimit bytes, omittedBytes = bytes between. When
   * everything fits in headLimit + tailLimit, output is all of it and there is no tail. nextCursor
   * is the offset just after the head, so the middle can be paged.
   */
  summary(headLimit: number, tailLimit: number): Summary {
    return summarize(this, { headLimit, tailLimit });
  }

  #updateHeadLen(): void {
    if (this.#total <= this.#headCap) {
      this.#headLen = this.#total;
    } else if (!this.#headDone) {
      // The head just became complete: do not let it end inside a character. Not pinned yet
      // means the ring still holds offsets [0, #total) at their own indexes.
      const bytes = this.#headPinned ? this.#head : this.#ring;
      this.#headLen = completeEnd(bytes, 0, this.#headCap);
      this.#headDone = true;
    }
  }

  /** Trims the ring and the pinned head to the bytes they hold (their free tails). */
  #compact(): void {
    const total = this.#total;
    // Nothing dropped: the ring holds [0, total) at the same indexes, and may be longer.
    if (total <= this.#retention && this.#ring.length > total) {
      this.#ring = total === 0 ? EMPTY : this.#ring.slice(0, total);
    }
    // A complete head is never written again and never read past #headLen.
    if (this.#headDone && this.#head.length > this.#headLen) {
      this.#head = this.#headLen === 0 ? EMPTY : this.#head.slice(0, this.#headLen);
    }
  }

  // ByteSource: how readPage and summarize see the ring and the pinned head.

  /** Offset x can be read: it is in the ring or in the pinned head (or is the end). */
  available(x: number): boolean {
    return x >= this.startOffset || x < this.#headLen;
  }

  /** Where readable bytes starting at an available offset x stop being contiguous. */
  contiguousEnd(x: number): number {
    const start = this.startOffset;
    if (x >= start || this.#headLen >= start) return this.#total;
    return this.#headLen;
  }

  /**
   * First readable offset after the dropped bytes (there is one gap: between the pinned head and
   * the ring), skipping continuation bytes of a cut character.
   */
  gapEnd(): number {
    let to = this.startOffset;
    for (let k = 0; k < 3 && to < this.#total && isCont(this.byteAt(to)); k++) to++;
    return to;
  }

  /** The ring: it always reaches the end. */
  lastRun(): { start: number; resume: number } {
    return { start: this.startOffset, resume: this.gapEnd() };
  }

  /** The byte at a readable offset. */
  byteAt(off: number): number {
    if (off < this.startOffset) return this.#head[off]!;
    return this.#ring[off % this.#ring.length]!;
  }

  /** Text of bytes [from, to), which must be readable and contiguous. */
  decode(from: number, to: number): string {
    if (to <= from) return "";
    const start = this.startOffset;
    const parts: Uint8Array[] = [];
    if (from < start) {
      parts.push(this.#head.subarray(from, Math.min(to, start)));
      from = start;
    }
    if (from < to) {
      const cap = this.#ring.length;
      const p = from % cap;
      const len = to - from;
      if (p + len <= cap) {
        parts.push(this.#ring.subarray(p, p + len));
      } else {
        parts.push(this.#ring.subarray(p), this.#ring.subarray(0, p + len - cap));
      }
    }
    if (parts.length === 1) return decoder.decode(parts[0]);
    let text = "";
    for (let k = 0; k < parts.length; k++) {
      text += decoder.decode(parts[k], { stream: k < parts.length - 1 });
    }
    return text;
  }

  #notify(): void {
    if (this.#listeners === undefined) return;
    for (const listener of this.#listeners) {
      try {
        listener();
      } catch (err) {
        // A failing waiter must not break the producer or the other waiters.
        log.error("onAppend listener threw", { error: err });
      }
    }
  }
}
