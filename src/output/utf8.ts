/**
 * Byte-level UTF-8 rules shared by everything here that must not split a character: the VT
 * cleaner's pending line, the cursor buffer's pinned head, page ends, and the spool's segment
 * edges. No decoding: callers decode at the edges.
 */

/** A continuation byte (10xxxxxx): never the first byte of a character. */
export const isCont = (b: number): boolean => (b & 0xc0) === 0x80;

/** Expected length of a UTF-8 sequence from its lead byte (1 for ASCII and invalid leads). */
export function utf8Length(lead: number): number {
  if (lead < 0xc0) return 1;
  if (lead < 0xe0) return 2;
  if (lead < 0xf0) return 3;
  if (lead < 0xf8) return 4;
  return 1;
}

/**
 * End of the whole characters in bytes[from, end): `end`, or the start of the last character when
 * its last bytes are missing. Looks at most 4 bytes back; invalid UTF-8 is left as it is.
 */
export function completeEnd(bytes: Uint8Array, from: number, end: number): number {
  for (let k = end - 1; k >= from && k >= end - 4; k--) {
    const b = bytes[k]!;
    if (isCont(b)) continue;
    return end - k < utf8Length(b) ? k : end;
  }
  return end;
}
