/**
 * The retained output of one job or session, paged by opaque cursors (byte offsets). A ring keeps
 * the newest retentionBytes; the first headBytes are pinned for summaries. Pages and summaries never
 * split a UTF-8 character and say exactly which bytes were dropped.
 */
import { invalidArgument, logger } from "../shared/mod.ts";

export interface CursorBufferOptions {
  /** Newest bytes kept (default 8 MiB); older bytes are dropped. */
  retentionBytes?: number;
  /** First bytes kept forever for summaries (default 16 KiB). */
  headBytes?: number;
}

export interface Page {
  output: string;
  nextCursor: string;
  hasMore: boolean;
  /** Bytes between the requested cursor and the first byte returned that are gone. */
  gap?: { fromOffset: number; toOffset: number; droppedBytes: number };
}

export interface Summary {
  output: string;
  tail?: string;
  omittedBytes?: number;
  nextCursor: string;
  hasMore: boolean;
  gap?: Page["gap"];
}

/** Largest page a read returns. */
export const MAX_PAGE_BYTES = 65536;

const DEFAULT_RETENTION = 8 * 1024 * 1024;
const DEFAULT_HEAD = 16 * 1024;
const INITIAL_CAPACITY = 64 * 1024;
const EMPTY = new Uint8Array(0);
/** ignoreBOM: a leading U+FEFF is output like any other character (exact paging). */
const decoder = new TextDecoder("utf-8", { ignoreBOM: true });
const log = logger("output");

const CURSOR = /^c(?:0|[1-9a-z][0-9a-z]{0,10})$/;

/** Opaque cursor for a byte offset. */
export function encodeCursor(offset: number): string {
  if (!Number.isSafeInteger(offset) || offset < 0) {
    throw new RangeError(`Cannot encode cursor for offset ${offset}: not a non-negative integer`);
  }
  return "c" + offset.toString(36);
}

/** Byte offset of a cursor; a malformed cursor is an INVALID_ARGUMENT. */
export function decodeCursor(cursor: string): number {
  if (typeof cursor !== "string" || !CURSOR.test(cursor)) {
    const shown = typeof cursor === "string" ? cursor.slice(0, 40) : String(cursor);
    throw invalidArgument(
      `Cannot read from cursor "${shown}": it is malformed`,
      "Pass a nextCursor returned by an earlier read, or omit the cursor to read from the start",
    );
  }
  const offset = parseInt(cursor.slice(1), 36);
  if (!Number.isSafeInteger(offset)) {
    throw invalidArgument(`Cannot read from cursor "${cursor}": it is out of range`);
  }
  return offset;
}

const isCont = (b: number): boolean => (b & 0xc0) === 0x80;

/** Expected length of a UTF-8 sequence from its lead byte (1 for ASCII and invalid leads). */
function utf8Length(lead: number): number {
  if (lead < 0xc0) return 1;
  if (lead < 0xe0) return 2;
  if (lead < 0xf0) return 3;
  if (lead < 0xf8) return 4;
  return 1;
}

function checkLimit(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw invalidArgument(`Cannot summarize output: ${name} must be a non-negative integer`);
  }
}

export class CursorBuffer {
  readonly #retention: number;
  readonly #headCap: number;
  /** Ring of the newest bytes; offset x lives at x % length. Grows up to #retention. */
  #ring: Uint8Array = EMPTY;
  /** The first bytes ever appended (up to #headCap). */
  #head: Uint8Array = EMPTY;
  /** Usable head bytes: ends on a character boundary once the head is complete. */
  #headLen = 0;
  #headDone = false;
  #total = 0;
  #ended = false;
  readonly #listeners = new Set<() => void>();

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

    if (total < this.#headCap) {
      if (this.#head.length === 0) this.#head = new Uint8Array(this.#headCap);
      this.#head.set(bytes.subarray(0, Math.min(len, this.#headCap - total)), total);
    }

    let ring = this.#ring;
    if (ring.length < this.#retention && newTotal > ring.length) {
      // Still growing: nothing has wrapped, offsets [0, total) sit at the same indexes.
      const size = Math.min(this.#retention, Math.max(ring.length * 2, newTotal, INITIAL_CAPACITY));
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

  /** Stream finished: hasMore becomes false once read to the end. */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#notify();
  }

  /** Notified after each append/end (for long-poll waiters); returns unsubscribe. */
  onAppend(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /**
   * One page from cursor (default: the start). maxBytes defaults to MAX_PAGE_BYTES, bigger values
   * are clamped. A cursor before the retained bytes yields a gap; one beyond the end is refused.
   */
  read(cursor?: string, maxBytes: number = MAX_PAGE_BYTES): Page {
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 1) {
      throw invalidArgument(
        `Cannot read output: maxBytes must be a positive integer, got ${maxBytes}`,
      );
    }
    const limit = Math.min(maxBytes, MAX_PAGE_BYTES);
    let x = cursor === undefined ? 0 : decodeCursor(cursor);
    if (x > this.#total) {
      throw invalidArgument(
        `Cannot read from cursor "${cursor}": it is beyond the end of the output (${this.#total} bytes)`,
        "Pass a nextCursor returned by an earlier read of this output",
      );
    }
    let gap: Page["gap"];
    if (!this.#available(x)) {
      const to = this.#gapEnd();
      gap = { fromOffset: x, toOffset: to, droppedBytes: to - x };
      x = to;
    }
    const avail = this.#contiguousEnd(x);
    const end = this.#pageEnd(x, Math.min(x + limit, avail), avail, true);
    const page: Page = {
      output: this.#decode(x, end),
      nextCursor: encodeCursor(end),
      hasMore: end < this.#total || !this.#ended,
    };
    if (gap) page.gap = gap;
    return page;
  }

  /**
   * For a run result: output = head (≤ headLimit bytes from offset 0, from the pinned head even if
   * dropped from the ring), tail = last ≤ tailLimit bytes, omittedBytes = bytes between. When
   * everything fits in headLimit + tailLimit, output is all of it and there is no tail. nextCursor
   * is the offset just after the head, so the middle can be paged.
   */
  summary(headLimit: number, tailLimit: number): Summary {
    checkLimit("headLimit", headLimit);
    checkLimit("tailLimit", tailLimit);
    const total = this.#total;
    const start = this.startOffset;
    const avail0 = this.#contiguousEnd(0);
    if (avail0 === total && total <= headLimit + tailLimit) {
      const end = this.#pageEnd(0, total, total, false);
      return {
        output: this.#decode(0, end),
        nextCursor: encodeCursor(end),
        hasMore: end < total || !this.#ended,
      };
    }
    const head = this.#pageEnd(0, Math.min(headLimit, avail0), avail0, false);
    let tailStart = Math.max(head, total - tailLimit);
    let gap: Page["gap"];
    if (tailStart < start) {
      tailStart = this.#gapEnd();
    } else {
      for (let k = 0; k < 3 && tailStart < total && isCont(this.#byteAt(tailStart)); k++) {
        tailStart++;
      }
    }
    if (!this.#available(head)) {
      const to = this.#gapEnd();
      gap = { fromOffset: head, toOffset: to, droppedBytes: to - head };
    }
    const summary: Summary = {
      output: this.#decode(0, head),
      tail: this.#decode(tailStart, total),
      omittedBytes: tailStart - head,
      nextCursor: encodeCursor(head),
      hasMore: true,
    };
    if (gap) summary.gap = gap;
    return summary;
  }

  #updateHeadLen(): void {
    const cap = this.#headCap;
    if (this.#total <= cap) {
      this.#headLen = this.#total;
    } else if (!this.#headDone) {
      // The head just became complete: do not let it end inside a character.
      let len = cap;
      for (let k = cap - 1; k >= 0 && k >= cap - 4; k--) {
        const b = this.#head[k]!;
        if (isCont(b)) continue;
        if (cap - k < utf8Length(b)) len = k;
        break;
      }
      this.#headLen = len;
      this.#headDone = true;
    }
  }

  /** Offset x can be read: it is in the ring or in the pinned head (or is the end). */
  #available(x: number): boolean {
    return x >= this.startOffset || x < this.#headLen;
  }

  /** Where readable bytes starting at an available offset x stop being contiguous. */
  #contiguousEnd(x: number): number {
    const start = this.startOffset;
    if (x >= start || this.#headLen >= start) return this.#total;
    return this.#headLen;
  }

  /** First readable offset after the dropped bytes, skipping continuation bytes of a cut character. */
  #gapEnd(): number {
    let to = this.startOffset;
    for (let k = 0; k < 3 && to < this.#total && isCont(this.#byteAt(to)); k++) to++;
    return to;
  }

  #byteAt(off: number): number {
    if (off < this.startOffset) return this.#head[off]!;
    return this.#ring[off % this.#ring.length]!;
  }

  /**
   * Adjusts a page end e (x < e ≤ avail) so that it does not split a character. With grow, a single
   * character longer than the page is returned whole (progress); without, the end only backs off.
   */
  #pageEnd(x: number, e: number, avail: number, grow: boolean): number {
    if (e <= x) return x;
    if (e < avail) {
      if (!isCont(this.#byteAt(e))) return e;
      let k = e - 1;
      for (let steps = 0; k > x && steps < 3 && isCont(this.#byteAt(k)); steps++) k--;
      const lead = this.#byteAt(k);
      if (isCont(lead) || k + utf8Length(lead) <= e) return e; // invalid UTF-8: any cut will do
      if (k > x) return k;
      if (!grow) return x;
      let end = x + 1;
      const stop = Math.min(avail, x + utf8Length(lead));
      while (end < stop && isCont(this.#byteAt(end))) end++;
      return end;
    }
    // At the end of the available bytes: hold back a character whose last bytes are still to come.
    if (avail !== this.#total || this.#ended) return e;
    for (let k = e - 1; k >= x && k >= e - 4; k--) {
      const b = this.#byteAt(k);
      if (isCont(b)) continue;
      return e - k < utf8Length(b) ? k : e;
    }
    return e;
  }

  /** Text of bytes [from, to), which must be readable and contiguous. */
  #decode(from: number, to: number): string {
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
