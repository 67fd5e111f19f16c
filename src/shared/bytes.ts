/** Byte helpers every layer uses. */

/**
 * `parts` joined into one array (`total` = the sum of their lengths, computed when omitted).
 * A single part is returned as it is, not copied.
 */
export function concatBytes(parts: readonly Uint8Array[], total?: number): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  let size = total ?? 0;
  if (total === undefined) { for (const p of parts) size += p.length; }
  const out = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
