/**
 * age X25519 identities (`AGE-SECRET-KEY-1…`): checking them, reading age-keygen files, making
 * new ones. X25519 only: Debian's age 1.1 has no post-quantum keys, and the vault must stay
 * readable with the `age` CLI.
 */
import { badArgument } from "./errors.ts";

/** age-encryption, loaded when a key is first derived or made (it costs ~30 ms of a start). */
const age = () => import("age-encryption");

const IDENTITY_RE = /^AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}$/;
const BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l";
const GEN = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];
/** Identity files are a few lines; anything bigger is not one. */
const MAX_IDENTITY_FILE_BYTES = 64 * 1024;

function bech32Polymod(values: readonly number[]): number {
  let chk = 1;
  for (const v of values) {
    const top = chk >>> 25;
    chk = ((chk & 0x1ffffff) << 5) ^ v;
    for (let i = 0; i < 5; i++) if ((top >>> i) & 1) chk ^= GEN[i]!;
  }
  return chk;
}

/** True when `s` is one well-formed X25519 identity line (bech32 checksum included). */
export function isIdentity(s: string): boolean {
  if (!IDENTITY_RE.test(s)) return false;
  const lower = s.toLowerCase();
  const hrp = "age-secret-key-";
  const data = [...lower.slice(hrp.length + 1)].map((c) => BECH32.indexOf(c));
  const values = [
    ...[...hrp].map((c) => c.charCodeAt(0) >> 5),
    0,
    ...[...hrp].map((c) => c.charCodeAt(0) & 31),
    ...data,
  ];
  // 52 groups of 5 bits carry the 32 key bytes (256 bits): the last group's 4 spare bits are 0.
  return bech32Polymod(values) === 1 && (data[51]! & 0x0f) === 0;
}

/** Throws INVALID_ARGUMENT unless `identity` is an X25519 identity line. */
export function checkIdentity(identity: string): void {
  if (typeof identity === "string" && isIdentity(identity)) return;
  if (typeof identity === "string" && identity.startsWith("AGE-SECRET-KEY-PQ-1")) {
    throw badArgument(
      "Post-quantum age identities are not supported by the vault",
      "Make an X25519 identity with `age-keygen` (Debian's age cannot read PQ files)",
    );
  }
  throw badArgument(
    "The vault identity is not an age X25519 identity",
    'Pass the "AGE-SECRET-KEY-1…" line from an `age-keygen` file',
  );
}

/**
 * The one identity in the text of an age-keygen file (`# created: …`, `# public key: …`
 * comments, blank lines, and one `AGE-SECRET-KEY-1…` line). Anything else is INVALID_ARGUMENT.
 */
export function parseIdentityFile(text: string): string {
  if (typeof text !== "string" || text.length > MAX_IDENTITY_FILE_BYTES) {
    throw badArgument(
      `The identity file is not an age-keygen file (more than ${MAX_IDENTITY_FILE_BYTES} bytes)`,
      "Pass the file `age-keygen -o` wrote",
    );
  }
  const found: string[] = [];
  const lines = text.split("\n");
  lines.forEach((raw, i) => {
    const line = raw.replace(/\r$/, "").trim();
    if (line === "" || line.startsWith("#")) return;
    if (!isIdentity(line)) {
      if (line.startsWith("AGE-SECRET-KEY-PQ-1")) checkIdentity(line);
      throw badArgument(
        `The identity file is not an age-keygen file: line ${i + 1} is not an age identity`,
        'It should hold comments and one "AGE-SECRET-KEY-1…" line, as `age-keygen -o` writes',
      );
    }
    found.push(line);
  });
  if (found.length !== 1) {
    throw badArgument(
      `The identity file holds ${found.length} identities; the vault uses exactly one`,
      "Make one with `age-keygen -o key.txt`",
    );
  }
  return found[0]!;
}

/** The recipient (`age1…`) of an X25519 identity line. */
export async function recipientOf(identity: string): Promise<string> {
  checkIdentity(identity);
  return await (await age()).identityToRecipient(identity);
}

/** A new X25519 identity line and its recipient, for `vault init --identity`. */
export async function generateIdentity(): Promise<{ identity: string; recipient: string }> {
  const { generateX25519Identity, identityToRecipient } = await age();
  const identity = await generateX25519Identity();
  return { identity, recipient: await identityToRecipient(identity) };
}
