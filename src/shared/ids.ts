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
