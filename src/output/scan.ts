/**
 * One pass over a chunk of terminal output that tells the later stages what they can skip.
 *
 * The session's byte path runs several scans over every byte: the marker parser looks for ESC,
 * the raw redactor for the bytes its patterns anchor on, the VT cleaner for control bytes, the
 * job's redactor for anchors again. Bulk output (a build log, `yes`, a file dump) usually has none
 * of what they look for, so the session classifies each chunk once (two bytes per table lookup,
 * about 4 GB/s here) and each stage takes the fast path its flags allow.
 *
 * Flags over-approximate: a set flag means "may contain", a clear flag means "contains none".
 * A stage that is handed no flags assumes every flag is set.
 */

/** ESC (0x1b): escape sequences and the shell integration's markers. */
export const HAS_ESC = 1;
/** A control byte the VT cleaner acts on: C0 other than TAB, LF and ESC (CR, BS, BEL…), or DEL. */
export const HAS_CONTROL = 2;
/** A byte a built-in redaction pattern anchors on (see redact.ts: `_ A x J - = :`). */
export const HAS_ANCHOR = 4;
/** Every flag: what a stage assumes when it is told nothing. */
export const ALL_FLAGS = HAS_ESC | HAS_CONTROL | HAS_ANCHOR;

/** The anchor bytes of the built-in redaction patterns (kept in step with redact.ts). */
export const ANCHOR_BYTES = "_AxJ-=:";

/** Flags of one byte. */
export const BYTE_FLAGS: Uint8Array = new Uint8Array(256);
const BYTE = BYTE_FLAGS;
for (let b = 0; b < 0x20; b++) if (b !== 0x09 && b !== 0x0a) BYTE[b] = HAS_CONTROL;
BYTE[0x1b] = HAS_ESC;
BYTE[0x7f] = HAS_CONTROL;
for (const c of ANCHOR_BYTES) BYTE[c.charCodeAt(0)] = HAS_ANCHOR;

/** Flags of two adjacent bytes, indexed by their 16-bit value (either byte order: OR is symmetric). */
export const PAIR_FLAGS: Uint8Array = new Uint8Array(65536);
const PAIR = PAIR_FLAGS;
for (let v = 0; v < 65536; v++) PAIR[v] = BYTE[v & 0xff]! | BYTE[v >> 8]!;

/** Below this many bytes a plain byte loop beats making a 16-bit view. */
const SHORT = 64;

/**
 * `d` seen as 16-bit words from its first even-aligned byte: word k holds d[shift + 2k] and
 * d[shift + 2k + 1] (a Uint16Array needs an even byte offset).
 */
export interface WordView {
  w: Uint16Array;
  shift: number;
}

export function wordView(d: Uint8Array): WordView {
  const shift = d.byteOffset & 1;
  return { w: new Uint16Array(d.buffer, d.byteOffset + shift, (d.length - shift) >> 1), shift };
}

/** The flags of the bytes in `d` (see the HAS_* constants). */
export function classify(d: Uint8Array): number {
  const n = d.length;
  let acc = 0;
  let i = 0;
  if (n < SHORT) {
    for (; i < n; i++) acc |= BYTE[d[i]!]!;
    return acc;
  }
  const { w, shift } = wordView(d);
  if (shift !== 0) acc |= BYTE[d[i++]!]!;
  const words = w.length;
  let a = 0;
  let b = 0;
  const unrolled = words & ~3;
  let k = 0;
  for (; k < unrolled; k += 4) {
    a |= PAIR[w[k]!]! | PAIR[w[k + 1]!]!;
    b |= PAIR[w[k + 2]!]! | PAIR[w[k + 3]!]!;
  }
  for (; k < words; k++) a |= PAIR[w[k]!]!;
  acc |= a | b;
  for (i += words * 2; i < n; i++) acc |= BYTE[d[i]!]!;
  return acc;
}
