/**
 * The cursor paging rules, written once for every store of output bytes (CursorBuffer in memory,
 * SpoolReader on disk): opaque cursors, explicit gaps for dropped bytes, and pages and summaries
 * that never split a UTF-8 character. A store describes its bytes as a ByteSource; what a page
 * holds is decided here only, so a cursor means the same in every store.
 */
import { invalidArgument } from "../shared/mod.ts";
import { isCont, utf8Length } from "./utf8.ts";

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

/**
 * Output bytes at offsets [0, totalBytes), of which some runs are still readable. Where dropped
 * bytes follow a run, the run must end on a whole character; gapEnd and a run's resume must be
 * character starts (past the continuation bytes of a cut character).
 */
export interface ByteSource {
  /** Bytes ever written, readable or not. */
  readonly totalBytes: number;
  /** No more bytes will come: a character cut at the very end is returned as it is. */
  readonly ended: boolean;
  /** The offset can be read, or is totalBytes. */
  available(offset: number): boolean;
  /** Where the readable bytes from an available offset stop being contiguous. */
  contiguousEnd(offset: number): number;
  /** First readable offset after the dropped bytes at an offset that is not available. */
  gapEnd(offset: number): number;
  /** The readable run that reaches totalBytes (a tail comes from it); undefined if none does. */
  lastRun(): { readonly start: number; readonly resume: number } | undefined;
  /** The byte at a readable offset. */
  byteAt(offset: number): number;
  /** Text of the readable, contiguous bytes [from, to). */
  decode(from: number, to: number): string;
}

/** Largest page a read returns. */
export const MAX_PAGE_BYTES = 65536;

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

/**
 * One page from cursor (default: the start). maxBytes defaults to MAX_PAGE_BYTES, bigger values
 * are clamped. A cursor before the readable bytes yields a gap; one beyond the end is refused.
 */
export function readPage(
  source: ByteSource,
  cursor?: string,
  maxBytes: number = MAX_PAGE_BYTES,
): Page {
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 1) {
    throw invalidArgument(
      `Cannot read output: maxBytes must be a positive integer, got ${maxBytes}`,
    );
  }
  const limit = Math.min(maxBytes, MAX_PAGE_BYTES);
  const total = source.totalBytes;
  let x = cursor === undefined ? 0 : decodeCursor(cursor);
  if (x > total) {
    throw invalidArgument(
      `Cannot read from cursor "${cursor}": it is beyond the end of the output (${total} bytes)`,
      "Pass a nextCursor returned by an earlier read of this output",
    );
  }
  let gap: Page["gap"];
  if (!source.available(x)) {
    const to = source.gapEnd(x);
    gap = { fromOffset: x, toOffset: to, droppedBytes: to - x };
    x = to;
  }
  const avail = source.contiguousEnd(x);
  const end = pageEnd(source, x, Math.min(x + limit, avail), avail, true);
  const page: Page = {
    output: source.decode(x, end),
    nextCursor: encodeCursor(end),
    hasMore: end < total || !source.ended,
  };
  if (gap) page.gap = gap;
  return page;
}

/**
 * For a run result: output = head (≤ headLimit bytes from offset 0), tail = last ≤ tailLimit
 * bytes, omittedBytes = bytes between. When everything is readable and fits in headLimit +
 * tailLimit, output is all of it and there is no tail. nextCursor is the offset just after the
 * head, so the middle can be paged.
 */
export function summarize(
  source: ByteSource,
  limits: { headLimit: number; tailLimit: number },
): Summary {
  const { headLimit, tailLimit } = limits;
  checkLimit("headLimit", headLimit);
  checkLimit("tailLimit", tailLimit);
  const total = source.totalBytes;
  const avail0 = source.contiguousEnd(0);
  if (avail0 === total && total <= headLimit + tailLimit) {
    const end = pageEnd(source, 0, total, total, false);
    return {
      output: source.decode(0, end),
      nextCursor: encodeCursor(end),
      hasMore: end < total || !source.ended,
    };
  }
  const head = pageEnd(source, 0, Math.min(headLimit, avail0), avail0, false);
  // The tail must be contiguous up to the end: it starts in the last run at the earliest.
  const run = source.lastRun();
  let tailStart = Math.max(head, total - tailLimit);
  if (run === undefined) {
    tailStart = total;
  } else if (tailStart < run.start) {
    tailStart = run.resume;
  } else {
    for (let k = 0; k < 3 && tailStart < total && isCont(source.byteAt(tailStart)); k++) {
      tailStart++;
    }
  }
  const summary: Summary = {
    output: source.decode(0, head),
    tail: source.decode(tailStart, total),
    omittedBytes: tailStart - head,
    nextCursor: encodeCursor(head),
    hasMore: true,
  };
  if (!source.available(head)) {
    const to = source.gapEnd(head);
    summary.gap = { fromOffset: head, toOffset: to, droppedBytes: to - head };
  }
  return summary;
}

/**
 * Adjusts a page end e (x < e ≤ avail) so that it does not split a character. With grow, a single
 * character longer than the page is returned whole (progress); without, the end only backs off.
 */
function pageEnd(source: ByteSource, x: number, e: number, avail: number, grow: boolean): number {
  if (e <= x) return x;
  if (e < avail) {
    if (!isCont(source.byteAt(e))) return e;
    let k = e - 1;
    for (let steps = 0; k > x && steps < 3 && isCont(source.byteAt(k)); steps++) k--;
    const lead = source.byteAt(k);
    if (isCont(lead) || k + utf8Length(lead) <= e) return e; // invalid UTF-8: any cut will do
    if (k > x) return k;
    if (!grow) return x;
    let end = x + 1;
    const stop = Math.min(avail, x + utf8Length(lead));
    while (end < stop && isCont(source.byteAt(end))) end++;
    return end;
  }
  // At the end of the available bytes: hold back a character whose last bytes are still to come.
  // A run that a gap follows already ends on a whole character.
  if (avail !== source.totalBytes || source.ended) return e;
  for (let k = e - 1; k >= x && k >= e - 4; k--) {
    const b = source.byteAt(k);
    if (isCont(b)) continue;
    return e - k < utf8Length(b) ? k : e;
  }
  return e;
}

function checkLimit(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw invalidArgument(`Cannot summarize output: ${name} must be a non-negative integer`);
  }
}
