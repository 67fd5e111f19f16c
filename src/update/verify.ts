/**
 * What makes a download trustworthy: its SHA-256 listed (exactly once) in `SHA256SUMS`, and that
 * file's Ed25519 signature (`SHA256SUMS.sig`, 64 raw bytes) under the pinned release key. Keys
 * are accepted as raw 32 bytes in base64 or as SPKI PEM (what `openssl pkey -pubout` prints).
 */
import { decodeBase64, encodeBase64 } from "../shared/mod.ts";
import { UpdateError } from "./error.ts";
import { parseSums, SUMS_FILE } from "./release.ts";

/**
 * The release signing key's public half, pinned here and in install.sh (a test keeps the two
 * equal). `TERMADA_RELEASE_PUBKEY` replaces it: an operator knob for private mirrors and tests.
 */
export const RELEASE_PUBKEY = "VCEA82QpRpMHbJGFdG2oticZpDiin5h423yIfEll3Fo=";

/** The DER prefix of an Ed25519 SubjectPublicKeyInfo; the raw key follows it. */
const SPKI_PREFIX = new Uint8Array([
  0x30,
  0x2a,
  0x30,
  0x05,
  0x06,
  0x03,
  0x2b,
  0x65,
  0x70,
  0x03,
  0x21,
  0x00,
]);

function pemBody(pem: string, label: string): Uint8Array {
  const m = new RegExp(`-----BEGIN ${label}-----([^-]+)-----END ${label}-----`).exec(pem);
  if (!m) throw new TypeError(`Not a PEM "${label}"`);
  return decodeBase64(m[1]!.replace(/\s+/g, ""));
}

/** The raw 32-byte Ed25519 public key in `text` (base64 raw key or SPKI PEM). */
export function parsePublicKey(text: string): Uint8Array {
  const t = text.trim();
  let raw: Uint8Array;
  try {
    if (t.includes("-----BEGIN PUBLIC KEY-----")) {
      const der = pemBody(t, "PUBLIC KEY");
      const prefixOk = der.length === 44 && SPKI_PREFIX.every((b, i) => der[i] === b);
      if (!prefixOk) throw new TypeError("not an Ed25519 key");
      raw = der.slice(12);
    } else {
      raw = decodeBase64(t);
    }
  } catch {
    raw = new Uint8Array();
  }
  if (raw.length !== 32) {
    throw new UpdateError(
      "BAD_SIGNATURE",
      "The release public key is not an Ed25519 key (base64 of 32 bytes, or SPKI PEM)",
    );
  }
  return raw;
}

/** The pinned release key, or the one in `TERMADA_RELEASE_PUBKEY` when that is set. */
export function releasePublicKey(override: string | undefined): Uint8Array {
  return parsePublicKey(override?.trim() ? override : RELEASE_PUBKEY);
}

export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Checks `bytes` against the one `SHA256SUMS` line for `name`; returns the hash. */
export async function checkSum(sumsText: string, name: string, bytes: Uint8Array): Promise<string> {
  let sums: Map<string, string>;
  try {
    sums = parseSums(sumsText);
  } catch (err) {
    throw new UpdateError("CHECKSUM_MISMATCH", (err as Error).message, { cause: err });
  }
  const want = sums.get(name);
  if (want === undefined) {
    throw new UpdateError("CHECKSUM_MISMATCH", `${SUMS_FILE} does not list "${name}"`);
  }
  const got = await sha256Hex(bytes);
  if (got !== want) {
    throw new UpdateError(
      "CHECKSUM_MISMATCH",
      `The SHA-256 of "${name}" is ${got}, ${SUMS_FILE} says ${want}`,
    );
  }
  return got;
}

/** Whether `sig` is a valid Ed25519 signature of `data` under the raw public key `pub`. */
export async function verifySignature(
  pub: Uint8Array,
  data: Uint8Array,
  sig: Uint8Array,
): Promise<boolean> {
  if (sig.length !== 64) return false;
  const key = await crypto.subtle.importKey(
    "raw",
    pub as Uint8Array<ArrayBuffer>,
    { name: "Ed25519" },
    false,
    ["verify"],
  );
  return await crypto.subtle.verify(
    { name: "Ed25519" },
    key,
    sig as Uint8Array<ArrayBuffer>,
    data as Uint8Array<ArrayBuffer>,
  );
}

/** A PKCS#8 PEM Ed25519 private key (`openssl genpkey -algorithm ed25519`), for signing. */
export async function importSigningKey(
  pem: string,
): Promise<{ key: CryptoKey; publicKey: string }> {
  let key: CryptoKey;
  try {
    key = await crypto.subtle.importKey(
      "pkcs8",
      pemBody(pem, "PRIVATE KEY") as Uint8Array<ArrayBuffer>,
      { name: "Ed25519" },
      true,
      ["sign"],
    );
  } catch (err) {
    throw new TypeError("The signing key is not an Ed25519 PKCS#8 PEM private key", {
      cause: err,
    });
  }
  const jwk = await crypto.subtle.exportKey("jwk", key);
  const raw = decodeBase64(jwk.x!.replace(/-/g, "+").replace(/_/g, "/") + "=");
  return { key, publicKey: encodeBase64(raw) };
}

export async function sign(key: CryptoKey, data: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(
    await crypto.subtle.sign({ name: "Ed25519" }, key, data as Uint8Array<ArrayBuffer>),
  );
}
