/** Newline-delimited framing over a byte stream (MCP's stdio framing): bounded lines. */
import { concatBytes } from "../shared/mod.ts";

/** Longest line read (a request); the HTTP endpoint has the same bound on a body. */
export const MAX_LINE_BYTES = 4 * 1024 * 1024;

export type LineItem =
  | { kind: "line"; bytes: Uint8Array }
  /** A line over the bound, reported at its end with its last TAIL_BYTES (a request's id is there). */
  | { kind: "too_large"; tail: Uint8Array };

/** Bytes of a too-large line's end kept for its report. */
export const TAIL_BYTES = 256;

/** Bytes read at once; one buffer per reader, reused for every read. */
const READ_BYTES = 64 * 1024;

/** The last TAIL_BYTES of `kept` followed by `more` (a copy). */
function tailOf(kept: Uint8Array, more: Uint8Array): Uint8Array {
  if (more.length >= TAIL_BYTES) return more.slice(more.length - TAIL_BYTES);
  const both = concatBytes([kept, more], kept.length + more.length);
  return both.slice(Math.max(0, both.length - TAIL_BYTES));
}

/**
 * Lines of a byte stream (without the newline), each at most `max` bytes. A yielded line may be
 * a view of the reader's buffer: use it before asking for the next one. A longer line is skipped
 * and reported once, at its end.
 */
export async function* readLines(
  conn: { read(p: Uint8Array): Promise<number | null> },
  max = MAX_LINE_BYTES,
): AsyncGenerator<LineItem> {
  let parts: Uint8Array[] = [];
  let partsLen = 0;
  let skipping = false;
  let tail: Uint8Array = new Uint8Array(0);
  const buf = new Uint8Array(READ_BYTES);
  for (;;) {
    const got = await conn.read(buf);
    if (got === null) break;
    const chunk = buf.subarray(0, got);
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(10, start);
      if (nl < 0) break;
      const piece = chunk.subarray(start, nl);
      if (skipping || partsLen + piece.length > max) {
        const last = skipping ? tail : concatBytes(parts, partsLen);
        skipping = false;
        yield { kind: "too_large", tail: tailOf(last, piece) };
        tail = new Uint8Array(0);
      } else {
        parts.push(piece);
        yield { kind: "line", bytes: concatBytes(parts, partsLen + piece.length) };
      }
      parts = [];
      partsLen = 0;
      start = nl + 1;
    }
    const rest = chunk.subarray(start);
    if (rest.length === 0) continue;
    if (skipping) {
      tail = tailOf(tail, rest);
      continue;
    }
    if (partsLen + rest.length > max) {
      // Over the bound before its newline: skip the rest of this line, report it at its end.
      skipping = true;
      tail = tailOf(concatBytes(parts, partsLen), rest);
      parts = [];
      partsLen = 0;
      continue;
    }
    parts.push(rest.slice());
    partsLen += rest.length;
  }
  if (skipping) yield { kind: "too_large", tail };
  else if (partsLen > 0) yield { kind: "line", bytes: concatBytes(parts, partsLen) };
}
