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

/** Standard base64 of bytes, without building a per-byte string of the whole input. */
export function encodeBase64(bytes: Uint8Array): string {
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(bin);
}

/** Bytes of standard base64 (callers check the alphabet first; atob throws otherwise). */
export function decodeBase64(text: string): Uint8Array {
  const bin = atob(text);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
