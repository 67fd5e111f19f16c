/**
 * age's ASCII armor (C2SP age, "ASCII armor"), decoded strictly and without the age-encryption
 * package, so the daemon's start does not load it (its curves and ciphers cost ~30 ms of every
 * start; the crypto runs in the worker, which loads it when a vault is first used).
 *
 * Accepted: optional whitespace around the armor; the BEGIN line; lines of canonical standard
 * base64, each 64 characters but the last (1–64, padded with `=` only there); the END line; LF
 * or CRLF line ends. Anything else throws, saying what is wrong.
 */

import { decodeBase64, encodeBase64 } from "../shared/mod.ts";

const BEGIN = "-----BEGIN AGE ENCRYPTED FILE-----";
const END = "-----END AGE ENCRYPTED FILE-----";
const LINE = 64;
const FULL_LINE_RE = /^[A-Za-z0-9+/]{64}$/;
const LAST_LINE_RE = /^[A-Za-z0-9+/]{2,64}={0,2}$/;

/** The binary age file in armored `text`; throws an Error naming the first problem. */
export function decodeArmor(text: string): Uint8Array {
  const trimmed = text.replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, "");
  const lines = trimmed.split("\n").map((l) => (l.endsWith("\r") ? l.slice(0, -1) : l));
  if (lines[0] !== BEGIN) throw new Error("the armor does not start with its BEGIN line");
  if (lines.length < 2 || lines[lines.length - 1] !== END) {
    throw new Error("the armor does not end with its END line");
  }
  const body = lines.slice(1, -1);
  if (body.length === 0) return new Uint8Array(0);
  for (let i = 0; i < body.length - 1; i++) {
    if (!FULL_LINE_RE.test(body[i]!)) {
      throw new Error(`armor line ${i + 2} is not ${LINE} base64 characters`);
    }
  }
  const last = body[body.length - 1]!;
  if (last.length > LINE || !LAST_LINE_RE.test(last) || last.length % 4 !== 0) {
    throw new Error(`armor line ${body.length + 1} is not a valid last base64 line`);
  }
  const b64 = body.join("");
  let bytes: Uint8Array;
  try {
    bytes = decodeBase64(b64);
  } catch {
    throw new Error("the armor is not valid base64");
  }
  // Canonical only: the unused bits of the last character must be zero (one encoding per file).
  if (encodeBase64(bytes) !== b64) throw new Error("the armor's base64 is not canonical");
  return bytes;
}
