/**
 * Reading an age file without decrypting it: armor detection, and which kind of key the header
 * asks for. Cheap and synchronous, so it runs on the caller's thread; the crypto is in the worker.
 */
import { decodeArmor } from "./armor.ts";
import { VaultError } from "./errors.ts";

export type VaultProtection = "passphrase" | "identity";

const VERSION_LINE = "age-encryption.org/v1";
const ARMOR_BEGIN = "-----BEGIN AGE ENCRYPTED FILE-----";
/** Headers longer than this are refused (ours are ~200 bytes; 1000 recipients ~ 120 KiB). */
const MAX_HEADER_BYTES = 256 * 1024;
const MAX_LINE_BYTES = 4096;
const BODY_LINE_RE = /^[A-Za-z0-9+/]{0,64}$/;

function corrupt(path: string, what: string, cause?: unknown): VaultError {
  return new VaultError("VAULT_CORRUPT", `Vault file "${path}" is not a valid age file: ${what}`, {
    cause,
    hint: "Restore it from a backup, or remove it with `termada vault reset` and start again",
  });
}

/** The binary age file in `bytes`, decoding ASCII armor when the file is armored. */
export function binaryAge(bytes: Uint8Array, path: string): Uint8Array {
  const head = new TextDecoder().decode(bytes.subarray(0, 64)).trimStart();
  if (head.startsWith(ARMOR_BEGIN)) {
    let text: string;
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch (err) {
      throw corrupt(path, "the armor is not text", err);
    }
    try {
      return decodeArmor(text);
    } catch (err) {
      throw corrupt(path, `bad ASCII armor (${err instanceof Error ? err.message : err})`, err);
    }
  }
  return bytes;
}

/**
 * What the header of a binary age file asks for: one `scrypt` stanza alone is a passphrase; one
 * or more `X25519` stanzas is an identity. Anything else throws VAULT_CORRUPT.
 */
export function headerProtection(age: Uint8Array, path: string): VaultProtection {
  const types: string[] = [];
  let at = 0;
  let first = true;
  for (;;) {
    const nl = age.indexOf(0x0a, at);
    if (nl < 0 || nl > MAX_HEADER_BYTES) throw corrupt(path, "the header is truncated or too long");
    if (nl - at > MAX_LINE_BYTES) throw corrupt(path, "a header line is too long");
    const line = String.fromCharCode(...age.subarray(at, nl));
    at = nl + 1;
    if (first) {
      if (line !== VERSION_LINE) throw corrupt(path, `it does not start with "${VERSION_LINE}"`);
      first = false;
    } else if (line.startsWith("-> ")) {
      const args = line.slice(3).split(" ");
      if (args.some((a) => a.length === 0)) throw corrupt(path, "a stanza line is malformed");
      types.push(args[0]!);
    } else if (line.startsWith("--- ")) {
      break;
    } else if (types.length === 0 || !BODY_LINE_RE.test(line)) {
      throw corrupt(path, "the header has a malformed line");
    }
  }
  if (types.length === 0) throw corrupt(path, "the header has no recipient stanza");
  if (types.includes("scrypt")) {
    if (types.length !== 1) throw corrupt(path, "a scrypt stanza is not alone in the header");
    return "passphrase";
  }
  if (types.includes("X25519")) return "identity";
  throw corrupt(
    path,
    `it is encrypted to recipient types termada cannot use (${[...new Set(types)].join(", ")})`,
  );
}
