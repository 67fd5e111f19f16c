/** Newline-delimited framing over a byte stream (MCP's stdio framing): bounded lines. */
import { concatBytes } from "../shared/mod.ts";

/** Longest line read (a request); the HTTP endpoint has the same bound on a body. */
export const MAX_LINE_BYTES = 4 * 1024 * 1024;

export type LineItem = { kind: "line"; bytes: Uint8Array } | { kind: "too_large" };

/** Bytes read at once; one buffer per reader, reused for every read. */
const READ_BYTES = 64 * 1024;

/**
 * Lines of a byte stream (without the newline), each at most `max` bytes. A yielded line may be
 * a view of the reader's buffer: use it before asking for the next one.
 */
export async function* readLines(
  conn: { read(p: Uint8Array): Promise<number | null> },
  max = MAX_LINE_BYTES,
): AsyncGenerator<LineItem> {
  let parts: Uint8Array[] = [];
  let partsLen = 0;
  let skipping = false;
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
      if (skipping) skipping = false;
      else if (partsLen + piece.length > max) yield { kind: "too_large" };
      else {
        parts.push(piece);
        yield { kind: "line", bytes: concatBytes(parts, partsLen + piece.length) };
      }
      parts = [];
      partsLen = 0;
      start = nl + 1;
    }
    const rest = chunk.subarray(start);
    if (skipping || rest.length === 0) continue;
    if (partsLen + rest.length > max) {
      // Over the bound before its newline: answer once, then skip the rest of this line.
      yield { kind: "too_large" };
      skipping = true;
      parts = [];
      partsLen = 0;
      continue;
    }
    parts.push(rest.slice());
    partsLen += rest.length;
  }
  if (!skipping && partsLen > 0) yield { kind: "line", bytes: concatBytes(parts, partsLen) };
}
