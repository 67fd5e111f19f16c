/** Random identifiers: a prefix and 12 base32 characters (60 bits), e.g. `job_k3j9x0a2m1qz`. */
const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

export function newId(prefix: string): string {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  let out = prefix + "_";
  for (const b of bytes) out += ALPHABET[b & 31];
  return out;
}

/** A secret of `bytes` random bytes as lowercase hex. */
export function randomHex(bytes: number): string {
  const b = crypto.getRandomValues(new Uint8Array(bytes));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

/** Prefixes of the ids Termada mints; the format is `<prefix>_` + 12 of ALPHABET (one place). */
export type IdKind = "job" | "ses" | "apr" | "msn" | "act" | "fwd";
const ID_FORMAT: Record<IdKind, RegExp> = {
  job: /^job_[0-9a-hjkmnp-tv-z]{12}$/,
  ses: /^ses_[0-9a-hjkmnp-tv-z]{12}$/,
  apr: /^apr_[0-9a-hjkmnp-tv-z]{12}$/,
  msn: /^msn_[0-9a-hjkmnp-tv-z]{12}$/,
  act: /^act_[0-9a-hjkmnp-tv-z]{12}$/,
  fwd: /^fwd_[0-9a-hjkmnp-tv-z]{12}$/,
};

/** True when `id` has the exact format of an id of that kind (no lookup). */
export function isId(kind: IdKind, id: string): boolean {
  return ID_FORMAT[kind].test(id);
}

/** The format of an id of that kind, for schemas. */
export function idPattern(kind: IdKind): RegExp {
  return ID_FORMAT[kind];
}
