/**
 * Credentials on the wire, handled in one place: the Bearer token of an Authorization header and
 * the constant-time comparison of two secrets.
 */
import { timingSafeEqual } from "node:crypto";

const BEARER = /^Bearer\s+(\S+)\s*$/i;
/** Longest token accepted (longer headers are not tokens of ours). */
export const MAX_TOKEN_LENGTH = 4096;

/** The token of `Authorization: Bearer <token>`, or undefined for anything else. */
export function bearerToken(header: string | null | undefined): string | undefined {
  if (header === null || header === undefined || header.length > MAX_TOKEN_LENGTH + 16) {
    return undefined;
  }
  return BEARER.exec(header)?.[1];
}

const encoder = new TextEncoder();

/** Compares two secrets in time that depends only on their lengths. */
export function sameSecret(a: string, b: string): boolean {
  const x = encoder.encode(a);
  const y = encoder.encode(b);
  if (x.length !== y.length) return false;
  return timingSafeEqual(x, y);
}
